"""The store factory: the only code above the store layer that knows concrete stores."""

from __future__ import annotations

from tickwork.errors import ValidationError
from tickwork.store.base import Store

SQLITE_PREFIX = "sqlite://"
POSTGRES_PREFIXES = ("postgresql://", "postgres://")


def open_store(url: str, *, migrate: bool | None = None) -> Store:
    """A store for ``url``: ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or
    ``postgresql://user@host:port/db``.

    ``migrate=None`` (the default) applies migrations automatically to a new, empty SQLite
    file and leaves PostgreSQL to ``tickwork db migrate``; True or False forces the choice.
    """
    if url.startswith(SQLITE_PREFIX):
        from tickwork.store.sqlite import SqliteStore

        return SqliteStore(url, migrate=migrate)
    if url.startswith(POSTGRES_PREFIXES):
        from tickwork.store.postgres import PostgresStore

        return PostgresStore(url, migrate=bool(migrate))
    raise ValidationError(
        f"unsupported database URL {url!r} (expected sqlite:///PATH or postgresql://...)",
        field="db",
    )


__all__ = ["Store", "open_store"]
