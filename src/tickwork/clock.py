"""Time as an input.

Services take a :class:`Clock` so tests can move time instead of sleeping: every wait of a
service (:meth:`Clock.wait`) and every deadline it keeps is on its clock, and the
``now=`` it gives the store is :meth:`Clock.store_now`. The system clock answers None
there, so in production due-ness, leases and expiry are judged by the store's clock and
the node's clock is only used for *local* decisions (how long to sleep, whether its own
leader lease may have lapsed by its monotonic reading). A test clock
(:class:`tickwork.testing.FakeClock`) answers its own time, so that the store, too, sees
the time the test set.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never goes backwards."""
        ...

    def wait(self, event: threading.Event, deadline: float | None) -> bool:
        """Block until ``event`` is set or :meth:`monotonic` reaches ``deadline`` (None: no
        limit); return whether ``event`` is set. Every service waits through this."""
        ...

    def store_now(self) -> datetime | None:
        """The ``now=`` services pass to store calls: None (the store's own clock judges)
        for the system clock, this clock's time for a test clock."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, event: threading.Event, deadline: float | None) -> bool:
        if deadline is None:
            return event.wait()
        return event.wait(max(0.0, deadline - time.monotonic()))

    def store_now(self) -> datetime | None:
        return None


SYSTEM_CLOCK = SystemClock()


def utc(dt: datetime) -> datetime:
    """``dt`` as aware UTC; a naive value is rejected rather than guessed."""
    if dt.tzinfo is None:
        raise ValueError(f"naive datetime {dt.isoformat()} has no time zone")
    return dt.astimezone(UTC)


def to_micros(dt: datetime) -> int:
    """Microseconds since the Unix epoch, exact (the SQLite store's time representation)."""
    delta = utc(dt) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EARLIEST = EPOCH
"""The earliest instant tickwork accepts from input (:func:`tickwork.timetext.check_instant`):
a scheduler has no use for older times, and the arithmetic on an accepted time (explain
looks years back for a cron job's slot before it) stays far from year 1, where datetime
ends."""
LATEST = datetime(9999, 12, 30, tzinfo=UTC)
"""The calendar's end, for tickwork: the latest instant accepted from input and the last
slot any schedule has (:meth:`~tickwork.schedule.Interval.next_after` and
:func:`tickwork.cron.iterate` stop here rather than overflow). A day short of datetime's own
end, so that every slot can be shown in every time zone (UTC offsets are under a day)."""
