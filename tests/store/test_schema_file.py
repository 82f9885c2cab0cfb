"""Each dialect's ``schema.sql`` is the schema its migrations make, so that a reader (or a
reviewer of a new migration) sees the current schema in one file."""

from __future__ import annotations

from tickwork.store import Store
from tickwork.store.postgres import PostgresStore
from tickwork.store.postgres import schema as postgres_schema
from tickwork.store.sqlite import SqliteStore
from tickwork.store.sqlite import schema as sqlite_schema

REGENERATE = "regenerate it: .venv/bin/python scripts/schema.py [POSTGRES_URL]"


def test_schema_sql_is_the_schema_a_freshly_migrated_database_has(store: Store) -> None:
    assert isinstance(store, SqliteStore | PostgresStore)
    module = sqlite_schema if isinstance(store, SqliteStore) else postgres_schema
    kept = module.SCHEMA_FILE.read_text()
    assert kept == store.schema_sql(), (
        f"{module.SCHEMA_FILE} is not the schema the migrations make (a migration was "
        f"added or changed); {REGENERATE}, and commit the file with the migration"
    )
