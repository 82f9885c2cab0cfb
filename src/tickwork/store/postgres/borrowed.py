"""Writing inside a caller's own transaction: ``app.submit(..., conn=...)`` (the outbox
pattern, as River's ``InsertTx`` and Oban's ``Repo.transaction``).

A caller hands over the connection its application writes with: a psycopg 3 connection
(Django's ``connection.connection`` is one), or a SQLAlchemy ``Connection`` or ``Session``
bound to the same PostgreSQL through psycopg 3 (SQLAlchemy is duck-typed, never imported).
tickwork's statements then run in that connection's transaction, inside a savepoint:
the job and its run exist only if the caller commits, and a rollback leaves no trace.
The wake-up (``pg_notify``) is transactional too: PostgreSQL delivers it at the commit,
so no worker looks for a run it cannot see yet.

A connection in autocommit mode with no transaction open gets a transaction of its own,
committed when the submit returns (as a submit without ``conn=``).

The caller's session is left as it was: rows are read through cursors of tickwork's own
(dicts, times in UTC, JSON as tickwork reads it), never by changing the connection's
row factory or time zone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, cast

import psycopg
from psycopg.adapt import Buffer
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row
from psycopg.types.datetime import TimestamptzBinaryLoader, TimestamptzLoader
from psycopg.types.json import set_json_loads

from tickwork.errors import ValidationError
from tickwork.store.postgres.pool import Conn


def caller_connection(conn: object) -> psycopg.Connection[Any]:
    """The psycopg 3 connection behind what a caller passed as ``conn=``; ValidationError
    for anything else (nothing is written)."""
    if isinstance(conn, psycopg.Connection):
        return conn
    found: object = conn
    if callable(getattr(found, "connection", None)):  # a SQLAlchemy Session: connection()
        found = found.connection()  # type: ignore[attr-defined]
    dbapi = getattr(found, "connection", None)  # a SQLAlchemy Connection's pool proxy
    driver = getattr(dbapi, "driver_connection", None)
    if isinstance(driver, psycopg.Connection):
        return driver
    raise ValidationError(
        "conn= takes a psycopg 3 connection, or a SQLAlchemy Connection or Session bound "
        f"to PostgreSQL through psycopg 3; got {type(conn).__module__}.{type(conn).__name__}",
        field="conn",
    )


@contextmanager
def borrowed(conn: object, loads: Any) -> Iterator[Conn]:
    """The caller's connection (see :func:`caller_connection`) as tickwork's statements
    use one, inside a savepoint of its open transaction (or a transaction of its own when
    it has none and autocommits). ``loads`` reads JSON as the pool's connections do."""
    raw = caller_connection(conn)
    if raw.closed:
        raise ValidationError("conn= is closed", field="conn")
    if raw.info.transaction_status == TransactionStatus.INERROR:
        raise ValidationError("conn= is in a failed transaction: roll it back first", field="conn")
    view = _Borrowed(raw, loads)
    if not raw.autocommit and raw.info.transaction_status == TransactionStatus.IDLE:
        # The caller's transaction has not begun yet (psycopg begins it at the first
        # statement). Begin it now: a transaction() block on an idle connection would
        # BEGIN and COMMIT by itself, committing before the caller decides.
        view.execute("SELECT 1")
    with raw.transaction():
        yield cast(Conn, view)


class _Borrowed:
    """The part of a psycopg connection tickwork's submit uses, over a caller's own, with
    tickwork's cursors (the connection's own settings untouched)."""

    __slots__ = ("_loads", "_raw")

    def __init__(self, raw: psycopg.Connection[Any], loads: Any) -> None:
        self._raw = raw
        self._loads = loads

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> psycopg.Cursor[DictRow]:
        return self.cursor(row_factory=dict_row).execute(query, params, **kwargs)

    def cursor(self, *, row_factory: Any) -> psycopg.Cursor[Any]:
        cursor = self._raw.cursor(row_factory=row_factory)
        cursor.adapters.register_loader("timestamptz", _UtcLoader)
        cursor.adapters.register_loader("timestamptz", _UtcBinaryLoader)
        set_json_loads(self._loads, cursor)
        return cursor

    def transaction(self) -> Any:
        return self._raw.transaction()


class _UtcLoader(TimestamptzLoader):
    """Times in UTC whatever the caller's session ``TimeZone``."""

    def load(self, data: Buffer) -> datetime:
        return super().load(data).astimezone(UTC)


class _UtcBinaryLoader(TimestamptzBinaryLoader):
    def load(self, data: Buffer) -> datetime:
        return super().load(data).astimezone(UTC)
