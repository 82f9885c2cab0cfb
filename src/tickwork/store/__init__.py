"""The store factory: the only code above the store layer that knows concrete stores."""

from __future__ import annotations

from tickwork.errors import ValidationError
from tickwork.store.base import Store

SQLITE_PREFIX = "sqlite://"
POSTGRES_PREFIXES = ("postgresql://", "postgres://")


def open_store(
    url: str,
    *,
    migrate: bool | None = None,
    create: bool = True,
    connect: bool = True,
    application_name: str | None = None,
) -> Store:
    """A store for ``url``: ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or
    ``postgresql://user@host:port/db`` (several ``host:port`` pairs, comma-separated, with
    ``?target_session_attrs=read-write`` for a primary and its standbys).

    ``migrate=None`` (the default) applies migrations automatically to a new, empty SQLite
    file and leaves PostgreSQL to ``tickwork db migrate``; True or False forces the choice.

    ``create``: whether this caller may make the store. True (the default; the long-running
    commands, ``tickwork db migrate`` and an :class:`~tickwork.App`): a SQLite file that
    does not exist is created, with its directory, and migrated. False (the CLI's read and
    command verbs): a SQLite file that does not exist, or is empty, raises
    :class:`~tickwork.errors.StoreMissing` naming its path, and nothing is created, not
    even the directory. A PostgreSQL database is never created by tickwork; one without
    the schema answers every call with ``MigrationError`` either way.

    ``connect``: PostgreSQL only. True: connect once now, so a database that cannot be
    reached at all raises ``StoreUnavailable`` here rather than at the first call. False:
    the first call connects (a process that waits out an outage at its start,
    :mod:`tickwork.node`).

    ``application_name``: how this process's sessions show in PostgreSQL's
    ``pg_stat_activity`` (default ``tickwork``).
    """
    if url.startswith(SQLITE_PREFIX):
        from tickwork.store.sqlite import SqliteStore

        return SqliteStore(url, migrate=migrate, create=create)
    if url.startswith(POSTGRES_PREFIXES):
        from tickwork.store.postgres import DEFAULT_APPLICATION_NAME, PostgresStore

        return PostgresStore(
            url,
            migrate=bool(migrate),
            connect=connect,
            application_name=application_name or DEFAULT_APPLICATION_NAME,
        )
    raise ValidationError(
        f"unsupported database URL {url!r} (expected sqlite:///PATH or postgresql://...)",
        field="db",
    )


__all__ = ["Store", "open_store"]
