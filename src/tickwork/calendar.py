"""Business-day calendars: which dates are working days, and where a slot moves when its
date is not one.

A :class:`Calendar` is a weekend (Saturday and Sunday unless told otherwise), the public
holidays of a country and optionally one of its regions as the ``holidays`` package knows
them (never hand-written rules), plus dates added and minus dates removed by the operator.
A date is a *business day* when it is none of those. Calendars are stored by name
(``tickwork calendars create de-by --country DE --subdiv BY``); a cron schedule that names
one takes a :class:`HolidayPolicy` or a business-day rule (:mod:`tickwork.schedule`).

Holidays are computed per (country, region, year) once per process and cached: the
trigger asks for a date's fate per slot, never the database.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from calendar import monthrange
from dataclasses import dataclass, field
from datetime import date, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Any

from tickwork.errors import InvalidCalendar

WEEKDAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
DEFAULT_WEEKEND = frozenset({5, 6})
"""Saturday and Sunday (Monday is 0, as ``date.weekday()``)."""
MAX_BUSINESS_DAY = 23
"""The largest n of "the n-th business day of the month" (and -n from its end): a month
of 31 days with a two-day weekend has at most 23 business days."""
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
"""A calendar's name: lower-case letters, digits, ``.``, ``_``, ``-``, at most 63 (it is
typed on command lines and shown in messages: ``de-by``, ``us-nyse``)."""
SEARCH_DAYS = 3660
"""How far (about ten years) a search for the next or previous business day goes before it
gives up: only a calendar whose added dates cover years has none that close."""


class HolidayPolicy(StrEnum):
    """What a cron slot that falls on a day that is not a business day does."""

    SKIP = "skip"  # no run that day
    NEXT = "next-business-day"  # the same wall-clock time on the next business day
    PREVIOUS = "previous-business-day"  # the same wall-clock time on the business day before


@dataclass(frozen=True, slots=True)
class Calendar:
    """A named business-day calendar; validated on construction (InvalidCalendar)."""

    name: str
    country: str | None = None
    subdiv: str | None = None
    weekend: frozenset[int] = DEFAULT_WEEKEND
    added: tuple[date, ...] = ()
    removed: tuple[date, ...] = ()
    _added: frozenset[date] = field(init=False, repr=False, compare=False)
    _removed: frozenset[date] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_name(self.name)
        country, subdiv = _check_region(self.country, self.subdiv)
        object.__setattr__(self, "country", country)
        object.__setattr__(self, "subdiv", subdiv)
        weekend = frozenset(self.weekend)
        if not weekend <= set(range(7)):
            raise InvalidCalendar(f"weekend days must be 0 (Monday) to 6, got {sorted(weekend)}")
        if len(weekend) == 7:
            raise InvalidCalendar("a weekend of all seven days leaves no business day")
        object.__setattr__(self, "weekend", weekend)
        object.__setattr__(self, "added", tuple(sorted(set(self.added))))
        object.__setattr__(self, "removed", tuple(sorted(set(self.removed))))
        # Sets once, here: a day's fate is asked for per day a search examines.
        object.__setattr__(self, "_added", frozenset(self.added))
        object.__setattr__(self, "_removed", frozenset(self.removed))
        both = self._added & self._removed
        if both:
            first = min(both).isoformat()
            raise InvalidCalendar(f"{first} is both added and removed", field="add")

    # -- what a date is ------------------------------------------------------------------

    def closed(self, day: date) -> str | None:
        """Why ``day`` is not a business day (``"a holiday in calendar de-by (Christmas
        Day)"``), or None when it is one."""
        if day in self._removed:
            return None
        off = self._day_off(day)
        if off is not None:
            return off
        if day.weekday() in self.weekend:
            return f"a {WEEKDAY_NAMES[day.weekday()]}, a weekend day in calendar {self.name}"
        return None

    def _day_off(self, day: date) -> str | None:
        """Why ``day`` is off besides the weekend (a holiday, an added date), or None."""
        if day in self._added:
            return f"a day off added to calendar {self.name}"
        if self.country is not None:
            name = _public_holidays(self.country, self.subdiv, day.year).get(day)
            if name is not None:
                return f"a holiday in calendar {self.name} ({name})"
        return None

    def is_business_day(self, day: date) -> bool:
        return self.closed(day) is None

    def next_business_day(self, day: date) -> date | None:
        """The first business day after ``day``; None within :data:`SEARCH_DAYS`."""
        return self._step(day, 1)

    def previous_business_day(self, day: date) -> date | None:
        """The last business day before ``day``; None within :data:`SEARCH_DAYS`."""
        return self._step(day, -1)

    def _step(self, day: date, direction: int) -> date | None:
        for k in range(1, SEARCH_DAYS):
            try:
                candidate = day + timedelta(days=direction * k)
            except OverflowError:
                return None
            if self.is_business_day(candidate):
                return candidate
        return None

    def nth_business_day(self, year: int, month: int, n: int) -> date | None:
        """The ``n``-th business day of the month (``-1``: the last); None when the month
        has fewer."""
        days = self.business_days(year, month)
        index = n - 1 if n > 0 else n
        return days[index] if -len(days) <= index < len(days) else None

    def business_days(self, year: int, month: int) -> list[date]:
        days = (date(year, month, d) for d in range(1, monthrange(year, month)[1] + 1))
        return [day for day in days if self.is_business_day(day)]

    def worked_from(self, day: date) -> tuple[date, ...]:
        """The removed dates (days off the business works: business days whatever their
        weekday) from ``day`` on, ascending."""
        return self.removed[bisect_left(self.removed, day) :]

    def works_in(self, year: int, month: int) -> bool:
        """Whether a removed date falls in ``month`` of ``year``."""
        found = self.worked_from(date(year, month, 1))
        return bool(found) and (found[0].year, found[0].month) == (year, month)

    @property
    def weekend_text(self) -> str:
        """The weekend as the CLI writes it: ``SAT,SUN``, or ``none``."""
        return ",".join(WEEKDAYS[d] for d in sorted(self.weekend)) or "none"

    def days_off(self, start: date, end: date) -> list[tuple[date, str]]:
        """Every date from ``start`` to ``end`` (inclusive) that is not a business day
        because of a holiday or an added date (weekends left out), with the reason."""
        found = []
        day = start
        while day <= end:
            reason = self._day_off(day) if day not in self._removed else None
            if reason is not None:
                found.append((day, reason))
            day += timedelta(days=1)
        return found

    # -- text --------------------------------------------------------------------------------

    def describe(self) -> str:
        region = "no public holidays"
        if self.country is not None:
            region = f"public holidays of {self.country}" + (
                f"-{self.subdiv}" if self.subdiv else ""
            )
        text = f"{self.name}: {region}, weekend {self.weekend_text}"
        if self.added:
            text += f", {len(self.added)} day(s) added"
        if self.removed:
            text += f", {len(self.removed)} day(s) removed"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "country": self.country,
            "subdiv": self.subdiv,
            "weekend": [WEEKDAYS[d] for d in sorted(self.weekend)],
            "added": [d.isoformat() for d in self.added],
            "removed": [d.isoformat() for d in self.removed],
        }

    def definition(self) -> str:
        """The calendar as compact JSON text, without its name: what the store keeps, and
        what a schedule that uses the calendar carries (:mod:`tickwork.schedule`)."""
        data = self.to_json()
        del data["name"]
        return json.dumps(data, separators=(",", ":"), sort_keys=True)


