"""The store factory: the only code above the store layer that knows concrete stores."""

from __future__ import annotations

from tickwork.errors import ValidationError
from tickwork.store.base import Store

SQLITE_PREFIX = "sqlite://"
POSTGRES_PREFIXES = ("postgresql://", "postgres://")


def open_store(
    url: str, *, migrate: bool | None = None, application_name: str | None = None
) -> Store:
    """A store for ``url``: ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or
    ``postgresql://user@host:port/db`` (several ``host:port`` pairs, comma-separated, with
    ``?target_session_attrs=read-write`` for a primary and its standbys).

    ``migrate=None`` (the default) applies migrations automatically to a new, empty SQLite
    file and leaves PostgreSQL to ``tickwork db migrate``; True or False forces the choice.
    ``application_name``: how this process's sessions show in PostgreSQL's
    ``pg_stat_activity`` (default ``tickwork``).
    """
    if url.startswith(SQLITE_PREFIX):
        from tickwork.store.sqlite import SqliteStore

        return SqliteStore(url, migrate=migrate)
    if url.startswith(POSTGRES_PREFIXES):
        from tickwork.store.postgres import PostgresStore

        if application_name is None:
            return PostgresStore(url, migrate=bool(migrate))
        return PostgresStore(url, migrate=bool(migrate), application_name=application_name)
    raise ValidationError(
        f"unsupported database URL {url!r} (expected sqlite:///PATH or postgresql://...)",
        field="db",
    )


__all__ = ["Store", "open_store"]
