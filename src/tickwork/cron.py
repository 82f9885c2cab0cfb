"""Cron expressions: validation with precise messages, fire times, plain English.

The arithmetic is cronsim's, which follows Debian cron across DST changes:

- a 5-field expression at a fixed time (minute and hour both fixed) is read as wall-clock
  time: in the spring-forward gap it fires once, right after the gap; in the fall-back hour
  it fires once, on the first pass;
- an expression whose minute or hour is a wildcard or step (``*/15 * * * *``) runs on
  elapsed time, so it fires through both passes of the repeated hour and skips the gap;
- a 6-field expression (``SEC MIN HOUR DOM MON DOW``, seconds first) always runs on elapsed
  time: six fields are not Debian cron, and get none of its quirks.

That reading is the default DST policy. A schedule may choose another (:func:`fires`):

- ``dst_gap``: what a slot whose wall time falls in a spring-forward gap does.
  ``run-after`` runs it once, at the first instant after the gap (02:30 in Berlin on
  2026-03-29 runs at 03:00 CEST); ``skip`` gives it no run. Default: ``run-after`` for a
  wall-clock expression, ``skip`` for an elapsed-time one (its gap times do not exist).
- ``dst_repeat``: what a slot whose wall time falls in a fall-back repeated hour does.
  ``once`` runs it at the first pass only; ``twice`` runs it in both passes (02:30 CEST,
  then 02:30 CET an hour later). Default: ``once`` for a wall-clock expression, ``twice``
  for an elapsed-time one.

Fire times end at the calendar's end (:data:`tickwork.clock.LATEST`): none falls later.
"""

from __future__ import annotations

import copy
import heapq
from calendar import monthrange
from collections.abc import Iterator
from datetime import MAXYEAR, UTC, date, datetime, timedelta, timezone
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from cronsim.cronsim import Field

from tickwork.clock import LATEST
from tickwork.errors import InvalidCron, InvalidTimezone

if TYPE_CHECKING:
    from tickwork.budget import Budget

NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIVE_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
SEPARATORS = frozenset(" \t\n\r\x0b\x0c")
"""What may separate fields: ASCII blanks (crontab(5) names spaces and tabs; a line end
comes with text pasted from a file). The other characters ``str.split`` takes for blanks
(``\\x1c`` to ``\\x1f``, NEL, no-break and ideographic spaces) are refused, not read as
separators: a field must not be split by a character nobody sees."""
SIX_FIELDS = ("second", *FIVE_FIELDS)


