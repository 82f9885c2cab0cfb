"""The per-dialect seam under :class:`~tickwork.store.sql.SqlStore`: SQL plumbing only.

A :class:`Driver` owns connections and transactions, turns the database's errors into
tickwork's (an outage is :class:`~tickwork.errors.StoreUnavailable`, anything else stays a
bug), sends notifications and reads the store's clock. Its :class:`Codec` says how a time,
a duration or a JSON value travels to and from the dialect. Policy (which rows, what
transition, what is raised) is written once above it, in :mod:`tickwork.store.sql`, as
River keeps its drivers to SQL plumbing and writes retry-or-discard once in its services.

A dialect's hot paths (trigger, claim, complete, heartbeat, bulk submit) talk to their own
connection type directly: there, the dialects really differ, and every call counts.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol

from tickwork import schedule as schedules
from tickwork.job import JobSpec


class Row(Protocol):
    """A result row, by column name (a psycopg dict row or a :class:`sqlite3.Row`)."""

    def __getitem__(self, key: str, /) -> Any: ...


Params = Mapping[str, Any]


class Codec(abc.ABC):
    """How values travel between Python and one dialect. ``None`` always stays ``None``."""

    @staticmethod
    @abc.abstractmethod
    def time(value: datetime | None) -> Any:
        """A time as a query parameter."""

    @staticmethod
    @abc.abstractmethod
    def from_time(value: Any) -> Any:
        """A time column as an aware UTC datetime (``Any`` so mapping needs no casts)."""

    @staticmethod
    @abc.abstractmethod
    def duration(value: timedelta) -> Any:
        """A duration as a query parameter (added to times inside the SQL)."""

    @staticmethod
    @abc.abstractmethod
    def from_duration(value: Any) -> timedelta:
        """A stored duration column."""

    @staticmethod
    @abc.abstractmethod
    def json(value: Any) -> Any:
        """A JSON value (a dict) as a query parameter."""

    @staticmethod
    @abc.abstractmethod
    def from_json(value: Any) -> Any:
        """A JSON column, read with :func:`tickwork.job.read_json` semantics."""

    @staticmethod
    @abc.abstractmethod
    def args(spec: JobSpec) -> Any:
        """A job's args as the job row stores them."""

    @staticmethod
    @abc.abstractmethod
    def schedule(resolved: schedules.Schedule) -> Any:
        """A schedule as the job row stores it."""

    @staticmethod
    @abc.abstractmethod
    def from_schedule(value: Any) -> schedules.Schedule:
        """A stored schedule column (cached: a few distinct schedules over many jobs)."""

    @staticmethod
    @abc.abstractmethod
    def array(values: Sequence[Any] | None) -> Any:
        """A list parameter (queues, ids), for ``= ANY(...)`` or ``IN (json_each(...))``."""


class Tx(Protocol):
    """One connection, inside a transaction (:meth:`Driver.write`) or not (:meth:`Driver.read`)."""

    def one(self, query: str, params: Params) -> Row | None: ...

    def all(self, query: str, params: Params) -> Sequence[Row]: ...

    def count(self, query: str, params: Params) -> int:
        """Runs ``query``; the number of rows it changed."""
        ...

    def now(self, now: datetime | None) -> datetime:
        """The transaction's time: ``now`` if given, else the store's clock."""
        ...

    def notify(self, *channels: str) -> None:
        """Wakes ``channels`` when (and only if) this transaction commits."""
        ...

    def give_up_on_held_locks(self) -> None:
        """Lets the rest of this transaction fail fast (see :meth:`Driver.busy`) instead of
        queueing behind a row lock held for long; a no-op where locks are not per row."""
        ...


class Driver(abc.ABC):
    codec: Codec
    queries: Mapping[str, str]

    @abc.abstractmethod
    def read(self) -> AbstractContextManager[Tx]:
        """A connection for reads and single-statement writes, no explicit transaction."""

    @abc.abstractmethod
    def write(self) -> AbstractContextManager[Tx]:
        """One transaction: committed when the block ends, rolled back if it raises."""

    @abc.abstractmethod
    def snapshot(self) -> AbstractContextManager[Tx]:
        """Several reads that must agree (one snapshot where the dialect gives one cheaply)."""

    @abc.abstractmethod
    def at(self, now: datetime | None) -> Any:
        """A ``now`` parameter for a statement that defaults it to the store's clock itself
        (PostgreSQL: ``coalesce(now, now())``, so no round trip reads the clock first)."""

    @staticmethod
    def busy(exc: BaseException) -> bool:
        """Whether ``exc`` is a lock given up on after :meth:`Tx.give_up_on_held_locks`."""
        return False

    def end_expired_lease_holders(self, now: datetime | None) -> int:
        """End the database sessions that hold the expired leader lease's row locked (a
        leader stopped mid-transaction where no timeout of the server's reaches it); how
        many. A no-op where no session outlives its process's stop (SQLite)."""
        return 0

    def lease_row_free(self) -> None:  # noqa: B027 (a hook: nothing to do where no session is stuck)
        """An acquire went through without waiting on the leader lease's row: a stuck
        holder that :meth:`end_expired_lease_holders` could not end is gone (its incident
        is over)."""

    @abc.abstractmethod
    def now(self) -> datetime: ...

    @abc.abstractmethod
    def close(self) -> None: ...
