"""The schema: the migrations, applied in order under an advisory lock, and the version a
database has. ``schema.sql`` beside this module is the schema they make (a test keeps it
so).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from tickwork.errors import MigrationError
from tickwork.store.postgres.core import PgCore
from tickwork.store.postgres.driver import P
from tickwork.store.queries import migration_files

HERE = Path(__file__).parent
MIGRATIONS = migration_files(HERE / "migrations")
LATEST_VERSION = MIGRATIONS[-1][0]


class PgSchema(PgCore):
    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self._tx() as conn:
            conn.execute(P["migration_lock"])
            conn.execute(P["create_migrations_table"])
            done = {r["version"] for r in conn.execute(P["applied_versions"])}
            if done and max(done) > LATEST_VERSION:
                raise MigrationError(
                    f"the database has schema version {max(done)}; this tickwork knows up "
                    f"to {LATEST_VERSION}: upgrade tickwork"
                )
            for version, path in MIGRATIONS:
                if version in done:
                    continue
                conn.execute(cast(Any, path.read_text()))
                conn.execute(P["record_migration"], {"version": version})
                applied.append(version)
        return applied

    def schema_version(self) -> tuple[int, int]:
        with self._conn() as conn:
            present = conn.execute(P["migrations_table_exists"]).fetchone()
            if present is None or not present["present"]:
                return 0, LATEST_VERSION
            versions = [r["version"] for r in conn.execute(P["applied_versions"])]
        return (max(versions) if versions else 0), LATEST_VERSION