def normalize(expr: str) -> str:
    """The expression with nicknames expanded and blanks collapsed, or InvalidCron."""
    odd = next((ch for ch in expr if ch.isspace() and ch not in SEPARATORS), None)
    if odd is not None:
        raise InvalidCron(
            expr, f"it holds the character U+{ord(odd):04X}: separate fields by spaces or tabs"
        )
    text = " ".join(expr.split())
    if not text:
        raise InvalidCron(expr, "the expression is empty")
    if text.startswith("@"):
        try:
            return NICKNAMES[text.lower()]
        except KeyError:
            known = ", ".join(sorted(NICKNAMES))
            raise InvalidCron(expr, f"unknown nickname {text!r} (known: {known})") from None
    parts = text.split(" ")
    if len(parts) not in (5, 6):
        raise InvalidCron(
            expr,
            f"expected 5 fields (minute hour day-of-month month day-of-week) or 6 with "
            f"seconds first, got {len(parts)}",
        )
    names = FIVE_FIELDS if len(parts) == 5 else SIX_FIELDS
    written = parts
    parts = [*parts[:-1], _sunday_ends_at_seven(parts[-1])]
    first_field = Field.MINUTE if len(parts) == 5 else Field.SECOND
    for offset, (name, value) in enumerate(zip(names, written, strict=True)):
        try:
            Field(first_field + offset).parse(parts[offset].upper())
        except (CronSimError, ValueError, IndexError):
            hint = _BACKWARDS_TO_SUNDAY_HINT if _ends_a_range_on_zero(name, value) else ""
            raise InvalidCron(expr, f"bad {name} field {value!r}{hint}") from None
    parts = [
        _one_value_ranges_without_step(value, Field(first_field + offset))
        for offset, value in enumerate(parts)
    ]
    text = " ".join(parts)
    try:
        CronSim(text, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError:
        dom, month = parts[-3], parts[-2]
        raise InvalidCron(expr, f"day-of-month {dom!r} never occurs in month {month!r}") from None
    return text


_BACKWARDS_TO_SUNDAY_HINT = " (a range ending on Sunday ends in 7 or SUN, e.g. 3-7)"


def _ends_a_range_on_zero(name: str, value: str) -> bool:
    return name == "day-of-week" and any(
        term.partition("/")[0].partition("-")[2] == "0" for term in value.split(",")
    )


def _sunday_ends_at_seven(value: str) -> str:
    """A day-of-week field whose ranges end in Sunday, as Vixie (and Debian) cron read it:
    ``WED-SUN`` is ``WED-7``, Wednesday to Saturday plus Sunday (``wed-sun/2`` is
    ``wed-7/2``: Wednesday, Friday, Sunday).

    Sunday is both 0 and 7 in cron; cronsim spells ``SUN`` as 0 only, so a range ending in
    it would run backwards and be refused. ``SUN-...`` still starts at 0. A numeric range
    ending in 0 (``3-0``) runs backwards in cron too, and stays refused, with a hint.
    """
    terms = []
    for term in value.split(","):
        span, slash, step = term.partition("/")
        first, dash, last = span.partition("-")
        to_sunday = dash and last.upper() == "SUN" and first.upper() not in ("SUN", "0")
        terms.append(f"{first}-7{slash}{step}" if to_sunday else term)
    return ",".join(terms)


def _one_value_ranges_without_step(value: str, field: Field) -> str:
    """``5-5/10`` as ``5``, as cron reads it: cronsim takes a stepped range that holds one
    value for ``5/10``, that is ``5-59/10``. ``3-WED/2`` is one value too. ``value`` has
    passed ``field``'s parse."""
    terms = []
    for term in value.split(","):
        span, slash, _step = term.partition("/")
        first, dash, last = span.partition("-")
        one_value = slash and dash and field.int(first.upper()) == field.int(last.upper())
        terms.append(first if one_value else term)
    return ",".join(terms)


@lru_cache(maxsize=512)
def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``, or InvalidTimezone."""
    if not name or name != name.strip() or ".." in name or name.startswith("/"):
        raise InvalidTimezone(name)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidTimezone(name) from None


class DstGap(StrEnum):
    RUN_AFTER = "run-after"  # once, at the first instant after the gap
    SKIP = "skip"  # no run for a slot whose wall time does not exist


class DstRepeat(StrEnum):
    ONCE = "once"  # the first pass of a repeated wall time only
    TWICE = "twice"  # both passes


def default_gap(expr: str) -> DstGap:
    """Debian cron's gap rule for ``expr`` (normalized): what a schedule without a policy
    does."""
    return DstGap.RUN_AFTER if _reads_wall_clock(expr) else DstGap.SKIP


def default_repeat(expr: str) -> DstRepeat:
    """Debian cron's repeat rule for ``expr`` (normalized)."""
    return DstRepeat.ONCE if _reads_wall_clock(expr) else DstRepeat.TWICE


def next_after(expr: str, tz: str, after: datetime) -> datetime | None:
    """The first fire time strictly after ``after``, in UTC; None past the calendar's end.

    ``expr`` must already be normalized. Iterates past results that are not later than
    ``after``: in the fall-back hour a wall-clock job whose first pass is behind us fires
    on the next day, never "again" in the repeated hour.
    """
    for fire in iterate(expr, tz, after):
        return fire
    return None


def iterate(
    expr: str, tz: str, after: datetime, *, until: datetime | None = None
) -> Iterator[datetime]:
    """Fire times strictly after ``after``, in UTC, ascending, up to ``until`` (inclusive)
    or else the calendar's end."""
    start = after.astimezone(UTC)
    end = LATEST if until is None else min(until, LATEST)
    if start >= end:
        return
    fires: Iterator[datetime]
    if _reads_wall_clock(expr):
        fires = (fire.astimezone(UTC) for fire in CronSim(expr, start.astimezone(zone(tz))))
    else:
        fires = _elapsed_fires(expr, tz, start, end)
    last = start
    try:
        for fire_utc in fires:
            if fire_utc > end:
                return
            if fire_utc > last:
                last = fire_utc
                yield fire_utc
    except OverflowError:  # cronsim stepped past year 9999, beyond LATEST anyway
        return


class Fire(NamedTuple):
    """One slot as :func:`fires` reports it: ``at`` (UTC) is when it runs, or for a
    ``skipped`` slot when it would have; ``note`` says what a DST change does to it."""

    at: datetime
    note: str | None = None
    skipped: bool = False


class Transition(NamedTuple):
    """An instant at which the zone's UTC offset changes: a gap when ``shift`` is positive
    (spring forward), a repeated span when negative (fall back)."""

    at: datetime
    before: timedelta
    after: timedelta

    @property
    def shift(self) -> timedelta:
        return self.after - self.before


MAX_SHIFT = timedelta(hours=3)
"""More than any offset change in the tz database (the largest are 2 h): how far before a
start :func:`fires` begins for ``dst_repeat`` twice on a wall-clock expression, so a second
pass whose first pass lies before the start is found."""


LOCAL_SCAN = timedelta(days=2)
"""A span of time at most this long is scanned for offset changes where it lies, not
through its year's (cached) scan: a search that goes day by day over rare days would
otherwise scan a new year, some 1,500 samples, for each day it looks at. A span within
one sample's step with one offset at both ends has none (the year's scan would find none
there either): the check each fire time of a DST policy makes, in two samples."""


def transitions(tz: str, start: datetime, end: datetime) -> Iterator[Transition]:
    """The zone's offset changes in ``(start, end]``, ascending."""
    tzinfo = zone(tz)
    end = min(end, _END_OF_SCAN)
    span = end - start
    if (
        span <= _SCAN_STEP
        and start.astimezone(tzinfo).utcoffset() == end.astimezone(tzinfo).utcoffset()
    ):
        return  # no change within a sample's step: the scan would find none either
    if _SCAN_STEP < span <= LOCAL_SCAN:
        found: Iterator[datetime] = iter(_changes_between(tz, start, end))
    else:
        found = (
            at
            for year in range(start.year, min(end.year, MAXYEAR - 1) + 1)
            for at in _offset_changes(tz, year)
            if start < at <= end
        )
    for at in found:
        before = (at - timedelta(microseconds=1)).astimezone(tzinfo).utcoffset()
        after = at.astimezone(tzinfo).utcoffset()
        assert before is not None
        assert after is not None
        yield Transition(at, before, after)


def fires(
    expr: str,
    tz: str,
    after: datetime,
    gap: DstGap | None = None,
    repeat: DstRepeat | None = None,
    *,
    until: datetime | None = None,
    budget: Budget | None = None,
) -> Iterator[Fire]:
    """The slots strictly after ``after`` (and not after ``until``), ascending, under a DST
    policy (None: Debian cron's, see the module docstring), each slot a DST change touches
    with its ``note``, and the slots the policy skips as ``skipped`` entries. Each fire
    time examined is a step of ``budget``, which raises :class:`tickwork.budget.Exhausted`
    when spent.

    Worked example, ``30 2 * * *`` in Europe/Berlin: on 2026-03-29 02:30 does not exist;
    ``run-after`` fires at 03:00 CEST (01:00 UTC), ``skip`` reports a skipped slot there.
    On 2026-10-25 02:30 happens twice; ``once`` fires at 02:30 CEST (00:30 UTC), ``twice``
    also at 02:30 CET (01:30 UTC).
    """
    wall = _reads_wall_clock(expr)
    gap = gap or default_gap(expr)
    repeat = repeat or default_repeat(expr)
    start = after.astimezone(UTC)
    # A second pass whose first pass lies before the start is found from the first pass.
    lookback = MAX_SHIFT if wall and repeat is DstRepeat.TWICE else timedelta(0)
    begin = max(start - lookback, _EARLIEST_SCAN)
    pending: list[tuple[datetime, int, Fire]] = []
    seq = 0
    last_firing: datetime | None = None
    previous = begin

    def push(fire: Fire) -> None:
        nonlocal seq
        heapq.heappush(pending, (fire.at, seq, fire))
        seq += 1

    def ready(bound: datetime | None) -> Iterator[Fire]:
        nonlocal last_firing
        while pending and (bound is None or pending[0][0] <= bound):
            fire = heapq.heappop(pending)[2]
            if fire.at <= start or (until is not None and fire.at > until):
                continue
            if not fire.skipped:
                if last_firing is not None and fire.at <= last_firing:
                    continue  # two slots met at one instant (a gap's end): one run
                last_firing = fire.at
            yield fire

    for at in iterate(expr, tz, begin, until=until):
        if budget is not None:
            budget.spend()
        for change in transitions(tz, previous, at):
            if change.shift > timedelta(0) and not wall:
                missing = _first_in_gap(expr, change)
                if missing is not None:
                    push(_gap_fire(tz, change, missing, gap))
        previous = at
        push(_classify(expr, tz, at, wall, gap=gap, repeat=repeat))
        if wall and repeat is DstRepeat.TWICE:
            fall = _repeat_around(tz, at)
            if fall is not None and fall.at + fall.shift <= at < fall.at:
                second = at - fall.shift
                push(Fire(second, _second_pass_note(tz, second, repeat)))
        yield from ready(at)
    if until is not None and not wall:
        # The gaps between the last fire time and ``until``: iterate stopped short of them.
        for change in transitions(tz, previous, until):
            if change.shift > timedelta(0):
                missing = _first_in_gap(expr, change)
                if missing is not None:
                    push(_gap_fire(tz, change, missing, gap))
    yield from ready(None)


def _classify(
    expr: str, tz: str, at: datetime, wall: bool, *, gap: DstGap, repeat: DstRepeat
) -> Fire:
    """The base fire ``at`` of :func:`iterate` as the policy has it."""
    if wall:
        change = _change_at(tz, at)
        if change is not None and change.shift > timedelta(0) and not _matches(expr, tz, at):
            missing = _first_in_gap(expr, change)
            if missing is not None:
                return _gap_fire(tz, change, missing, gap)
    change = _repeat_around(tz, at)
    if change is not None:
        span = -change.shift
        local = _wall(tz, at)
        if change.at - span <= at < change.at:
            what = (
                "runs again at the second pass"
                if repeat is DstRepeat.TWICE
                else "runs at this first pass only"
            )
            return Fire(
                at,
                f"{local:%H:%M} happens twice on {local:%Y-%m-%d} (DST ends): {what} "
                f"(--dst-repeat {repeat})",
            )
        if change.at <= at < change.at + span:
            note = _second_pass_note(tz, at, repeat)
            return Fire(at, note, skipped=repeat is DstRepeat.ONCE)
    return Fire(at)


def _second_pass_note(tz: str, at: datetime, repeat: DstRepeat) -> str:
    local = _wall(tz, at)
    what = "runs again" if repeat is DstRepeat.TWICE else "skipped"
    return (
        f"{local:%H:%M} {local.tzname()} is the second pass of a repeated hour on "
        f"{local:%Y-%m-%d} (DST ends): {what} (--dst-repeat {repeat})"
    )


def _gap_fire(tz: str, change: Transition, missing: datetime, gap: DstGap) -> Fire:
    """The fire (or skipped slot) at the end of a gap, for the first missing wall time."""
    local = _wall(tz, change.at)
    lost = f"{missing:%H:%M} does not exist on {missing:%Y-%m-%d} (DST starts)"
    if gap is DstGap.RUN_AFTER:
        note = f"{lost}: runs right after the gap, at {local:%H:%M} {local.tzname()}"
        return Fire(change.at, f"{note} (--dst-gap run-after)")
    return Fire(change.at, f"{lost}: skipped (--dst-gap skip)", skipped=True)


def _first_in_gap(expr: str, change: Transition) -> datetime | None:
    """The first wall time (naive) in the gap of ``change`` at which ``expr`` fires, or
    None when it fires at none of them."""
    old = timezone(change.before)
    gap_start = change.at.astimezone(old).replace(tzinfo=None)
    gap_end = gap_start + change.shift
    first = next(iter(_fixed_offset_sim(expr, _naive_utc(gap_start) - timedelta(microseconds=1))))
    found = first.replace(tzinfo=None)
    return found if found < gap_end else None


def _matches(expr: str, tz: str, at: datetime) -> bool:
    """Whether ``expr`` names the wall time ``at`` shows in ``tz``."""
    local = _naive_utc(_wall(tz, at).replace(tzinfo=None))
    sim = _fixed_offset_sim(expr, local - timedelta(microseconds=1))
    return bool(next(iter(sim)) == local)


def _naive_utc(wall: datetime) -> datetime:
    return wall.replace(tzinfo=UTC)


def _wall(tz: str, at: datetime) -> datetime:
    return at.astimezone(zone(tz))


def _change_at(tz: str, at: datetime) -> Transition | None:
    return next(transitions(tz, at - timedelta(microseconds=1), at), None)


def _repeat_around(tz: str, at: datetime) -> Transition | None:
    """The fall-back change whose repeated span (both passes) holds ``at``, if any."""
    for change in transitions(tz, at - MAX_SHIFT, at + MAX_SHIFT):
        span = -change.shift
        if span > timedelta(0) and change.at - span <= at < change.at + span:
            return change
    return None


def _reads_wall_clock(expr: str) -> bool:
    """Debian cron's wall-clock reading applies: 5 fields, minute and hour not wildcards."""
    parts = expr.split()
    return len(parts) == 5 and not parts[0].startswith("*") and not parts[1].startswith("*")


def _elapsed_fires(expr: str, tz: str, start: datetime, until: datetime) -> Iterator[datetime]:
    """Fire times on elapsed time: cronsim run on one fixed UTC offset at a time, from one
    offset change of the zone to the next.

    Hazard: cronsim on a zone-aware time moves by wall-clock ``replace()``, which in a
    repeated hour that does not start on the hour (Pacific/Chatham falls back from 03:45 to
    02:45) jumps back before the change and cycles forever. A fixed offset has no repeated
    or missing times, so nothing can jump.
    """
    tzinfo = zone(tz)
    begin, after = start, start
    while begin < _END_OF_SCAN and begin <= until:
        end = _next_offset_change(tz, begin)
        offset = begin.astimezone(tzinfo).utcoffset()
        assert offset is not None
        for fire in _fixed_offset_sim(expr, after.astimezone(timezone(offset))):
            fire_utc = fire.astimezone(UTC)
            if fire_utc >= end:
                break
            yield fire_utc
        else:
            return  # cronsim found no fire within 50 years
        # cronsim drops the microseconds and starts one second later: from `end` itself.
        begin, after = end, end - timedelta(microseconds=1)


@lru_cache(maxsize=1024)
def _prototype(expr: str) -> CronSim:
    return CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC))


