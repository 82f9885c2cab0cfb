"""PgListener: LISTEN on a dedicated connection that comes back by itself.

A pooled connection would lose its LISTENs, so each listener holds one connection of its
own, with the pool's settings (keepalives, ``tcp_user_timeout``). What happens to it:

- **Lost** (the server restarted, the backend was terminated, a black hole outlasted
  ``tcp_user_timeout``): :meth:`PgListener.wait` notices it (an error on the socket, or a
  ping every ``PING_EVERY`` of silence that fails), closes it and returns True: whatever
  was notified meanwhile is lost, so the caller must look for itself now.
- **Re-listening**: each later ``wait`` tries to connect and LISTEN again when its backoff
  has run out (first at once, then 0.1, 0.2, 0.4 ... capped at 1 s, each with up to 50%
  jitter, so a fleet of workers does not reconnect in lockstep). Success returns True
  (look now: notifications sent while deaf are gone). Until then :attr:`listening` is
  False and the caller polls instead of trusting notifications.

One INFO line when the connection is lost and one when it listens again, with the gap;
a store that does not answer at all is reported once by :class:`StoreHealth`. Never a
line per attempt.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

import psycopg

from tickwork.errors import StoreUnavailable
from tickwork.store.base import Listener
from tickwork.store.postgres.pool import Conn, Pool

log = logging.getLogger("tickwork.store")

PING_EVERY = 2.0
"""Seconds of silence on the LISTEN connection before a ping checks that it still works
(a black-holed connection with nothing to send would otherwise look alive forever)."""
RELISTEN_BACKOFF = (0.1, 1.0)
"""Seconds: first and longest wait between attempts to listen again (plus jitter)."""


class PgListener(Listener):
    """LISTEN on ``channels``, reconnecting by itself (see the module docstring)."""

    def __init__(self, pool: Pool, channels: Sequence[str]) -> None:
        self._pool = pool
        self._channels = list(channels)
        self._lock = threading.Lock()  # wait() and close() from different threads
        self._conn: Conn | None = None
        self._closed = False
        self._lost_at: float | None = None
        self._next_attempt = 0.0
        self._backoff = 0.0
        self._last_traffic = time.monotonic()
        self._pause = threading.Event()  # never set: a sleep (time.sleep fails under libfaketime)
        try:
            self._connect()
        except StoreUnavailable:
            self._lost_at = time.monotonic()  # wait() keeps trying

    @property
    def listening(self) -> bool:
        return self._conn is not None

    def wait(self, timeout: float) -> bool:
        timeout = max(timeout, 0.0)
        with self._lock:
            if self._closed:
                self._pause.wait(timeout)
                return False
            if self._conn is None:
                return self._relisten(timeout)
            conn = self._conn
            try:
                if time.monotonic() - self._last_traffic >= PING_EVERY:
                    conn.execute("SELECT 1")
                    self._last_traffic = time.monotonic()
                arrived = False
                for _ in conn.notifies(timeout=timeout, stop_after=1):
                    arrived = True
                if arrived:  # drain what else is already queued, without waiting
                    for _ in conn.notifies(timeout=0.0):
                        pass
                    self._last_traffic = time.monotonic()
                return arrived
            except psycopg.Error as exc:
                self._lose(exc)
                return True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            _close_quietly(conn)

    # -- internals (under self._lock) ------------------------------------------------------

    def _connect(self) -> None:
        conn = self._pool.connect()
        try:
            for channel in self._channels:
                conn.execute(cast(Any, f'LISTEN "{channel}"'))
        except psycopg.Error as exc:
            _close_quietly(conn)
            raise StoreUnavailable(f"cannot LISTEN: {exc}") from exc
        self._conn = conn
        self._last_traffic = time.monotonic()

    def _lose(self, exc: BaseException) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            _close_quietly(conn)
        self._lost_at = time.monotonic()
        self._next_attempt = 0.0
        self._backoff = 0.0
        first = str(exc).strip().partition("\n")[0]
        log.info("lost the LISTEN connection (%s); listening again as soon as it answers", first)

    def _relisten(self, timeout: float) -> bool:
        now = time.monotonic()
        if now < self._next_attempt:
            self._pause.wait(min(timeout, self._next_attempt - now))
            return False
        try:
            self._connect()
        except StoreUnavailable:
            low, high = RELISTEN_BACKOFF
            self._backoff = min(high, max(low, self._backoff * 2))
            self._next_attempt = time.monotonic() + self._backoff * (1 + random.random() / 2)
            return False
        lost_at = self._lost_at
        self._lost_at = None
        self._pool.health.reconnected()
        self._pool.health.answered()
        if lost_at is not None:
            log.info("listening again after %.1f s", time.monotonic() - lost_at)
        return True


def _close_quietly(conn: Conn) -> None:
    try:
        conn.close()
    except Exception as exc:
        log.debug("closing the LISTEN connection failed: %s", exc)
