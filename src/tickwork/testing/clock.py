"""A clock the test moves (:class:`FakeClock`) and one way to wait for a condition
(:func:`wait_until`); :mod:`tickwork.testing` says how.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from tickwork.clock import utc

T = TypeVar("T")

EVENT_POLL = 0.002
"""Real seconds between looks at the event a :meth:`FakeClock.wait` also waits for (an
event cannot announce itself to the clock)."""
WAIT_TIMEOUT = 10.0
"""Real seconds :func:`wait_until` waits by default: long on an idle machine, so a slow or
loaded one does not fail a test that would pass."""
WAIT_INTERVAL = 0.01
"""Real seconds between two looks of :func:`wait_until`."""


class FakeClock:
    """A :class:`~tickwork.clock.Clock` that moves only when told to.

    ``start`` (aware; default: the real time now, to the second) is what :meth:`now` says
    until the first :meth:`advance`. :meth:`monotonic` starts at 0 and moves with it.
    Thread-safe: services wait on it from their own threads while the test moves it.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = utc(start) if start is not None else datetime.now(UTC).replace(microsecond=0)
        self._elapsed = 0.0
        self._moved = threading.Condition()
        self._waits: list[float] = []  # the deadlines of the waits in progress

    def now(self) -> datetime:
        with self._moved:
            return self._now

    def monotonic(self) -> float:
        with self._moved:
            return self._elapsed

    def store_now(self) -> datetime | None:
        return self.now()

    def wait(self, event: threading.Event, deadline: float | None) -> bool:
        """Until ``event`` is set or this clock is moved to ``deadline`` or past it."""
        with self._moved:
            if deadline is not None:
                self._waits.append(deadline)
            try:
                while not event.is_set():
                    if deadline is not None and self._elapsed >= deadline:
                        return False
                    self._moved.wait(EVENT_POLL)
            finally:
                if deadline is not None:
                    self._waits.remove(deadline)
        return True

    def deadlines(self) -> list[float]:
        """The deadlines (:meth:`monotonic` readings) of the waits in progress, earliest
        first: what moving the clock would wake. A wait still listed after a move has not
        ended."""
        with self._moved:
            return sorted(self._waits)

    def advance(self, seconds: float | timedelta) -> datetime:
        """Move time forward by ``seconds`` (not backwards) and wake every wait that is due
        by then; returns the new time."""
        step = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
        if step < 0:
            raise ValueError(f"a clock does not go backwards ({step:g} s)")
        with self._moved:
            self._now += timedelta(seconds=step)
            self._elapsed += step
            self._moved.notify_all()
            return self._now

    def set(self, when: datetime) -> datetime:
        """Move time forward to ``when`` (aware, not earlier than now)."""
        with self._moved:
            step = (utc(when) - self._now).total_seconds()
        return self.advance(step)

    def __repr__(self) -> str:
        return f"FakeClock({self.now().isoformat()}, monotonic={self.monotonic():g})"


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float = WAIT_TIMEOUT,
    interval: float = WAIT_INTERVAL,
    *,
    what: str | None = None,
) -> T:
    """Call ``predicate`` every ``interval`` real seconds until it returns a true value, and
    return that value; after ``timeout`` seconds raise AssertionError naming ``what`` (by
    default the predicate) and its last answer. An exception from the predicate propagates.

    For waiting that something *happens*. That something does *not* happen is shown after
    a counted number of passes (:meth:`~tickwork.service.Service.wait_passes`), never by
    waiting a while."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            name = what or getattr(predicate, "__qualname__", repr(predicate))
            raise AssertionError(f"not within {timeout:g} s: {name} (last: {value!r})")
        time.sleep(interval)
