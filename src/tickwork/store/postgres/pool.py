"""Connections to PostgreSQL: what every session is told, and the pool that holds them.

Why not ``psycopg_pool``: its reconnect backoff doubles without a cap (1, 2, 4 ... 256 s up
to ``reconnect_timeout``), and a caller waiting for a connection is not served when the
database comes back until the next scheduled attempt; after a minute of outage a process
could wait another minute to reconnect. This pool connects in the caller's thread, so a
caller's own (capped, jittered) retry is the reconnect: the first call after the database
answers again gets a connection.

Detecting a lost connection, in bounded time
--------------------------------------------
- **Closed by the server** (a restart, ``pg_terminate_backend``, a failover): the server
  sends a FATAL message and closes, so an idle connection's socket turns readable. Every
  checkout polls the socket (one syscall, no round trip) and replaces a readable one
  before the caller sees it: a restarted database costs callers no error at all.
- **Black-holed** (packets dropped, no reset): ``tcp_user_timeout`` (4 s) aborts a
  connection whose sent data stays unacknowledged, and TCP keepalives (idle 3 s, then 3
  probes 1 s apart) find an idle one dead within about 6 s. Nothing waits forever on a dead
  socket.
- **The server's side** gets the same settings per session, plus
  ``idle_in_transaction_session_timeout`` (2 s): a transaction whose client vanished
  mid-way (a partition, a SIGSTOP) is rolled back and its locks released within 2 s, so
  it cannot hold the leader lease row, and with it every scheduler's failover, for the
  hours that TCP takes to give up. ``client_connection_check_interval`` ends a running
  query whose client is gone.

A URL's own parameters win: ``?tcp_user_timeout=20000&keepalives_idle=30`` on the
database URL replaces these defaults, and its ``options`` are appended after ours.
"""

from __future__ import annotations

import logging
import random
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg import conninfo as pg_conninfo
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row

from tickwork.errors import StoreTimeout, StoreUnavailable
from tickwork.store.health import StoreHealth

log = logging.getLogger("tickwork.store")

Conn = psycopg.Connection[DictRow]

CONNECT_TIMEOUT = 3
"""Seconds libpq waits for one connection attempt (per host of a multi-host URL)."""
TCP_USER_TIMEOUT = 4000
"""Milliseconds sent data may stay unacknowledged before the connection is aborted."""
KEEPALIVES_IDLE = 3
"""Seconds of silence before the first TCP keepalive probe."""
KEEPALIVES_INTERVAL = 1
"""Seconds between unanswered keepalive probes."""
KEEPALIVES_COUNT = 3
"""Unanswered probes before the connection is declared dead."""
IDLE_IN_TRANSACTION_TIMEOUT = 2000
"""Milliseconds the server lets a tickwork session idle inside a transaction before it
ends the session (rolling back, releasing its locks). tickwork's transactions never wait
on anything but the database between statements: milliseconds, not seconds (a bulk submit,
whose preparation grows with its batch, prepares it before its transaction and sends that
as one pipeline)."""
CLIENT_CHECK_INTERVAL = 2000
"""Milliseconds between the server's checks that a running query's client is still there."""
POOL_MAX_SIZE = 10
"""Connections per store instance (per process)."""
POOL_WAIT = 10.0
"""Seconds a caller waits for a connection while all of them are in use."""
MAX_LIFETIME = 30 * 60.0
"""Seconds a connection is kept at most (less up to 10% jitter), so connections spread
again over a cluster's hosts after a failover and server-side memory is returned."""

SESSION_SETTINGS = {
    "TimeZone": "UTC",  # times are read and written in UTC, whatever the server's zone
    "idle_in_transaction_session_timeout": str(IDLE_IN_TRANSACTION_TIMEOUT),
    "client_connection_check_interval": str(CLIENT_CHECK_INTERVAL),
    "tcp_user_timeout": str(TCP_USER_TIMEOUT),
    "tcp_keepalives_idle": str(KEEPALIVES_IDLE),
    "tcp_keepalives_interval": str(KEEPALIVES_INTERVAL),
    "tcp_keepalives_count": str(KEEPALIVES_COUNT),
}
CLIENT_DEFAULTS: dict[str, Any] = {
    "connect_timeout": CONNECT_TIMEOUT,
    "keepalives": 1,
    "keepalives_idle": KEEPALIVES_IDLE,
    "keepalives_interval": KEEPALIVES_INTERVAL,
    "keepalives_count": KEEPALIVES_COUNT,
    "tcp_user_timeout": TCP_USER_TIMEOUT,
}
APPLICATION_NAME_MAX = 63
"""PostgreSQL truncates longer names."""