def _fixed_offset_sim(expr: str, start: datetime) -> CronSim:
    """``CronSim(expr, start)`` for a fixed-offset ``start``, without parsing ``expr`` again.

    The trigger computes two fire times per due job; parsing was half of that. Hazard: this
    copies a parsed prototype and sets cronsim's iteration state (``dt``,
    ``skip_initial_tick``), which is exactly what its constructor does for a fixed-offset
    zone on an elapsed-time expression (no Debian-cron fix-up applies there);
    ``test_cron`` pins the equivalence.
    """
    sim = copy.copy(_prototype(expr))
    sim.dt = start.replace(microsecond=0)
    sim.skip_initial_tick = False
    sim.fixup_tz = None
    return sim


OFFSET_SCAN_STEP = 6 * 3600
"""Seconds between the samples that find a zone's offset changes (none is that short)."""
_SCAN_STEP = timedelta(seconds=OFFSET_SCAN_STEP)


def _next_offset_change(tz: str, t: datetime) -> datetime:
    """The first instant after ``t`` at which the zone's UTC offset changes, or a year
    boundary at most two years on when there is none (a harmless extra segment); at most
    :data:`_END_OF_SCAN`."""
    for year in range(t.year, min(t.year + 2, MAXYEAR + 1)):
        for change in _offset_changes(tz, year):
            if change > t:
                return change
    return datetime(t.year + 2, 1, 1, tzinfo=UTC) if t.year + 2 <= MAXYEAR else _END_OF_SCAN


