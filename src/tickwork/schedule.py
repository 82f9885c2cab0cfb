"""Schedules: when a job's slots fall.

Three kinds, each immutable and JSON-serialisable:

- :class:`Once`: one slot, at an instant, or after a delay measured from the store's clock
  when the job is submitted (``resolve``).
- :class:`Cron`: a cron expression in an IANA time zone (see :mod:`tickwork.cron` for DST).
- :class:`Interval`: every N seconds (N >= 1) from an anchor, in UTC elapsed time:
  slot k is ``anchor + k * every``, never wall-clock arithmetic, so DST cannot stretch or
  squeeze it. Without an anchor, the anchor is the submit time and the first slot is one
  interval later.

A slot is identified by its UTC instant; a job never gets two runs for one slot.

Every schedule ends at the calendar's end (:data:`tickwork.clock.LATEST`): a slot that
would fall later does not exist, so ``next_after`` answers None there, as after a one-off
job's slot. A time typed by a user (``at``, ``anchor``, explain's slot, ``--from``) must fall
between :data:`~tickwork.clock.EARLIEST` and ``LATEST`` (:func:`check_instant`, the one
range rule); times already stored are read whatever they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork import cron
from tickwork.clock import EARLIEST, LATEST, utc
from tickwork.errors import InvalidSchedule, ValidationError

MIN_INTERVAL = timedelta(seconds=1)
"""The shortest interval a job may repeat at."""
MAX_HORIZON = timedelta(days=36_525)
"""The longest delay or interval accepted: 100 years (beyond it, datetime overflows)."""


@dataclass(frozen=True, slots=True)
class Once:
    at: datetime | None = None
    delay: timedelta | None = None

    def __post_init__(self) -> None:
        if (self.at is None) == (self.delay is None):
            raise InvalidSchedule("a one-off schedule takes exactly one of 'at' or 'delay'")
        if self.delay is not None and self.delay > MAX_HORIZON:
            raise InvalidSchedule("delay must be at most 100 years", field="delay")
        if self.delay is not None and self.delay < timedelta(0):
            raise InvalidSchedule(
                f"delay must not be negative, got {self.delay.total_seconds():g} s",
                field="delay",
            )
        if self.at is not None:
            if self.at.tzinfo is None:
                raise InvalidSchedule(
                    f"'at' {self.at.isoformat()} has no time zone offset", field="at"
                )
            object.__setattr__(self, "at", self.at.astimezone(UTC))

    kind = "once"

    def resolve(self, now: datetime) -> Once:
        return Once(at=now + self.delay) if self.delay is not None else self

    def first_slot(self, now: datetime) -> datetime:
        resolved = self.resolve(now)
        assert resolved.at is not None
        return resolved.at

    def next_after(self, slot: datetime) -> datetime | None:
        return None

    def describe(self) -> str:
        if self.at is not None:
            return f"once at {self.at.isoformat()}"
        assert self.delay is not None
        return f"once, {self.delay.total_seconds():g} s after submit"

    def to_json(self) -> dict[str, Any]:
        if self.at is not None:
            return {"kind": "once", "at": self.at.isoformat()}
        assert self.delay is not None
        return {"kind": "once", "delay": self.delay.total_seconds()}


@dataclass(frozen=True, slots=True)
class Cron:
    expr: str
    tz: str = "UTC"

    def __post_init__(self) -> None:
        object.__setattr__(self, "expr", cron.normalize(self.expr))
        cron.zone(self.tz)

    kind = "cron"

    def resolve(self, now: datetime) -> Cron:
        return self

    def first_slot(self, now: datetime) -> datetime:
        first = cron.next_after(self.expr, self.tz, now)
        if first is None:
            raise InvalidSchedule(f"cron {self.expr!r} fires no more before {LATEST.isoformat()}")
        return first

    def next_after(self, slot: datetime) -> datetime | None:
        return cron.next_after(self.expr, self.tz, slot)

    def describe(self) -> str:
        return f"{cron.explain(self.expr)} ({self.tz})"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "cron", "expr": self.expr, "tz": self.tz}


@dataclass(frozen=True, slots=True)
class Interval:
    every: timedelta
    anchor: datetime | None = None

    def __post_init__(self) -> None:
        if self.every > MAX_HORIZON:
            raise InvalidSchedule("interval must be at most 100 years", field="every")
        if self.every < MIN_INTERVAL:
            raise InvalidSchedule(
                f"interval must be at least 1 s, got {self.every.total_seconds():g} s",
                field="every",
            )
        if self.anchor is not None:
            if self.anchor.tzinfo is None:
                raise InvalidSchedule(
                    f"anchor {self.anchor.isoformat()} has no time zone offset", field="anchor"
                )
            object.__setattr__(self, "anchor", utc(self.anchor))

    kind = "interval"

    def resolve(self, now: datetime) -> Interval:
        return self if self.anchor is not None else Interval(self.every, anchor=now)

    def first_slot(self, now: datetime) -> datetime:
        resolved = self.resolve(now)
        assert resolved.anchor is not None
        if resolved.anchor > now:
            return resolved.anchor
        first = self._after(resolved.anchor, now)
        if first is None:
            raise InvalidSchedule(f"the interval has no slot before {LATEST.isoformat()}")
        return first

    def next_after(self, slot: datetime) -> datetime | None:
        if self.anchor is None:
            raise InvalidSchedule("an interval schedule must be resolved before use")
        if self.anchor > slot:
            return self.anchor
        return self._after(self.anchor, slot)

    def _after(self, anchor: datetime, t: datetime) -> datetime | None:
        """The first slot after ``t``; None past the calendar's end."""
        # timedelta // timedelta floors on whole microseconds: exact, no float on the way.
        try:
            slot = anchor + ((t - anchor) // self.every + 1) * self.every
        except OverflowError:  # past year 9999
            return None
        return slot if slot <= LATEST else None

    def describe(self) -> str:
        text = f"every {format_seconds(self.every.total_seconds())}"
        if self.anchor is not None:
            text += f" from {self.anchor.isoformat()}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "interval",
            "every": self.every.total_seconds(),
            "anchor": self.anchor.isoformat() if self.anchor else None,
        }


