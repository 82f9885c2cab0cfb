"""Time as an input.

Services take a :class:`Clock` so tests can move time instead of sleeping. The clock a node
holds is only ever used for *local* decisions (how long to sleep, whether its own leader
lease may have lapsed by its monotonic reading); due-ness, leases and expiry are judged by
the store's clock.
"""

from __future__ import annotations

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


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class SkewedClock:
    """The system clock shifted by ``offset``: a node whose local clock is wrong."""

    def __init__(self, offset: timedelta) -> None:
        self.offset = offset

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def monotonic(self) -> float:
        return time.monotonic()


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
"""The earliest instant tickwork accepts from input (:func:`tickwork.schedule.check_instant`):
a scheduler has no use for older times, and the arithmetic on an accepted time (explain
looks years back for a cron job's slot before it) stays far from year 1, where datetime
ends."""
LATEST = datetime(9999, 12, 30, tzinfo=UTC)
"""The calendar's end, for tickwork: the latest instant accepted from input and the last
slot any schedule has (:meth:`~tickwork.schedule.Interval.next_after` and
:func:`tickwork.cron.iterate` stop here rather than overflow). A day short of datetime's own
end, so that every slot can be shown in every time zone (UTC offsets are under a day)."""
