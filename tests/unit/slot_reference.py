"""The calendar rules' slot search as it was before the search budget (issue 23), kept as an
oracle: slot by slot over every cron fire, a day off skipped or moved one fire at a time.
It is slow where the rule is rare (it walks to year 9999 for a rule that never fires), but
straightforward; ``test_slot_search`` holds the day-by-day search to its answers over
random rules whose slots come soon."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from tickwork import cron
from tickwork.calendar import Calendar, HolidayPolicy
from tickwork.clock import LATEST
from tickwork.cron import Fire
from tickwork.schedule import Cron

BASE_FIRES = 20_000
"""The fire times the oracle may examine before it gives up (TooSlow): it has no budget of
its own, and a test has to end."""


class TooSlow(Exception):
    """The oracle examined BASE_FIRES fire times: the example is too costly to check."""


def reference_fires(schedule: Cron, after: datetime) -> Iterator[Fire]:
    calendar = schedule.calendar_def
    assert calendar is not None
    if schedule.business_day is not None:
        return _business_day_fires(schedule, calendar, schedule.business_day, after)
    return _holiday_fires(schedule, calendar, after)


def _capped(fires: Iterator[Fire]) -> Iterator[Fire]:
    for n, fire in enumerate(fires):
        if n >= BASE_FIRES:
            raise TooSlow
        yield fire


def _midnight(day: date, tz: str) -> datetime:
    return datetime.combine(day, time(0), cron.zone(tz)).astimezone(UTC)


def _holiday_fires(schedule: Cron, calendar: Calendar, after: datetime) -> Iterator[Fire]:
    zone = cron.zone(schedule.tz)
    policy = schedule.on_holiday
    start = after.astimezone(UTC)
    begin = start
    if policy is HolidayPolicy.NEXT:
        before = calendar.previous_business_day(start.astimezone(zone).date())
        if before is not None:
            # Less a microsecond: the one fix made here. The search it stood for began at
            # that midnight exclusive, and lost a day off's midnight slot (issue 23's tests).
            midnight = _midnight(before + timedelta(days=1), schedule.tz)
            begin = min(start, midnight - timedelta(microseconds=1))
    pending: list[tuple[datetime, int, Fire]] = []
    last: datetime | None = None

    def ready(bound: datetime | None) -> Iterator[Fire]:
        nonlocal last
        while pending and (bound is None or pending[0][0] < bound):
            fire = heapq.heappop(pending)[2]
            if fire.at <= start:
                continue
            if not fire.skipped:
                if last is not None and fire.at <= last:
                    continue
                last = fire.at
            yield fire

    base = _capped(
        cron.fires(schedule.expr, schedule.tz, begin, schedule.dst_gap, schedule.dst_repeat)
    )
    for seq, fire in enumerate(base):
        moved = fire if fire.skipped else _on_holiday(schedule, calendar, fire, zone)
        heapq.heappush(pending, (moved.at, seq, moved))
        if policy is HolidayPolicy.PREVIOUS:
            day = fire.at.astimezone(zone).date()
            floor = day if calendar.is_business_day(day) else calendar.previous_business_day(day)
            bound = _midnight(floor, schedule.tz) if floor is not None else fire.at
        else:
            bound = fire.at + timedelta(microseconds=1)
        yield from ready(bound)
    yield from ready(None)


def _on_holiday(schedule: Cron, calendar: Calendar, fire: Fire, zone: Any) -> Fire:
    local = fire.at.astimezone(zone)
    reason = calendar.closed(local.date())
    if reason is None:
        return fire
    day = f"{local.date().isoformat()} is {reason}"
    if schedule.on_holiday is HolidayPolicy.SKIP:
        return Fire(fire.at, f"skipped: {day}", skipped=True)
    forward = schedule.on_holiday is HolidayPolicy.NEXT
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


def _business_day_fires(
    schedule: Cron, calendar: Calendar, n: int, after: datetime
) -> Iterator[Fire]:
    parts = schedule.expr.split()
    parts[-3], parts[-1] = "*", "*"
    daily = " ".join(parts)
    zone = cron.zone(schedule.tz)
    start = after.astimezone(UTC)
    local = start.astimezone(zone)
    year, month = local.year, local.month
    months = 0
    while year <= LATEST.year:
        months += 1
        if months > BASE_FIRES // 100:
            raise TooSlow
        day = calendar.nth_business_day(year, month, n)
        if day is not None and _midnight(day + timedelta(days=1), schedule.tz) > start:
            lower = max(start, _midnight(day, schedule.tz) - timedelta(microseconds=1))
            for fire in cron.fires(
                daily, schedule.tz, lower, schedule.dst_gap, schedule.dst_repeat
            ):
                if fire.at.astimezone(zone).date() != day:
                    break
                yield fire
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
