"""The search for a cron rule's slots on a business-day calendar, with a budget.

A rule with a calendar can fire rarely (the 29th of February on a business day: twelve
years apart at worst), or never (a Saturday rule on a calendar whose weekend is Saturday
and Sunday). Searching it fire time by fire time to the calendar's end (year 9999) took
minutes to hours (issue 23). So the search walks the calendar's structure instead:

- **Candidate days**, month by month: a month the expression does not name costs nothing,
  a month it names one step; which of its days the day fields name (``15``, ``L``,
  ``MON#2`` ...) is computed once per arrangement of a month (its length and the weekday
  it starts on: :func:`tickwork.cron.days_named_in`) and cached.
- **skip** passes a day that is no business day whole, without a look at its slots
  (unless the caller asks to see them: ``days_off``).
- **business_day n** walks months; a month that cannot hold n business days by its
  weekdays alone, and has no worked date, is passed in one step.
- **next- / previous-business-day** groups the days off with the business day their slots
  move to, and merges the slots of the group lazily: the first slot a weekend moves to
  Monday is found without walking the weekend's other slots.

**What cannot fire** is decided from the structure, not by walking: a calendar's holidays
and added days only take business days away, so a rule whose named days are weekend days in
every arrangement of every month it names can fire only on a worked date (one removed from
the calendar), and the search goes from one worked date to the next. Likewise a
business-day rule whose months have fewer than n weekdays in every arrangement. What
holidays alone rule out (Christmas Day, every year) is walked: a country's holidays are
known for a span of years (the ``holidays`` package: to 2100 for most), and past it a
calendar is its weekend and its own dates.

**The budget.** One search (the next slot; the upcoming slots; explain's slot before, a
bisection; a calendar edit's re-plan of one job) may take
:data:`~tickwork.budget.SEARCH_BUDGET` steps, where a step is a candidate day, a month, a
day stepped over to find a business day, or a fire time examined (a DST policy's, too,
without a calendar: :func:`tickwork.cron.fires`). When they are spent the search stops,
and says so (:attr:`~tickwork.budget.Budget.exhausted`): a submit is refused
(:class:`~tickwork.errors.NeverFires`), a listing ends early, the trigger completes the
job. A rare rule needs a few dozen steps; the worst search costs a small fraction of a
second (``benchmarks/slot_search.py``). A plain expression (no calendar, no DST policy)
is cronsim's alone, each step of which gives up after 50 years.
"""

from __future__ import annotations

import heapq
from calendar import monthrange
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from itertools import pairwise
from typing import Protocol

from tickwork import cron
from tickwork.budget import Budget
from tickwork.calendar import SEARCH_DAYS, Calendar, HolidayPolicy
from tickwork.clock import LATEST
from tickwork.cron import MAX_SHIFT, DstGap, DstRepeat, Fire

_ONE_US = timedelta(microseconds=1)
_LAST_DAY = LATEST.date() + timedelta(days=1)
"""The last local date a slot can fall on in any zone (UTC offsets are under a day)."""


class Rule(Protocol):
    """What the search reads of a cron schedule (:class:`tickwork.schedule.Cron`)."""

    @property
    def expr(self) -> str: ...
    @property
    def tz(self) -> str: ...
    @property
    def dst_gap(self) -> DstGap | None: ...
    @property
    def dst_repeat(self) -> DstRepeat | None: ...
    @property
    def on_holiday(self) -> HolidayPolicy | None: ...
    @property
    def business_day(self) -> int | None: ...


class DaysOff:
    """How many slots on days off a search still reports as skipped (None: all of them);
    past that, days off are passed whole."""

    __slots__ = ("left",)

    def __init__(self, limit: int | None) -> None:
        self.left = limit

    def take(self) -> bool:
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    @property
    def done(self) -> bool:
        return self.left is not None and self.left <= 0


def calendar_fires(
    rule: Rule,
    calendar: Calendar,
    after: datetime,
    budget: Budget,
    *,
    days_off: int | None = None,
    until: datetime | None = None,
) -> Iterator[Fire]:
    """The rule's slots strictly after ``after``, ascending, as :meth:`Cron.fires
    <tickwork.schedule.Cron.fires>` gives them, up to ``until`` (inclusive) when given.
    Raises Exhausted when ``budget`` is spent."""
    walk = _Walk(rule, calendar, after, until=until, budget=budget, report=DaysOff(days_off))
    if rule.business_day is not None:
        found = walk.nth(rule.business_day)
    elif rule.on_holiday is HolidayPolicy.SKIP:
        found = walk.skip()
    else:
        found = walk.moved()
    for fire in found:
        if until is not None and fire.at > until:
            return
        yield fire


