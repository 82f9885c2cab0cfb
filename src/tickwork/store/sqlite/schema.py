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
SCHEMA_FILE = HERE / "schema.sql"
SCHEMA_HEADER = """\
-- The schema the migrations make (SQLite), version {version}: read it here, change it in
-- migrations/. Written by scripts/schema.py; tests/store/test_schema_file.py keeps it true.
"""
SCHEMA_OBJECTS = """
    SELECT type, sql FROM sqlite_master
    WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
    ORDER BY tbl_name, type = 'index', name
"""


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

    def schema_sql(self) -> str:
        """The schema this database has, as :data:`SCHEMA_FILE` holds it: each table as
        SQLite keeps its statement (a column added later is appended to it), then its
        indexes, in name order."""
        with self.sqlite.read() as tx:
            found = tx.all(SCHEMA_OBJECTS, {})
        text = [SCHEMA_HEADER.format(version=self.schema_version()[0])]
        for r in found:
            text.append(("\n" if r["type"] == "table" else "") + r["sql"] + ";\n")
        return "".join(text)
