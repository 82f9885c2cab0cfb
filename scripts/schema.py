"""Write each dialect's ``schema.sql`` (``src/tickwork/store/{sqlite,postgres}/schema.sql``):
the schema a database freshly migrated to the latest version has.

    .venv/bin/python scripts/schema.py [POSTGRES_URL]

SQLite's is made from a scratch file. PostgreSQL's from a scratch database created on the
server of ``POSTGRES_URL`` (default ``$TICKWORK_TEST_PG_URL``) and dropped after; with
neither, only SQLite's is written. Run it after adding a migration:
tests/store/test_schema_file.py fails until the files match.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tickwork.store.postgres import schema as postgres_schema
from tickwork.store.sqlite import schema as sqlite_schema


def write_sqlite() -> Path:
    from tickwork.store.sqlite import SqliteStore

    with tempfile.TemporaryDirectory() as scratch:
        store = SqliteStore("sqlite:///" + str(Path(scratch, "schema.db")), migrate=True)
        try:
            sqlite_schema.SCHEMA_FILE.write_text(store.schema_sql())
        finally:
            store.close()
    return sqlite_schema.SCHEMA_FILE


def write_postgres(url: str) -> Path:
    import psycopg

    from tickwork.store.postgres import PostgresStore

    name = f"tickwork_schema_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        store = PostgresStore(urlunsplit(urlsplit(url)._replace(path="/" + name)), migrate=True)
        try:
            postgres_schema.SCHEMA_FILE.write_text(store.schema_sql())
        finally:
            store.close()
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")
    return postgres_schema.SCHEMA_FILE


def main(argv: list[str]) -> int:
    print(f"wrote {write_sqlite()}")
    url = argv[1] if len(argv) > 1 else os.environ.get("TICKWORK_TEST_PG_URL")
    if not url:
        print("no PostgreSQL URL (argument or TICKWORK_TEST_PG_URL): its schema.sql is as it was")
        return 0
    print(f"wrote {write_postgres(url)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