@lru_cache(maxsize=1024)
def _offset_changes(tz: str, year: int) -> tuple[datetime, ...]:
    """The instants of ``year`` (UTC) at which the zone's UTC offset changes, ascending."""
    start = datetime(year, 1, 1, tzinfo=UTC)
    stop = datetime(year + 1, 1, 1, tzinfo=UTC) if year < MAXYEAR else _END_OF_SCAN
    return _scan(tz, start, int((stop - start).total_seconds()))


def _changes_between(tz: str, start: datetime, end: datetime) -> list[datetime]:
    """The offset changes in ``(start, end]``, found as the year's scan finds them."""
    base = start.replace(microsecond=0)
    span = int((end - base).total_seconds()) + 1
    return [at for at in _scan(tz, base, span) if start < at <= end]


def _scan(tz: str, start: datetime, span: int) -> tuple[datetime, ...]:
    """The instants in the ``span`` seconds from ``start`` at which the zone's offset
    changes: samples OFFSET_SCAN_STEP apart, each change bisected to its second."""
    tzinfo = zone(tz)

    def offset(seconds: int) -> timedelta | None:
        return (start + timedelta(seconds=seconds)).astimezone(tzinfo).utcoffset()

    changes: list[datetime] = []
    for sample in range(0, span, OFFSET_SCAN_STEP):
        lo, hi = sample, min(sample + OFFSET_SCAN_STEP, span)
        if offset(lo) == offset(hi):
            continue
        while hi - lo > 1:  # offsets change on whole seconds
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if offset(mid) == offset(lo) else (lo, mid)
        changes.append(start + timedelta(seconds=hi))
    return tuple(changes)


