"""Schedules: when a job's slots fall.

Three kinds, each immutable and JSON-serialisable:

- :class:`Once`: one slot, at an instant, or after a delay measured from the store's clock
  when the job is submitted (``resolve``).
- :class:`Cron`: a cron expression in an IANA time zone, with an optional DST policy (see
  :mod:`tickwork.cron`) and an optional business-day calendar (:mod:`tickwork.calendar`):
  a slot on a day off is skipped or moved (``on_holiday``), or the day is the month's n-th
  business day (``business_day``).
- :class:`Interval`: every N seconds (N >= 1) from an anchor, in UTC elapsed time:
  slot k is ``anchor + k * every``, never wall-clock arithmetic, so DST cannot stretch or
  squeeze it. Without an anchor, the anchor is the submit time and the first slot is one
  interval later.

A slot is identified by its UTC instant; a job never gets two runs for one slot.

Every schedule ends at the calendar's end (:data:`tickwork.clock.LATEST`): a slot that
would fall later does not exist, so ``next_after`` answers None there, as after a one-off
job's slot. A time typed by a user (``at``, ``anchor``, explain's slot, ``--from``) must fall
between :data:`~tickwork.clock.EARLIEST` and ``LATEST``
(:func:`tickwork.timetext.check_instant`, the one range rule); times already stored are
read whatever they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from tickwork import cron
from tickwork.budget import SEARCH_BUDGET, Budget, Exhausted
from tickwork.calendar import Calendar, HolidayPolicy, calendar_from_definition, check_business_day
from tickwork.clock import LATEST, utc
from tickwork.cron import DstGap, DstRepeat, Fire
from tickwork.errors import InvalidSchedule, NeverFires, ValidationError
from tickwork.search import calendar_fires, never_reason
from tickwork.timetext import format_seconds, stored_instant

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
            return f"once at {self.at.isoformat(timespec='seconds')}"
        assert self.delay is not None
        return f"once, {self.delay.total_seconds():g} s after submit"

    def to_json(self) -> dict[str, Any]:
        if self.at is not None:
            return {"kind": "once", "at": self.at.isoformat()}
        assert self.delay is not None
        return {"kind": "once", "delay": self.delay.total_seconds()}


class DstWarning(UserWarning):
    """A schedule meets a DST change within a year (``app.schedule`` warns it; the job is
    created all the same). The message names the date and what the policy does there."""


@dataclass(frozen=True, slots=True)
class Search:
    """What a search for a cron rule's next slot found (:meth:`Cron.search`): the ``slot``,
    or None, because there is none (``exhausted`` False) or its budget ran out first;
    ``reached``, the local date the search got to (None on the plain fast path)."""

    slot: datetime | None
    exhausted: bool = False
    reached: date | None = None


DST_WARNING_HORIZON = timedelta(days=366)
"""How far ahead a new schedule is checked for DST changes it meets."""


@dataclass(frozen=True, slots=True)
class Cron:
    """A cron schedule. ``dst_gap``/``dst_repeat`` None: Debian cron's rules (see
    :mod:`tickwork.cron`). ``calendar`` names a business-day calendar; ``on_holiday`` (default
    ``skip`` with a calendar) says what a slot on a day off does, or ``business_day`` = n
    makes the slot's day the month's n-th business day (-1: the last), at the expression's
    times, in the months it names. ``calendar_def`` is the named calendar's definition, which
    the store binds when the job is written (and re-binds when the calendar is edited)."""

    expr: str
    tz: str = "UTC"
    dst_gap: DstGap | None = None
    dst_repeat: DstRepeat | None = None
    calendar: str | None = None
    on_holiday: HolidayPolicy | None = None
    business_day: int | None = None
    calendar_def: Calendar | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "expr", cron.normalize(self.expr))
        cron.zone(self.tz)
        object.__setattr__(self, "dst_gap", _policy(DstGap, self.dst_gap, "dst_gap"))
        object.__setattr__(self, "dst_repeat", _policy(DstRepeat, self.dst_repeat, "dst_repeat"))
        on_holiday = _policy(HolidayPolicy, self.on_holiday, "on_holiday")
        if self.business_day is not None:
            check_business_day(self.business_day)
            if on_holiday is not None:
                raise InvalidSchedule(
                    "business_day picks a business day itself: on_holiday does not apply "
                    "(give one of them)",
                    field="on_holiday",
                )
            self._check_day_fields()
        if self.calendar is None:
            if on_holiday is not None or self.business_day is not None:
                what = "on_holiday" if on_holiday is not None else "business_day"
                raise InvalidSchedule(f"{what} needs a calendar", field="calendar")
        elif self.business_day is None and on_holiday is None:
            on_holiday = HolidayPolicy.SKIP
        object.__setattr__(self, "on_holiday", on_holiday)
        if self.calendar_def is not None and self.calendar_def.name != self.calendar:
            raise InvalidSchedule("calendar_def is not the named calendar", field="calendar")

    def _check_day_fields(self) -> None:
        parts = self.expr.split()
        dom, dow = parts[-3], parts[-1]
        if dom not in ("*", "1") or dow != "*":
            raise InvalidSchedule(
                f"with business_day the day is the rule's: write the expression's "
                f"day-of-month as * (or 1, as @monthly) and its day-of-week as *, "
                f"got {dom!r} and {dow!r}",
                field="business_day",
            )

    kind = "cron"

    @property
    def plain(self) -> bool:
        """No policy and no calendar: Debian cron, on the fast path."""
        return self.dst_gap is None and self.dst_repeat is None and self.calendar is None

    def bind(self, calendar: Calendar) -> Cron:
        """This schedule with ``calendar``'s definition (the calendar it names)."""
        return replace(self, calendar_def=calendar)

    def resolve(self, now: datetime) -> Cron:
        return self

    def first_slot(self, now: datetime) -> datetime:
        """The first slot after ``now``; NeverFires, naming the rule and why, when there is
        none or its search finds none within its budget (:mod:`tickwork.search`)."""
        found = self.search(now)
        if found.slot is None:
            raise self.no_slot(now, found)
        return found.slot

    def search(self, after: datetime, *, budget: Budget | None = None) -> Search:
        """The first slot that runs strictly after ``after``, searched within ``budget``
        (one of :data:`~tickwork.budget.SEARCH_BUDGET` steps when None), and whether the
        budget ran out before one was found."""
        if self.plain:
            return Search(cron.next_after(self.expr, self.tz, after))
        budget = Budget() if budget is None else budget
        try:
            for fire in self._fires(after, budget, days_off=0, until=None):
                if not fire.skipped:
                    return Search(fire.at, reached=budget.reached)
        except Exhausted:
            return Search(None, exhausted=True, reached=budget.reached)
        return Search(None, reached=budget.reached)

    def next_after(self, slot: datetime, *, budget: Budget | None = None) -> datetime | None:
        """The first slot after ``slot``; None when there is none, or none within the
        search's budget (:meth:`search` tells which)."""
        if self.plain:
            return cron.next_after(self.expr, self.tz, slot)
        return self.search(slot, budget=budget).slot

    def iterate(
        self, after: datetime, *, until: datetime | None = None, budget: Budget | None = None
    ) -> Iterator[datetime]:
        """The slots that run, strictly after ``after`` (and not after ``until``), ascending,
        for as long as the search's budget lasts."""
        if self.plain:
            return cron.iterate(self.expr, self.tz, after, until=until)
        fires = self.fires(after, days_off=0, until=until, budget=budget)
        return (fire.at for fire in fires if not fire.skipped)

    def no_slot(self, after: datetime, found: Search) -> NeverFires:
        """The error for a search from ``after`` that ``found`` no slot: the rule, and why."""
        if found.exhausted:
            to = f", to {found.reached.isoformat()}" if found.reached is not None else ""
            return NeverFires(
                self.rule_name(),
                f"finds no slot within the search budget ({SEARCH_BUDGET:,} days and slots "
                f"examined{to}): no scheduler could plan it (are its calendar's days off "
                "right?)",
            )
        calendar = self.calendar_def
        reason = never_reason(self, calendar) if calendar is not None else None
        if reason is None:
            why = (
                f"never fires after {after.isoformat()}: it has no slot before {LATEST.isoformat()}"
            )
        elif calendar is not None and calendar.removed:
            why = (
                f"never fires after {after.isoformat()}: {reason}, and no later worked date "
                "is one of its days"
            )
        else:
            why = f"never fires: {reason}"
        return NeverFires(self.rule_name(), why)

    def rule_name(self) -> str:
        """The rule as messages name it: ``cron '0 9 * * 6' with calendar 'x' (business days
        only)``."""
        text = f"cron {self.expr!r}" + (f" in {self.tz}" if self.tz != "UTC" else "")
        if self.calendar is None:
            return text
        if self.business_day is not None:
            what = f"the {_nth(self.business_day)} business day of the month"
        elif self.on_holiday is HolidayPolicy.SKIP:
            what = "business days only"
        else:
            which = "next" if self.on_holiday is HolidayPolicy.NEXT else "previous"
            what = f"days off move to the {which} business day"
        return f"{text} with calendar {self.calendar!r} ({what})"

    def note_at(self, slot: datetime) -> str | None:
        """What a DST change or the calendar does at ``slot``: a slot that runs with a note,
        a skipped one, or one the calendar moved away (``explain`` says it); else None."""
        for fire in self.fires(slot - _ONE_US, until=slot):
            if fire.at == slot and fire.note is not None:
                return fire.note
        calendar = self.calendar_def
        if calendar is not None and self.on_holiday is not None:
            for fire in cron.fires(
                self.expr, self.tz, slot - _ONE_US, self.dst_gap, self.dst_repeat
            ):
                if fire.at == slot and not fire.skipped:
                    return self._on_holiday(calendar, fire, cron.zone(self.tz)).note
                break
        return None

    def fires(
        self,
        after: datetime,
        *,
        days_off: int | None = None,
        until: datetime | None = None,
        budget: Budget | None = None,
    ) -> Iterator[Fire]:
        """Slots strictly after ``after`` (and not after ``until``), ascending, each with
        what a DST change or the calendar does to it (``note``), skipped slots included
        (``skipped``): all that DST skips, and of those a day off skips, ``days_off`` at
        most (None: all; past it, days off are passed whole). It ends where the search's
        budget does (one budget for the whole iteration: :mod:`tickwork.search`).

        A rule whose days the calendar's weekend rules out but for worked dates goes from
        one worked date to the next: the days off between are not reported."""
        budget = Budget() if budget is None else budget
        try:
            yield from self._fires(after, budget, days_off=days_off, until=until)
        except Exhausted:
            return

    def _fires(
        self, after: datetime, budget: Budget, *, days_off: int | None, until: datetime | None
    ) -> Iterator[Fire]:
        if self.calendar is None:
            return cron.fires(
                self.expr, self.tz, after, self.dst_gap, self.dst_repeat, until=until, budget=budget
            )
        calendar = self.calendar_def
        if calendar is None:
            raise InvalidSchedule(
                f"calendar {self.calendar!r} is not loaded: a schedule reads it from the store",
                field="calendar",
            )
        return calendar_fires(self, calendar, after, budget, days_off=days_off, until=until)

    def _on_holiday(self, calendar: Calendar, fire: Fire, zone: Any) -> Fire:
        local = fire.at.astimezone(zone)
        reason = calendar.closed(local.date())
        if reason is None:
            return fire
        day = f"{local.date().isoformat()} is {reason}"
        if self.on_holiday is HolidayPolicy.SKIP:
            return Fire(fire.at, f"skipped: {day}", skipped=True)
        forward = self.on_holiday is HolidayPolicy.NEXT
        target = (
            calendar.next_business_day(local.date())
            if forward
            else calendar.previous_business_day(local.date())
        )
        if target is None:
            return Fire(fire.at, f"skipped: {day}, and no business day is near", skipped=True)
        at = datetime.combine(target, local.time().replace(tzinfo=None), zone).astimezone(UTC)
        which = "next" if forward else "previous"
        return Fire(at, f"moved to the {which} business day, {target.isoformat()}: {day}")

    def dst_warnings(self, now: datetime) -> list[str]:
        """What each DST change of the next year does to this schedule's slots, one line
        each naming the date; empty when none touches them."""
        found = []
        for change in cron.transitions(self.tz, now, now + DST_WARNING_HORIZON):
            span = abs(change.shift)
            window_end = change.at + span + span
            # From the first instant a note can fall at: the repeated span's first pass,
            # or the gap's end (an every-second schedule must not be walked for hours).
            begin = change.at - (span if change.shift < timedelta(0) else timedelta(0))
            for fire in self.fires(max(now, begin - _ONE_US), until=window_end):
                if fire.note is not None and "DST" in fire.note:
                    found.append(f"{self.expr!r} in {self.tz}: {fire.note}")
                    break
        return found

    def describe(self) -> str:
        text = f"{cron.explain(self.expr)} ({self.tz})"
        if self.business_day is not None:
            text = self._describe_business_day()
        if self.dst_gap is not None or self.dst_repeat is not None:
            gap = self.dst_gap or cron.default_gap(self.expr)
            repeat = self.dst_repeat or cron.default_repeat(self.expr)
            text += f"; DST gap {gap}, repeat {repeat}"
        if self.business_day is None and self.calendar is not None:
            text += f"; on days off in calendar {self.calendar}: {self.on_holiday}"
        return text

    def _describe_business_day(self) -> str:
        """What a ``--business-day`` rule does: the expression's times of day on the N-th
        business day, which replaces its days (``@monthly --business-day -1``: "At 00:00 on
        the last business day of every month", not "on the first day ...; on the last")."""
        nth = _nth(self.business_day or 0)
        fields = cron.normalize(self.expr).split(" ")
        day_at = -3  # day-of-month, then month, then day-of-week
        times = " ".join([*fields[:day_at], "*", "*", "*"])
        said = cron.explain(times)
        where = f"in calendar {self.calendar} ({self.tz})"
        months = fields[-2]
        if said.endswith(" every day") and months == "*":
            at = said.removesuffix(" every day")
            return f"{at} on the {nth} business day of every month {where}"
        return (
            f"{cron.explain(self.expr)} ({self.tz}), the days replaced by the {nth} business "
            f"day of the month in calendar {self.calendar}"
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": "cron", "expr": self.expr, "tz": self.tz}
        for key in ("dst_gap", "dst_repeat", "calendar", "on_holiday", "business_day"):
            value = getattr(self, key)
            if value is not None:
                data[key] = str(value) if key != "business_day" else value
        if self.calendar_def is not None:
            data["calendar_def"] = self.calendar_def.definition()
        return data


def _policy(kind: type[Any], value: Any, field: str) -> Any:
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(v) for v in kind)
        raise InvalidSchedule(
            f"{field} must be one of {allowed}, got {value!r}", field=field
        ) from None