# -- what the structure rules out ----------------------------------------------------------


@lru_cache(maxsize=1024)
def names_a_weekday(expr: str, weekend: frozenset[int]) -> bool:
    """Whether some day the expression names falls on a weekday outside ``weekend``, in
    some arrangement of some month it names (then it does so forever after, every 28 or
    40 years at least)."""
    for month in cron.months_named(expr):
        for length, first in cron.arrangements(month):
            for day in cron.days_named_in(expr, month, length, first):
                if (first + day - 1) % 7 not in weekend:
                    return True
    return False


@lru_cache(maxsize=1024)
def weekdays_in(length: int, first: int, weekend: frozenset[int]) -> int:
    """Days outside ``weekend`` in a month of ``length`` days that starts on ``first``."""
    return sum(1 for day in range(length) if (first + day) % 7 not in weekend)


@lru_cache(maxsize=1024)
def most_weekdays(months: tuple[int, ...], weekend: frozenset[int]) -> int:
    """The most days outside ``weekend`` any of ``months`` has, in any year."""
    return max(
        weekdays_in(length, first, weekend)
        for month in months
        for length, first in cron.arrangements(month)
    )


def never_reason(rule: Rule, calendar: Calendar) -> str | None:
    """Why the rule can fire on no day but the calendar's worked dates (said as the end of a
    sentence), or None when the calendar's weekend alone does not rule it out."""
    months = cron.months_named(rule.expr)
    if rule.business_day is not None:
        most = most_weekdays(months, calendar.weekend)
        if most >= abs(rule.business_day):
            return None
        has = "has" if len(months) in (1, 12) else "have"
        return (
            f"{_month_list(months)} {has} at most {most} business days in calendar "
            f"{calendar.name} (weekend {calendar.weekend_text})"
        )
    if rule.on_holiday is not HolidayPolicy.SKIP or names_a_weekday(rule.expr, calendar.weekend):
        return None
    return (
        f"every day it names is a weekend day in calendar {calendar.name} ({calendar.weekend_text})"
    )


_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def _month_list(months: tuple[int, ...]) -> str:
    if len(months) == 12:
        return "every month"
    names = [_MONTH_NAMES[m - 1] for m in months]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


# -- walking the calendar ------------------------------------------------------------------


def candidate_days(expr: str, first: date, last: date, budget: Budget) -> Iterator[date]:
    """The days from ``first`` to ``last`` the expression's day fields name, ascending:
    one step per month the expression names, none for the others."""
    months = cron.months_named(expr)
    year, month = first.year, first.month
    while (year, month) <= (last.year, last.month):
        if month in months:
            budget.spend()
            budget.reached = date(year, month, 1)
            for day in cron.days_named(expr, year, month):
                found = date(year, month, day)
                if found > last:
                    return
                if found >= first:
                    yield found
        later = [m for m in months if m > month]
        year, month = (year, later[0]) if later else (year + 1, months[0])


