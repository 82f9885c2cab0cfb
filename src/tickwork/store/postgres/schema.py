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
SCHEMA_FILE = HERE / "schema.sql"
SCHEMA_HEADER = """\
-- The schema the migrations make (PostgreSQL), version {version}: read it here, change it
-- in migrations/. Written by scripts/schema.py; tests/store/test_schema_file.py keeps it
-- true.
"""


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

    def schema_sql(self) -> str:
        """The schema this database has, as :data:`SCHEMA_FILE` holds it: each tickwork
        table with its columns and constraints, then its other indexes, in name order; then
        tickwork's functions."""
        with self._conn() as conn:
            columns = conn.execute(P["schema_columns"]).fetchall()
            constraints = conn.execute(P["schema_constraints"]).fetchall()
            indexes = conn.execute(P["schema_indexes"]).fetchall()
            functions = conn.execute(P["schema_functions"]).fetchall()
        text = [SCHEMA_HEADER.format(version=self.schema_version()[0])]
        for table in sorted({r["table"] for r in columns}):
            lines = [_column(r) for r in columns if r["table"] == table]
            lines += [
                f"CONSTRAINT {r['name']} {r['definition']}"
                for r in constraints
                if r["table"] == table
            ]
            text.append(f"\nCREATE TABLE {table} (\n    " + ",\n    ".join(lines) + "\n);\n")
            text += [f"{r['definition']};\n" for r in indexes if r["table"] == table]
        text += [f"\n{r['definition'].rstrip()};\n" for r in functions]
        return "".join(text)


def _column(r: Any) -> str:
    """A column of ``schema_columns`` as a CREATE TABLE line."""
    parts = [r["name"], r["type"]]
    if r["identity"]:
        parts.append("GENERATED " + ("ALWAYS" if r["identity"] == "a" else "BY DEFAULT"))
        parts.append("AS IDENTITY")
    if r["default"] is not None:
        parts.append(f"DEFAULT {r['default']}")
    if r["not_null"]:
        parts.append("NOT NULL")
    return " ".join(parts)