_ONE_US = timedelta(microseconds=1)


def _midnight(day: date, tz: str) -> datetime:
    return datetime.combine(day, time(0), cron.zone(tz)).astimezone(UTC)


def _nth(n: int) -> str:
    """A business-day rule's n in words: ``3rd``, ``last``, ``2nd last``."""
    return "last" if n == -1 else (f"{_ordinal(-n)} last" if n < 0 else _ordinal(n))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def shown_json(schedule: Schedule) -> dict[str, Any]:
    """A schedule as an interface shows it: :meth:`to_json` without the calendar definition
    the store keeps beside the calendar's name."""
    data = schedule.to_json()
    data.pop("calendar_def", None)
    return data


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
            text += f" from {self.anchor.isoformat(timespec='seconds')}"
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
                return Once(at=stored_instant(str(data["at"]), field="at"))
            return Once(delay=timedelta(seconds=float(data["delay"])))
        if kind == "cron":
            name = data.get("calendar")
            definition = data.get("calendar_def")
            return Cron(
                str(data["expr"]),
                str(data.get("tz") or "UTC"),
                data.get("dst_gap"),
                data.get("dst_repeat"),
                name,
                data.get("on_holiday"),
                data.get("business_day"),
                calendar_from_definition(str(name), str(definition)) if definition else None,
            )
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
        stored_instant(str(anchor), field="anchor") if anchor else None,
    )