class _Walk:
    """One search of a calendar rule's slots: from ``start`` (exclusive), to the local date
    ``last`` (inclusive), within ``budget``, reporting days off as ``report`` allows."""

    def __init__(
        self,
        rule: Rule,
        calendar: Calendar,
        after: datetime,
        *,
        until: datetime | None,
        budget: Budget,
        report: DaysOff,
    ) -> None:
        self.rule = rule
        self.calendar = calendar
        self.start = after.astimezone(UTC)
        self.first = _local_day(self.start, rule.tz)
        self.last = _LAST_DAY if until is None else min(_local_day(until, rule.tz), _LAST_DAY)
        self.budget = budget
        self.report = report
        self.zone = cron.zone(rule.tz)

    def day(self, day: date, after: datetime) -> Iterator[Fire]:
        return day_fires(self.rule, day, after, self.budget)

    # -- skip --------------------------------------------------------------------------------

    def skip(self) -> Iterator[Fire]:
        rule, calendar, report = self.rule, self.calendar, self.report
        if names_a_weekday(rule.expr, calendar.weekend):
            days = candidate_days(rule.expr, self.first, self.last, self.budget)
        else:
            days = self._worked_days()
        for day in days:
            self.budget.spend()
            reason = calendar.closed(day)
            if reason is None:
                for fire in self.day(day, self.start):
                    if not fire.skipped or report.take():
                        yield fire
                continue
            if report.done:
                continue  # a day off, passed whole
            for fire in self.day(day, self.start):
                if not report.take():
                    break
                yield fire if fire.skipped else Fire(fire.at, f"skipped: {day} is {reason}", True)

    def _worked_days(self) -> Iterator[date]:
        """The calendar's worked dates the expression names, from ``first`` to ``last``."""
        for day in self.calendar.worked_from(self.first):
            if day > self.last:
                return
            self.budget.spend()
            self.budget.reached = day
            if day.day in cron.days_named(self.rule.expr, day.year, day.month):
                yield day

    # -- business_day ------------------------------------------------------------------------

    def nth(self, n: int) -> Iterator[Fire]:
        calendar, budget = self.calendar, self.budget
        months = cron.months_named(self.rule.expr)
        if most_weekdays(months, calendar.weekend) >= abs(n):
            spans = self._months(months)
        else:  # only a month with worked dates can hold n business days
            spans = self._worked_months(months)
        for year, month in spans:
            budget.spend()
            budget.reached = date(year, month, 1)
            weekday, length = monthrange(year, month)
            if weekdays_in(length, weekday, calendar.weekend) < abs(n) and not (
                calendar.works_in(year, month)
            ):
                continue
            budget.spend(length)
            day = calendar.nth_business_day(year, month, n)
            if day is not None and day >= self.first:
                yield from self.day(day, self.start)

    def _months(self, months: tuple[int, ...]) -> Iterator[tuple[int, int]]:
        year, month = self.first.year, self.first.month
        while (year, month) <= (self.last.year, self.last.month):
            if month in months:
                yield year, month
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)

    def _worked_months(self, months: tuple[int, ...]) -> Iterator[tuple[int, int]]:
        seen: tuple[int, int] | None = None
        for day in self.calendar.worked_from(self.first.replace(day=1)):
            if day > self.last:
                return
            self.budget.spend()
            if day.month in months and (day.year, day.month) != seen:
                seen = (day.year, day.month)
                yield seen

    # -- next- and previous-business-day -----------------------------------------------------

    def moved(self) -> Iterator[Fire]:
        """Candidate days in groups that run on one business day each (the day itself, or
        the one a day off moves to), each group's slots merged."""
        forward = self.rule.on_holiday is HolidayPolicy.NEXT
        begin = self.first
        if forward:
            # A day off before the start may move its slots past it: begin after the last
            # business day before it.
            before = _Targets(self.calendar, False, self.budget).step(self.first, -1)
            if before is not None:
                begin = before + timedelta(days=1)
        targets = _Targets(self.calendar, forward, self.budget)
        group: list[date] = []
        target: date | None = None
        for day in candidate_days(self.rule.expr, begin, _LAST_DAY, self.budget):
            if forward and day > self.last:
                break  # its slots, and all later ones, run after ``last``
            moved_to = targets.of(day)
            if not forward and day > self.last and (moved_to is None or moved_to > self.last):
                break
            if group and moved_to is not None and moved_to == target:
                group.append(day)
                continue
            if group:
                yield from self._group(target, group)
            group, target = [day], moved_to
        if group:
            yield from self._group(target, group)

    def _group(self, target: date | None, days: list[date]) -> Iterator[Fire]:
        """The slots of ``days`` (candidate days, ascending) that all run on ``target``, in
        order; slots moved onto one instant run once."""
        report = self.report
        if target is None:
            for day in days:
                if day < self.first or report.done:
                    continue
                why = f"skipped: {day} is {self.calendar.closed(day)}, and no business day is near"
                for fire in self.day(day, self.start):
                    if not report.take():
                        break
                    yield fire if fire.skipped else Fire(fire.at, why, True)
            return
        streams: list[Iterator[_Keyed]] = []
        moves = target >= self.first  # else every slot moved there falls before the start
        for order, day in enumerate(days):
            if day == target:
                if moves:
                    streams.append(_keyed(self.day(day, self.start), order))
                continue
            if moves:
                streams.append(self._moved(day, target, order))
            if day >= self.first and not report.done:
                streams.append(self._dst_skips(day, order))
        latest: datetime | None = None
        for at, _, _, fire in heapq.merge(*streams):
            if at <= self.start:
                continue
            if fire.skipped:
                if report.take():
                    yield fire
                continue
            if latest is not None and at <= latest:
                continue  # two slots moved onto one instant: one run
            latest = at
            yield fire

    def _moved(self, day: date, target: date, order: int) -> Iterator[_Keyed]:
        """The slots of the day off ``day`` that run, moved to ``target`` at the same wall
        time, in order, lazily.

        Hazard: a DST change breaks the order. On ``day``, wall times run back (a repeated
        hour) or jump; on ``target``, a wall time in a gap lands after later ones. So the
        day is cut into runs, at its own changes and at the wall times of the target's,
        within each of which the moved times rise; the runs are merged."""
        tz, zone = self.rule.tz, self.zone
        which = "next" if target > day else "previous"
        note = (
            f"moved to the {which} business day, {target.isoformat()}: {day} is "
            f"{self.calendar.closed(day)}"
        )
        begin, end = _midnight(day, tz) - _ONE_US, _midnight_after(day, tz)
        cuts = {change.at for change in cron.transitions(tz, begin, end)}
        around = (_midnight(target, tz) - MAX_SHIFT, _midnight_after(target, tz) + MAX_SHIFT)
        for change in cron.transitions(tz, *around):
            for offset in (change.before, change.after):
                wall = (change.at + offset).replace(tzinfo=None).time()
                for fold in (0, 1):
                    cuts.add(datetime.combine(day, wall, zone).replace(fold=fold).astimezone(UTC))
        inner = sorted(cut for cut in cuts if begin < cut < end)
        edges = [begin, *(cut - _ONE_US for cut in inner), end]
        runs = []
        for number, (lo, hi) in enumerate(pairwise(edges)):
            lower = self._past_start(day, target, lo) if target == self.first else lo
            if lower < hi:
                runs.append(self._run(day, target, order, (number << 32, lower, hi), note))
        return heapq.merge(*runs)

    def _past_start(self, day: date, target: date, lo: datetime) -> datetime:
        """Where the run of ``day`` from ``lo`` starts to move slots past the start (on
        ``target``, the start's own day): moved times rise within a run, and both days keep
        one UTC offset through it, so the start's wall time marks the first slot to count."""
        zone = self.zone
        inside = (lo + _ONE_US).astimezone(zone)  # a wall time of the run, on ``day``
        on_target = datetime.combine(target, inside.time().replace(tzinfo=None), zone)
        offset_day, offset_target = inside.utcoffset(), on_target.utcoffset()
        assert offset_day is not None
        assert offset_target is not None
        wall = (self.start + offset_target).replace(tzinfo=None)  # the start, on target
        if wall.date() < target:
            return lo
        if wall.date() > target:
            return datetime.max.replace(tzinfo=UTC)
        return max(lo, (datetime.combine(day, wall.time()) - offset_day).replace(tzinfo=UTC))

    def _run(
        self, day: date, target: date, order: int, span: tuple[int, datetime, datetime], note: str
    ) -> Iterator[_Keyed]:
        """The slots of ``day`` in ``span`` (its number, then after its start, up to its
        end), moved to ``target``: within a run, in order."""
        number, lo, hi = span
        zone = self.zone
        for seq, fire in enumerate(self.day(day, lo)):
            if fire.at > hi:
                return
            if fire.skipped:
                continue  # a slot its DST policy takes away is not moved (_dst_skips)
            local = fire.at.astimezone(zone).replace(tzinfo=None)
            at = datetime.combine(target, local.time(), zone).astimezone(UTC)
            yield at, order, number | seq, Fire(at, note)

    def _dst_skips(self, day: date, order: int) -> Iterator[_Keyed]:
        """The slots of the day off ``day`` that its DST policy skips, at their own times
        (a slot that does not exist is not moved): a gap's at its end, a repeated span's
        in its second pass."""
        tz = self.rule.tz
        for change in cron.transitions(tz, _midnight(day, tz) - _ONE_US, _midnight_after(day, tz)):
            lower = max(self.start, change.at - _ONE_US)
            for seq, fire in enumerate(self.day(day, lower)):
                if fire.at > change.at + abs(change.shift):
                    break
                if fire.skipped:
                    yield fire.at, order, seq, fire