def make_calendar(
    name: str,
    *,
    country: str | None = None,
    subdiv: str | None = None,
    weekend: str | None = None,
    add: list[str] | tuple[str, ...] = (),
    remove: list[str] | tuple[str, ...] = (),
) -> Calendar:
    """A calendar from loose input (the CLI's, the HTTP API's): ``weekend`` as
    ``"SAT,SUN"`` (the default) or ``"none"``, dates as YYYY-MM-DD. InvalidCalendar names
    what is wrong."""
    return Calendar(
        check_name(name),
        country,
        subdiv,
        parse_weekend(weekend) if weekend is not None else DEFAULT_WEEKEND,
        tuple(parse_date(d, field="add") for d in add),
        tuple(parse_date(d, field="remove") for d in remove),
    )


def calendar_from_definition(name: str, text: str) -> Calendar:
    """The calendar whose :meth:`Calendar.definition` is ``text`` (cached: a trigger pass
    reads the same few calendars over many jobs, and their holidays stay computed)."""
    return _from_definition(name, text)


@lru_cache(maxsize=256)
def _from_definition(name: str, text: str) -> Calendar:
    data = json.loads(text)
    return Calendar(
        name,
        data.get("country"),
        data.get("subdiv"),
        parse_weekend(",".join(data.get("weekend", []))),
        tuple(parse_date(d, field="add") for d in data.get("added", [])),
        tuple(parse_date(d, field="remove") for d in data.get("removed", [])),
    )