def connect_kwargs(url: str, application_name: str) -> dict[str, Any]:
    """libpq parameters for every tickwork connection to ``url`` (see the module docstring):
    the defaults, under whatever the URL sets itself."""
    try:
        given = pg_conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise StoreUnavailable(f"invalid PostgreSQL URL: {exc}") from exc
    kwargs = {k: v for k, v in CLIENT_DEFAULTS.items() if k not in given}
    ours = " ".join(f"-c {name}={value}" for name, value in SESSION_SETTINGS.items())
    kwargs["options"] = f"{ours} {given['options']}" if given.get("options") else ours
    if "application_name" not in given:
        kwargs["application_name"] = application_name[:APPLICATION_NAME_MAX]
    return kwargs


class Pool:
    """Up to ``max_size`` autocommit connections, handed out most recently used first.

    Thread-safe. :meth:`connection` lends one for a ``with`` block; a connection that broke
    meanwhile is discarded when it comes back, and one found closed by the server at the
    next checkout is replaced there (see the module docstring). Connecting happens in the
    caller's thread: a failure raises ``StoreUnavailable`` and is reported to ``health``.
    """

    def __init__(
        self,
        url: str,
        kwargs: dict[str, Any],
        *,
        health: StoreHealth,
        configure: Callable[[Conn], None] | None = None,
        max_size: int = POOL_MAX_SIZE,
        wait: float = POOL_WAIT,
    ) -> None:
        self.url = url
        self.kwargs = kwargs
        self.health = health
        self.max_size = max_size
        self.wait = wait
        self._configure = configure
        self._cond = threading.Condition()
        self._idle: list[tuple[Conn, float]] = []  # (connection, expires at), a stack
        self._size = 0  # connections open or being opened
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        conn, expires = self._checkout()
        try:
            yield conn
        finally:
            self._checkin(conn, expires)

    def close(self) -> None:
        """Close the idle connections now and the lent ones when they come back."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._size -= len(idle)
            self._cond.notify_all()
        for conn, _ in idle:
            _close_quietly(conn)

    def connect(self) -> Conn:
        """A new connection outside the pool (the caller closes it)."""
        try:
            conn: Conn = psycopg.connect(
                self.url, autocommit=True, row_factory=dict_row, **self.kwargs
            )
        except psycopg.Error as exc:
            self.health.failed(exc)
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {exc}") from exc
        if self._configure is not None:
            self._configure(conn)
        return conn

    # -- internals -------------------------------------------------------------------------

    def _checkout(self) -> tuple[Conn, float]:
        deadline = time.monotonic() + self.wait
        while True:
            conn: Conn | None
            with self._cond:
                while True:
                    if self._closed:
                        raise StoreUnavailable("the store is closed")
                    if self._idle:
                        conn, expires = self._idle.pop()
                        break
                    if self._size < self.max_size:
                        self._size += 1
                        conn = None
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise StoreTimeout(
                            f"all {self.max_size} connections stayed busy for {self.wait:g} s"
                        )
                    self._cond.wait(left)
            if conn is None:
                return self._open()
            if _usable(conn):
                return conn, expires
            self._discard(conn)  # closed by the server while idle: replace it
            self.health.reconnected()

    def _open(self) -> tuple[Conn, float]:
        try:
            conn = self.connect()
        except BaseException:
            with self._cond:
                self._size -= 1
                self._cond.notify()
            raise
        lifetime = MAX_LIFETIME * (1 - 0.1 * random.random())
        return conn, time.monotonic() + lifetime

    def _checkin(self, conn: Conn, expires: float) -> None:
        status = conn.pgconn.transaction_status
        if status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            with suppress(psycopg.Error):
                conn.rollback()
            status = conn.pgconn.transaction_status
        if conn.closed or status != TransactionStatus.IDLE:
            self._discard(conn)
            return
        if time.monotonic() >= expires:
            self._discard(conn)
            return
        with self._cond:
            if self._closed:
                self._size -= 1
                closing = True
            else:
                self._idle.append((conn, expires))
                closing = False
            self._cond.notify()
        if closing:
            _close_quietly(conn)

    def _discard(self, conn: Conn) -> None:
        with self._cond:
            self._size -= 1
            self._cond.notify()
        _close_quietly(conn)


def _usable(conn: Conn) -> bool:
    """False when an idle connection is closed or its socket has something to read (an idle
    session is sent nothing but its end: a FATAL message, then EOF)."""
    if conn.closed or conn.pgconn.transaction_status != TransactionStatus.IDLE:
        return False
    try:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
        return not poller.poll(0)
    except (OSError, ValueError, psycopg.Error):
        return False


def _close_quietly(conn: Conn) -> None:
    try:
        conn.close()
    except Exception as exc:  # closing a broken connection may raise; nothing to do
        log.debug("closing a connection failed: %s", exc)