_Keyed = tuple[datetime, int, int, Fire]
"""A slot with what orders it in a group: its instant, its day's place, its place that day."""


def _keyed(fires: Iterator[Fire], order: int) -> Iterator[_Keyed]:
    for seq, fire in enumerate(fires):
        yield fire.at, order, seq, fire


class _Targets:
    """The business day each candidate day's slots run on, memoized over the stretch of
    days off it steps across (a long closure is stepped over once, not once a day)."""

    def __init__(self, calendar: Calendar, forward: bool, budget: Budget) -> None:
        self.calendar = calendar
        self.forward = forward
        self.budget = budget
        # NEXT: days in [lo, hi] are off and move to ``target``.
        # PREVIOUS: days in (target, hi] are off and move back to ``target``.
        self.lo: date | None = None
        self.hi: date | None = None
        self.target: date | None = None

    def of(self, day: date) -> date | None:
        """``day`` when it is a business day, else where its slots move (None: no business
        day within the calendar's SEARCH_DAYS)."""
        self.budget.spend()
        if self.calendar.is_business_day(day):
            if not self.forward:
                self.lo, self.hi, self.target = day, day, day
            return day
        if self.forward:
            if self.lo is not None and self.hi is not None and self.lo <= day <= self.hi:
                return self.target
            target = self.step(day, 1, None)
            self.lo, self.hi, self.target = (
                day,
                (target - timedelta(days=1)) if target else None,
                target,
            )
            return target
        known = self.hi if self.target is not None else None
        target = self.step(day, -1, known)
        if target is not None:
            self.lo, self.hi, self.target = target, day, target
        return target

    def step(self, day: date, direction: int, known: date | None = None) -> date | None:
        for k in range(1, SEARCH_DAYS):
            self.budget.spend()
            try:
                candidate = day + timedelta(days=direction * k)
            except OverflowError:
                return None
            if known is not None and candidate <= known and self.target is not None:
                # Every day from here down to the target is off.
                return self.target if (day - self.target).days < SEARCH_DAYS else None
            if self.calendar.is_business_day(candidate):
                return candidate
        return None


