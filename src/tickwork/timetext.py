"""Times and durations as users type them and as schedules store them: ISO-8601 instants
(``at``, ``anchor``, explain's slot, ``--from``), the one range rule for typed times
(:func:`check_instant`), durations like ``90s`` or ``1h30m``, and seconds written back the
same way. :mod:`tickwork.schedule` re-exports the public names, where they were first."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from tickwork.clock import EARLIEST, LATEST
from tickwork.errors import InvalidSchedule


def stored_instant(text: str, *, field: str) -> datetime:
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
