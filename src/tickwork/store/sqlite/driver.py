"""The SQLite driver: a connection per thread, ``BEGIN IMMEDIATE`` transactions, integer
microsecond times, JSON as text, and in-process signals (:mod:`.signals`) for NOTIFY."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tickwork import schedule as schedules
from tickwork.clock import SYSTEM_CLOCK, from_micros, to_micros
from tickwork.errors import MigrationError, StoreTimeout, StoreUnavailable, ValidationError
from tickwork.job import JobSpec, read_json
from tickwork.store.driver import Codec, Driver, Params
from tickwork.store.queries import load_queries
from tickwork.store.sqlite.signals import Signals, signals_for

Q = load_queries(Path(__file__).parent / "queries.sql")
BUSY_TIMEOUT_MS = 30_000
"""A writer waits this long for the write lock before StoreUnavailable."""
WAL_RETRY_SECONDS = 0.01
ONE_MICROSECOND = timedelta(microseconds=1)


class SqliteCodec(Codec):
    """Times and durations as integer microseconds, JSON as compact text."""

    @staticmethod
    def time(value: datetime | None) -> Any:
        return to_micros(value) if value is not None else None

    @staticmethod
    def from_time(value: Any) -> Any:
        return from_micros(value) if value is not None else None

    @staticmethod
    def duration(value: timedelta) -> Any:
        return value // ONE_MICROSECOND

    @staticmethod
    def from_duration(value: Any) -> timedelta:
        return timedelta(microseconds=value)

    @staticmethod
    def json(value: Any) -> Any:
        return json.dumps(value, separators=(",", ":")) if value is not None else None

    @staticmethod
    def from_json(value: Any) -> Any:
        return read_json(value) if value is not None else None

    @staticmethod
    def args(spec: JobSpec) -> Any:
        return spec.args_json

    @staticmethod
    def schedule(resolved: schedules.Schedule) -> Any:
        return json.dumps(resolved.to_json(), sort_keys=True)

    @staticmethod
    def from_schedule(value: Any) -> schedules.Schedule:
        return _schedule(value)

    @staticmethod
    def array(values: Sequence[Any] | None) -> Any:
        """A JSON array, which the SQL reads with ``json_each``."""
        return json.dumps(list(values)) if values is not None else None


SQLITE_CODEC = SqliteCodec()


class SqliteTx:
    __slots__ = ("channels", "conn", "path")

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self.channels: list[str] = []

    def _execute(self, query: str, params: Params) -> sqlite3.Cursor:
        try:
            return self.conn.execute(query, params)
        except sqlite3.OperationalError as exc:
            raise unavailable(f"{self.path}: {exc}", exc) from exc

    def one(self, query: str, params: Params) -> sqlite3.Row | None:
        # Hazard: run the statement to its end. Outside BEGIN (a read() block), a write with
        # RETURNING commits only when its statement finishes, not at its first row.
        found = self._execute(query, params).fetchall()
        return found[0] if found else None

    def all(self, query: str, params: Params) -> list[sqlite3.Row]:
        return self._execute(query, params).fetchall()

    def count(self, query: str, params: Params) -> int:
        return self._execute(query, params).rowcount

    def now(self, now: datetime | None) -> datetime:
        return from_micros(to_micros(now if now is not None else SYSTEM_CLOCK.now()))

    def notify(self, *channels: str) -> None:
        self.channels.extend(channels)

    def give_up_on_held_locks(self) -> None:
        pass  # the write lock is the database's, taken at BEGIN IMMEDIATE


class SqliteDriver(Driver):
    codec = SQLITE_CODEC
    queries = Q

    def __init__(self, url: str, path: Path, *, create: bool = True) -> None:
        self.url = url
        self.path = path
        self.create = create
        """False: connections open the file read-write only, never creating it."""
        self.signals: Signals = signals_for(path)
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def conn(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreUnavailable(f"store {self.url} is closed")
            try:
                if self.create and self.path.parent != Path():
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(
                    self.path if self.create else f"file:{quote(str(self.path))}?mode=rw",
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=BUSY_TIMEOUT_MS / 1000,
                    uri=not self.create,
                )
            except (sqlite3.Error, OSError) as exc:
                raise StoreUnavailable(f"cannot open {self.path}: {exc}") from exc
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _enable_wal(conn, self.path)
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding the database's write lock from its start."""
        conn = self.conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise unavailable(f"{self.path}: {exc}", exc) from exc
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                raise unavailable(f"{self.path}: commit failed: {exc}", exc) from exc

    @contextmanager
    def read(self) -> Iterator[SqliteTx]:
        tx = SqliteTx(self.conn(), self.path)
        yield tx
        self.signals.notify(*tx.channels)

    snapshot = read  # WAL readers never block; each read sees a committed state

    @contextmanager
    def write(self) -> Iterator[SqliteTx]:
        with self.transaction() as conn:
            tx = SqliteTx(conn, self.path)
            yield tx
        self.signals.notify(*tx.channels)

    def at(self, now: datetime | None) -> Any:
        return to_micros(now if now is not None else SYSTEM_CLOCK.now())

    def now(self) -> datetime:
        return SYSTEM_CLOCK.now()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, []
        for conn in conns:
            with suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()


def path_from_url(url: str) -> Path:
    """``sqlite:///rel.db`` -> ``rel.db``; ``sqlite:////abs.db`` -> ``/abs.db``."""
    rest = url.removeprefix("sqlite://")
    if not rest.startswith("/") or rest == "/":
        raise ValidationError(f"bad SQLite URL {url!r} (write sqlite:///PATH)", field="db")
    return Path(rest[1:])


def unavailable(message: str, exc: sqlite3.Error) -> StoreUnavailable:
    """The error for a failed call: StoreTimeout when another connection held the write lock
    for all of the busy timeout ("database is locked"), StoreUnavailable otherwise."""
    code = (exc.sqlite_errorcode or 0) & 0xFF  # the primary code of an extended one
    busy = code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return StoreTimeout(message) if busy else StoreUnavailable(message)


def _enable_wal(conn: sqlite3.Connection, path: Path) -> None:
    """Switch to WAL, waiting out other processes doing the same on a new file.

    Hazard: the journal-mode change needs an exclusive lock and SQLite answers "database is
    locked" at once instead of calling the busy handler, so processes opening a fresh file
    together (several nodes starting at once) must retry here.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise StoreUnavailable(f"cannot open {path} in WAL mode: {exc}") from exc
            time.sleep(WAL_RETRY_SECONDS)


def statements(script: str) -> list[str]:
    """A migration script, one statement at a time (sqlite3 runs one per call)."""
    found, buffer = [], ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            found.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise MigrationError(f"incomplete SQL statement in migration: {buffer.strip()[:80]}")
    return found


@lru_cache(maxsize=4096)
def _schedule(text: str) -> schedules.Schedule:
    return schedules.from_json(json.loads(text))