_END_OF_SCAN = LATEST + timedelta(days=1)
_EARLIEST_SCAN = datetime(1, 1, 2, tzinfo=UTC)
"""Where the search for offset changes ends: past LATEST, so a fire at LATEST itself is
found, and a day short of datetime's end, so every zone's offset can be read there."""


# -- the days an expression names ---------------------------------------------------------
#
# Which days of a month the day fields (day-of-month, month, day-of-week: ``L``, ``LW``,
# ``5L``, ``MON#2`` included) name depends on the month, its length and the weekday it starts
# on, and on nothing else: there are at most 12 x 2 x 7 arrangements, every one of which
# the 400-year Gregorian cycle holds, and the 28 years 2001-2028 hold one of each.

_ARRANGED_IN: dict[tuple[int, int, int], int] = {}
for _year in range(2001, 2029):
    for _month in range(1, 13):
        _first, _length = monthrange(_year, _month)
        _ARRANGED_IN.setdefault((_month, _length, _first), _year)
"""A year in which a month has a given (month, length, first weekday) arrangement."""


def arrangements(month: int) -> list[tuple[int, int]]:
    """Every (length, first weekday) a month has in some year (Monday is weekday 0)."""
    return [(length, first) for (m, length, first) in _ARRANGED_IN if m == month]


def months_named(expr: str) -> tuple[int, ...]:
    """The months (1-12) a normalized expression names, ascending."""
    return tuple(sorted(_prototype(expr).months))


def days_named(expr: str, year: int, month: int) -> tuple[int, ...]:
    """The days of ``month`` of ``year`` the expression's day fields name, ascending."""
    first, length = monthrange(year, month)
    return days_named_in(expr, month, length, first)


@lru_cache(maxsize=8192)
def days_named_in(expr: str, month: int, length: int, first: int) -> tuple[int, ...]:
    """The days the expression's day fields name in ``month`` when it has ``length`` days
    and starts on weekday ``first`` (Monday 0); empty for a month the expression does not
    name."""
    sim = _prototype(expr)
    if month not in sim.months:
        return ()
    year = _ARRANGED_IN[(month, length, first)]
    return tuple(d for d in range(1, length + 1) if sim.match_day(date(year, month, d)))


def explain(expr: str) -> str:
    """One line of plain English, e.g. 'At 09:00 on every day-of-week from Monday ...'."""
    return CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC)).explain()