Schedule = Once | Cron | Interval


def from_json(data: dict[str, Any]) -> Schedule:
    """The schedule :meth:`to_json` wrote, or InvalidSchedule. Stored times are read as they
    are, without the range rule of input: a row written before it must stay readable."""
    kind = data.get("kind")
    try:
        if kind == "once":
            if data.get("at") is not None:
                return Once(at=_stored_instant(str(data["at"]), field="at"))
            return Once(delay=timedelta(seconds=float(data["delay"])))
        if kind == "cron":
            return Cron(str(data["expr"]), str(data.get("tz") or "UTC"))
        if kind == "interval":
            return interval_from_json(data["every"], data.get("anchor"))
    except ValidationError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidSchedule(f"schedule {data!r} is missing or mistypes {exc}") from None
    raise InvalidSchedule(f"unknown schedule kind {kind!r} (expected once, cron or interval)")


def interval_from_json(every: float | str, anchor: str | None) -> Interval:
    """The interval whose :meth:`Interval.to_json` holds ``every`` and ``anchor``, read as
    :func:`from_json` reads them: for a store that extracts the two fields in SQL rather than
    decode the whole JSON in Python. A bad anchor raises InvalidSchedule; an ``every`` that
    is no number raises ValueError or TypeError (from_json words those)."""
    return Interval(
        timedelta(seconds=float(every)),
        _stored_instant(str(anchor), field="anchor") if anchor else None,
    )


