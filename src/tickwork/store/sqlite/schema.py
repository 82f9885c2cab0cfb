"""The schema: the migrations, applied in order under the write lock, and the version a
database has (``PRAGMA user_version``). ``schema.sql`` beside this module is the schema
they make (a test keeps it so).
"""

from __future__ import annotations

from pathlib import Path

from tickwork.errors import MigrationError
from tickwork.store.queries import migration_files
from tickwork.store.sqlite.core import SqliteCore
from tickwork.store.sqlite.driver import statements

HERE = Path(__file__).parent
MIGRATIONS = migration_files(HERE / "migrations")
LATEST_VERSION = MIGRATIONS[-1][0]


class SqliteSchema(SqliteCore):
    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self._write() as conn:
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            if current > LATEST_VERSION:
                raise MigrationError(
                    f"{self.path} has schema version {current}; this tickwork knows up to "
                    f"{LATEST_VERSION}: upgrade tickwork"
                )
            for version, path in MIGRATIONS:
                if version <= current:
                    continue
                for statement in statements(path.read_text()):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {version}")
                applied.append(version)
        return applied

    def schema_version(self) -> tuple[int, int]:
        with self.sqlite.read() as tx:
            current = tx.all("PRAGMA user_version", {})[0][0]
        return int(current), LATEST_VERSION