@lru_cache(maxsize=1024)
def _public_holidays(country: str, subdiv: str | None, year: int) -> dict[date, str]:
    import holidays as holidays_package  # here: 0.1 s, only when a calendar asks

    return dict(holidays_package.country_holidays(country, subdiv=subdiv, years=year))


@lru_cache(maxsize=1)
def _supported() -> dict[str, list[str]]:
    import holidays as holidays_package  # here, not at the top: as above

    return dict(holidays_package.list_supported_countries())


def _check_region(country: str | None, subdiv: str | None) -> tuple[str | None, str | None]:
    if country is None:
        if subdiv is not None:
            raise InvalidCalendar("a region (--subdiv) needs a country", field="subdiv")
        return None, None
    code = country.strip().upper()
    supported = _supported()
    if code not in supported:
        raise InvalidCalendar(
            f"unknown country {country!r}: expected an ISO 3166-1 code the holidays package "
            "supports, such as DE, US, GB, FR",
            field="country",
        )
    if subdiv is None:
        return code, None
    regions = {r.upper(): r for r in supported[code]}
    found = regions.get(subdiv.strip().upper())
    if found is None:
        known = ", ".join(supported[code]) or "none"
        raise InvalidCalendar(
            f"unknown region {subdiv!r} of {code} (known: {known})", field="subdiv"
        )
    return code, found


def check_name(name: object) -> str:
    """A calendar name (:data:`NAME_PATTERN`), or InvalidCalendar."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidCalendar(
            f"calendar name {name!r} must be 1 to 63 lower-case letters, digits, '.', '_' "
            "or '-', starting with a letter or digit (e.g. de-by)",
            field="name",
        )
    return name


def parse_date(text: str, *, field: str = "date") -> date:
    """``YYYY-MM-DD`` as a date, or InvalidCalendar naming ``field``."""
    try:
        if len(text) != 10:
            raise ValueError
        return date.fromisoformat(text)
    except (TypeError, ValueError):
        raise InvalidCalendar(
            f"{field} {text!r} is not a date: write YYYY-MM-DD, e.g. 2026-12-24", field=field
        ) from None


def parse_weekend(text: str) -> frozenset[int]:
    """``"SAT,SUN"`` (or ``"FRI,SAT"``; ``"none"`` or empty for no weekend) as weekday
    numbers, Monday 0; InvalidCalendar for a name that is not a day."""
    if text.strip().lower() in ("", "none"):
        return frozenset()
    days = set()
    for part in text.split(","):
        name = part.strip().upper()[:3]
        if name not in WEEKDAYS or len(part.strip()) < 3:
            raise InvalidCalendar(
                f"weekend {text!r}: {part.strip()!r} is not a day (write e.g. SAT,SUN)",
                field="weekend",
            )
        days.add(WEEKDAYS.index(name))
    return frozenset(days)


def check_business_day(n: object) -> int:
    """A business-day rule's ``n``: 1 to 23 from the start of the month, -1 to -23 from its
    end; InvalidCalendar otherwise."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= abs(n) <= MAX_BUSINESS_DAY:
        raise InvalidCalendar(
            f"business_day must be 1 to {MAX_BUSINESS_DAY} (the n-th business day of the "
            f"month) or -1 to -{MAX_BUSINESS_DAY} (counted from its end), got {n!r}",
            field="business_day",
        )
    return n