def _stored_instant(text: str, *, field: str) -> datetime:
    """A time :meth:`to_json` wrote (ISO-8601 with an offset), as aware UTC, or
    InvalidSchedule."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidSchedule(f"{field} {text!r} is not an ISO-8601 time", field=field) from None
    if value.tzinfo is None:
        raise InvalidSchedule(f"{field} {text!r} has no UTC offset", field=field)
    return value.astimezone(UTC)


ISO_CHARACTERS = frozenset(chr(code) for code in range(0x20, 0x7F))
"""What an ISO-8601 time is written with: printable ASCII. Anything else is refused, not
trimmed: ``datetime.fromisoformat`` stops reading at a NUL, so ``...+00:00\\x00junk`` would
pass for a time, and ``str.strip`` drops more than blanks (``\\x1c``, em spaces)."""


def read_time(text: str, *, field: str = "at") -> datetime:
    """ISO-8601 text as a datetime, naive when it carries no offset; InvalidSchedule for text
    that is not one. Blanks around it are allowed; any character that is not printable
    ASCII is refused. Callers apply the range rule (:func:`check_instant`)."""
    stripped = text.strip(" ")
    if not ISO_CHARACTERS.issuperset(stripped):
        raise InvalidSchedule(
            f"{field} {text!r} is not an ISO-8601 time: write it in only printable ASCII "
            "characters (no control characters)",
            field=field,
        )
    try:
        return datetime.fromisoformat(stripped)
    except ValueError:
        raise InvalidSchedule(f"{field} {text!r} is not an ISO-8601 time", field=field) from None


def check_instant(value: datetime, *, field: str = "at", text: str | None = None) -> datetime:
    """``value`` (aware) as UTC if it falls in tickwork's calendar, from
    :data:`~tickwork.clock.EARLIEST` to :data:`~tickwork.clock.LATEST`, else InvalidSchedule.

    The one range rule for every time a user gives: ``at``, ``anchor``, explain's slot and
    ``tickwork next --from``, from Python, the CLI, the HTTP API and the dashboard. A time
    outside it has no use in a scheduler, and would overflow the arithmetic done on it.
    """
    shown = repr(text) if text is not None else value.isoformat()
    try:
        instant = value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 falls before year 1 in UTC
        instant = None
    if instant is None or not EARLIEST <= instant <= LATEST:
        raise InvalidSchedule(
            f"{field} {shown} is out of range: times run from {EARLIEST.isoformat()} to "
            f"{LATEST.isoformat()}",
            field=field,
        )
    return instant


def parse_instant(text: str, *, field: str = "at") -> datetime:
    """An ISO-8601 instant with an offset (``Z`` accepted), as aware UTC, within the range of
    :func:`check_instant`."""
    value = read_time(text, field=field)
    if value.tzinfo is None:
        raise InvalidSchedule(
            f"{field} {text!r} has no UTC offset (write e.g. 2026-12-01T09:00:00+01:00 or ...Z)",
            field=field,
        )
    return check_instant(value, field=field, text=text)


DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_duration(text: str, *, field: str = "duration") -> timedelta:
    """``"90"``, ``"90s"``, ``"10m"``, ``"1h30m"``, ``"2d"`` as a timedelta (not negative)."""
    raw = text.strip().lower()
    if not raw:
        raise InvalidSchedule(f"{field} is empty", field=field)
    try:
        plain = float(raw)
    except ValueError:
        pass
    else:
        return _duration(plain, text, field)
    total = 0.0
    number = ""
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = "ms" if raw.startswith("ms", i) else ch
        try:
            total += float(number) * DURATION_UNITS[unit]
        except (KeyError, ValueError):  # no number, two dots, or not a unit
            raise InvalidSchedule(
                f"{field} {text!r} is not a duration (e.g. 30s, 10m, 1h30m, 2d)", field=field
            ) from None
        number = ""
        i += len(unit)
    if number:
        raise InvalidSchedule(f"{field} {text!r} has a number without a unit", field=field)
    return _duration(total, text, field)


def _duration(seconds: float, text: str, field: str) -> timedelta:
    if not math.isfinite(seconds):
        raise InvalidSchedule(
            f"{field} {text!r} is not a duration (e.g. 30s, 10m, 1h30m, 2d)", field=field
        )
    if seconds < 0:
        raise InvalidSchedule(f"{field} {text!r} must not be negative", field=field)
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise InvalidSchedule(f"{field} {text!r} is too long", field=field) from None


def format_seconds(seconds: float) -> str:
    for unit, size in (("day", 86_400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds:g} second{'s' if seconds != 1 else ''}"