# -- one day's slots -------------------------------------------------------------------------


def day_fires(rule: Rule, day: date, after: datetime, budget: Budget) -> Iterator[Fire]:
    """The rule's fire times (as :func:`tickwork.cron.fires` gives them, DST policy
    applied) on the local date ``day``, strictly after ``after``, at the times of the day
    its expression names: the day is the caller's to choose (a day its day fields name, or
    a business-day rule's day)."""
    zone = cron.zone(rule.tz)
    lower = max(after, _midnight(day, rule.tz) - _ONE_US)
    end = _midnight_after(day, rule.tz)
    # The expression's times on every day: on a day its day fields name, the same fire
    # times, and the fire after the day's last is the next day's, not one years off that
    # cronsim would scan the calendar for.
    for fire in cron.fires(
        every_day(rule.expr),
        rule.tz,
        lower,
        rule.dst_gap,
        rule.dst_repeat,
        until=end,
        budget=budget,
    ):
        if fire.at.astimezone(zone).date() != day:
            return
        yield fire


@lru_cache(maxsize=1024)
def every_day(expr: str) -> str:
    """``expr`` with its day-of-month and day-of-week ``*``: its times, every day."""
    parts = expr.split()
    parts[-3], parts[-1] = "*", "*"
    return " ".join(parts)


def _local_day(at: datetime, tz: str) -> date:
    return at.astimezone(cron.zone(tz)).date()


def _midnight(day: date, tz: str) -> datetime:
    return datetime.combine(day, time(0), cron.zone(tz)).astimezone(UTC)


def _midnight_after(day: date, tz: str) -> datetime:
    if day >= date.max:
        return datetime.max.replace(tzinfo=UTC)
    return _midnight(day + timedelta(days=1), tz)
