"""The PostgreSQL driver: the pool, transactions, error translation, NOTIFY, ``now()``.

Every call reports to :class:`~tickwork.store.health.StoreHealth`, which logs an outage once
when it begins and once when it ends; the errors that mean "this server cannot serve us
now" become :class:`~tickwork.errors.StoreUnavailable`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb, set_json_loads

from tickwork import schedule as schedules
from tickwork.errors import MigrationError, StoreTimeout, StoreUnavailable, TickworkError
from tickwork.job import JobSpec, read_json
from tickwork.store.driver import Codec, Driver, Params
from tickwork.store.health import StoreHealth
from tickwork.store.postgres.pool import POOL_MAX_SIZE, Conn, Pool, connect_kwargs
from tickwork.store.queries import load_queries

log = logging.getLogger("tickwork.store")

HERE = Path(__file__).parent
Q = load_queries(HERE / "queries.sql")
"""The store's queries: the same names as SQLite's."""
P = load_queries(HERE / "driver.sql")
"""The driver's plumbing: clock, notify, lock waits, the migrations ledger."""
OUTAGE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "25006"})
"""Errors that mean "this server cannot serve us now", beside the connection exceptions
(class 08): admin or crash shutdown, not accepting connections yet, read-only (a demoted
primary)."""

TIMEOUT_SQLSTATES = frozenset({"57014", "55P03"})
"""A statement or lock timeout ended the call (query_canceled, lock_not_available): the
server answers, too slowly for the timeouts set on it."""


class PgCodec(Codec):
    """psycopg adapts times, intervals and JSON itself: most values pass as they are."""

    @staticmethod
    def time(value: datetime | None) -> Any:
        return value

    @staticmethod
    def from_time(value: Any) -> Any:
        return value

    @staticmethod
    def duration(value: timedelta) -> Any:
        return value

    @staticmethod
    def from_duration(value: Any) -> timedelta:
        return cast(timedelta, value)

    @staticmethod
    def json(value: Any) -> Any:
        return Jsonb(value) if value is not None else None

    @staticmethod
    def from_json(value: Any) -> Any:
        return value  # decoded by the connection's loader (json_loads)

    @staticmethod
    def args(spec: JobSpec) -> Any:
        return Jsonb(spec.args)

    @staticmethod
    def schedule(resolved: schedules.Schedule) -> Any:
        return Jsonb(resolved.to_json())

    @staticmethod
    def from_schedule(value: Any) -> schedules.Schedule:
        return schedule_of(value)

    @staticmethod
    def array(values: Sequence[Any] | None) -> Any:
        return list(values) if values is not None else None


PG_CODEC = PgCodec()


class PgTx:
    __slots__ = ("conn",)

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def one(self, query: str, params: Params) -> DictRow | None:
        return self.conn.execute(query, params).fetchone()

    def all(self, query: str, params: Params) -> list[DictRow]:
        return self.conn.execute(query, params).fetchall()

    def count(self, query: str, params: Params) -> int:
        return self.conn.execute(query, params).rowcount

    def now(self, now: datetime | None) -> datetime:
        return now_in(self.conn, now)

    def notify(self, *channels: str) -> None:
        notify(self.conn, *channels)

    def give_up_on_held_locks(self) -> None:
        self.conn.execute(P["leadership_lock_timeout"])


class PgDriver(Driver):
    codec = PG_CODEC
    queries = Q

    def __init__(self, url: str, application_name: str, *, pool_size: int = POOL_MAX_SIZE) -> None:
        self.health = StoreHealth(redact(url))
        kwargs = connect_kwargs(url, application_name)
        self.pool = Pool(url, kwargs, health=self.health, configure=_configure, max_size=pool_size)
        self.handler_pool = Pool(
            url, kwargs, health=self.health, configure=_configure, max_size=pool_size
        )
        """Connections for handlers' own transactions (``ctx.transaction()``): a handler
        holding one while it works never takes a connection the worker's heartbeats and
        claims need. Opened on first use: a process that runs no such handler opens none."""
        self._cannot_end = False
        """The last attempt to end a stuck leader's session was refused: said once per
        incident (the election calls at every beat for as long as the session lives)."""

    @contextmanager
    def conn(self) -> Iterator[Conn]:
        """A pooled autocommit connection; the database's errors translated."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except (pg_errors.OperationalError, pg_errors.InterfaceError) as exc:
            if exc.sqlstate in TIMEOUT_SQLSTATES:
                raise StoreTimeout(f"PostgreSQL: {exc}") from exc
            if _is_outage(exc):
                self.health.failed(exc)
            raise StoreUnavailable(f"PostgreSQL: {exc}") from exc
        except pg_errors.ReadOnlySqlTransaction as exc:  # a demoted primary
            self.health.failed(exc)
            raise StoreUnavailable(f"PostgreSQL: {exc}") from exc
        except pg_errors.IdleInTransactionSessionTimeout as exc:  # this process stalled
            raise StoreUnavailable(f"PostgreSQL: {exc}") from exc
        except pg_errors.UndefinedTable as exc:
            raise MigrationError(
                f"the tickwork schema is missing ({exc.diag.message_primary}): "
                "run `tickwork db migrate`"
            ) from exc
        except StoreUnavailable:
            raise
        except TickworkError:
            self.health.answered()  # a refusal (fenced, not found ...) is an answer
            raise
        else:
            self.health.answered()

    @contextmanager
    def tx(self) -> Iterator[Conn]:
        with self.conn() as conn, conn.transaction():
            yield conn

    @contextmanager
    def read(self) -> Iterator[PgTx]:
        with self.conn() as conn:
            yield PgTx(conn)

    @contextmanager
    def write(self) -> Iterator[PgTx]:
        with self.tx() as conn:
            yield PgTx(conn)

    snapshot = write

    def at(self, now: datetime | None) -> Any:
        return now

    @staticmethod
    def busy(exc: BaseException) -> bool:
        return isinstance(exc, StoreUnavailable) and isinstance(
            exc.__cause__, pg_errors.LockNotAvailable
        )

    def end_expired_lease_holders(self, now: datetime | None) -> int:
        try:
            with self.conn() as conn:
                row = conn.execute(P["end_expired_lease_holders"], {"now": now}).fetchone()
        except pg_errors.InsufficientPrivilege as exc:
            # Another role's session: only a member of its role or of pg_signal_backend may
            # end it, and only a superuser may end a superuser's.
            why = "; ".join(m for m in (exc.diag.message_primary, exc.diag.message_detail) if m)
            log.log(
                logging.DEBUG if self._cannot_end else logging.WARNING,
                "cannot end the stuck leader's session: %s (run every node as one role, or "
                "grant this one pg_signal_backend, or superuser if the stuck one is; said once "
                "until the lease row is free again)",
                why,
            )
            self._cannot_end = True
            return 0
        ended = int(row["ended"]) if row is not None else 0
        if ended:
            log.warning(
                "ended %d session(s) of an expired leader stuck holding the lease row", ended
            )
        return ended

    def lease_row_free(self) -> None:
        self._cannot_end = False

    def now(self) -> datetime:
        with self.conn() as conn:
            return now_in(conn, None)

    def close(self) -> None:
        self.pool.close()
        self.handler_pool.close()


def now_in(conn: Conn, now: datetime | None) -> datetime:
    row = conn.execute(P["now"], {"now": now}).fetchone()
    assert row is not None
    return cast(datetime, row["now"])


def notify(conn: Conn, *channels: str) -> None:
    for channel in channels:
        conn.execute(P["notify"], {"channel": channel})


def _configure(conn: Conn) -> None:
    set_json_loads(json_loads, conn)


def _is_outage(exc: psycopg.Error) -> bool:
    """Whether ``exc`` means the database does not answer (not: it refused this statement,
    as a lock or statement timeout does)."""
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in OUTAGE_SQLSTATES


def redact(url: str) -> str:
    """``url`` without a password, for log lines."""
    head, at, tail = url.rpartition("@")
    if not at or ":" not in head.partition("://")[2]:
        return url
    scheme, _, user = head.partition("://")
    return f"{scheme}://{user.partition(':')[0]}:***@{tail}"


def json_loads(data: bytes | str) -> Any:
    """:func:`~tickwork.job.read_json`, but the empty object (the args of most runs)
    without parsing it."""
    return {} if data == b"{}" else read_json(data)


@lru_cache(maxsize=4096)
def _schedule_cached(items: tuple[tuple[str, Any], ...]) -> schedules.Schedule:
    return schedules.from_json(dict(items))


def schedule_of(data: dict[str, Any]) -> schedules.Schedule:
    return _schedule_cached(tuple(sorted(data.items())))
