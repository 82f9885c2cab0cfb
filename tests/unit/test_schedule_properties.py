"""Properties of cron and interval schedules over random expressions, zones and instants.

Cron expressions come from a small grammar that also yields, for each field, the set of
values it allows, so every fire time is checked against an independent matcher (not
against cronsim). Start instants cluster around the DST transitions of the zone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from itertools import islice
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tickwork import cron
from tickwork.errors import InvalidCron
from tickwork.schedule import Cron, Interval

ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # DST moves the clock by 30 minutes
    "Pacific/Chatham",  # +12:45 / +13:45
    "America/St_Johns",  # -03:30 / -02:30
    "Asia/Kathmandu",  # +05:45, no DST
)
FIRES = 6
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")

Field = tuple[str, frozenset[int]]


@st.composite
def field(draw: st.DrawFn, lo: int, hi: int, names: tuple[str, ...] = ()) -> Field:
    def show(v: int) -> str:
        return names[v - lo] if bool(names) and draw(st.booleans()) else str(v)

    values = st.integers(lo, hi)
    kind = draw(st.sampled_from(["every", "step", "one", "span", "span-step", "list"]))
    if kind == "every":
        return "*", frozenset(range(lo, hi + 1))
    if kind == "step":
        n = draw(st.integers(1, hi - lo + 1))
        return f"*/{n}", frozenset(range(lo, hi + 1, n))
    if kind == "one":
        v = draw(values)
        return show(v), frozenset({v})
    if kind in ("span", "span-step"):
        a, b = sorted((draw(values), draw(values)))
        if kind == "span":
            return f"{show(a)}-{show(b)}", frozenset(range(a, b + 1))
        n = draw(st.integers(1, hi - lo + 1))
        return f"{a}-{b}/{n}", frozenset(range(a, b + 1, n))
    chosen = draw(st.lists(values, min_size=2, max_size=4, unique=True))
    return ",".join(show(v) for v in chosen), frozenset(chosen)


@dataclass(frozen=True)
class Expr:
    text: str
    seconds: Field | None  # None: a 5-field expression (second 0)
    minute: Field
    hour: Field
    dom: Field
    month: Field
    dow: Field

    @property
    def fixed_wall_time(self) -> bool:
        """Debian cron's wall-clock reading applies (5 fields, minute and hour not '*...')."""
        return (
            self.seconds is None
            and not self.minute[0].startswith("*")
            and not self.hour[0].startswith("*")
        )

    def matches(self, local: datetime) -> bool:
        second_ok = local.second in self.seconds[1] if self.seconds else local.second == 0
        dom_ok = local.day in self.dom[1]
        dow_ok = (local.weekday() + 1) % 7 in self.dow[1]  # cron: Sunday is 0
        # Debian cron: if either day field starts with '*', both must match; else either.
        both = self.dom[0].startswith("*") or self.dow[0].startswith("*")
        return (
            second_ok
            and local.minute in self.minute[1]
            and local.hour in self.hour[1]
            and local.month in self.month[1]
            and ((dom_ok and dow_ok) if both else (dom_ok or dow_ok))
        )


EVERY_DAY: Field = ("*", frozenset(range(1, 32)))
EVERY_MONTH: Field = ("*", frozenset(range(1, 13)))


@st.composite
def expressions(draw: st.DrawFn, *, six_fields: bool = True, any_day: bool = True) -> Expr:
    """Random expressions; ``any_day=False`` keeps day-of-month and month ``*``."""
    seconds = draw(st.none() | field(0, 59)) if six_fields else None
    parts = (
        draw(field(0, 59)),
        draw(field(0, 23)),
        draw(field(1, 31)) if any_day else EVERY_DAY,
        draw(field(1, 12, MONTHS)) if any_day else EVERY_MONTH,
        draw(field(0, 6, DAYS)),
    )
    texts = [p[0] for p in parts]
    if seconds is not None:
        texts.insert(0, seconds[0])
    return Expr(" ".join(texts), seconds, *parts)


@cache
def transitions(tz: str) -> tuple[datetime, ...]:
    """The instants (to the minute) in 2026 and 2027 where the zone's offset changes."""
    zone = ZoneInfo(tz)
    found: list[datetime] = []
    t = datetime(2026, 1, 1, tzinfo=UTC)
    while t.year < 2028:
        nxt = t + timedelta(hours=1)
        if t.astimezone(zone).utcoffset() != nxt.astimezone(zone).utcoffset():
            lo, hi = t, nxt
            while hi - lo > timedelta(minutes=1):
                mid = lo + (hi - lo) / 2
                if mid.astimezone(zone).utcoffset() == lo.astimezone(zone).utcoffset():
                    lo = mid
                else:
                    hi = mid
            found.append(hi)
        t = nxt
    return tuple(found)


def is_transition(zone: ZoneInfo, t: datetime) -> bool:
    before = (t - timedelta(microseconds=1)).astimezone(zone).utcoffset()
    return before != t.astimezone(zone).utcoffset()


@st.composite
def zone_and_start(draw: st.DrawFn) -> tuple[str, datetime]:
    tz = draw(st.sampled_from(ZONES))
    near = transitions(tz)
    if bool(near) and draw(st.booleans()):
        start = draw(st.sampled_from(near)) + timedelta(minutes=draw(st.integers(-240, 240)))
    else:
        start = draw(
            st.datetimes(datetime(2026, 1, 1), datetime(2027, 12, 31), timezones=st.just(UTC))
        )
    return tz, start


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(expr=expressions(), where=zone_and_start())
def test_cron_fire_times_strictly_increase_and_each_matches_the_expression(
    expr: Expr, where: tuple[str, datetime]
) -> None:
    tz, start = where
    try:
        schedule = Cron(expr.text, tz)
    except InvalidCron:
        assume(False)  # a day-of-month that never occurs in the months (e.g. 31 in FEB)
        raise
    zone = ZoneInfo(tz)
    fires = list(islice(cron.iterate(schedule.expr, tz, start), FIRES))
    assert len(fires) == FIRES
    previous = start
    for fire in fires:
        assert fire > previous
        assert schedule.next_after(previous) == fire
        local = fire.astimezone(zone)
        # The one allowed exception: a wall-clock time in a spring-forward gap fires right
        # after the gap (at the transition itself).
        assert expr.matches(local) or (expr.fixed_wall_time and is_transition(zone, fire)), (
            f"{expr.text!r} in {tz} fired at {local.isoformat()}"
        )
        previous = fire


@settings(deadline=None, max_examples=100)
@given(
    expr=expressions(six_fields=False, any_day=False),
    start=st.datetimes(datetime(2026, 1, 1), datetime(2027, 12, 31), timezones=st.just(UTC)),
)
def test_cron_in_utc_skips_no_matching_minute(expr: Expr, start: datetime) -> None:
    # Day-of-month and month stay '*', so two fire times are at most a week apart.
    first, second = islice(cron.iterate(Cron(expr.text).expr, "UTC", start), 2)
    t = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while t < second:
        assert expr.matches(t) == (t == first), t.isoformat()
        t += timedelta(minutes=1)
    assert expr.matches(second)


@settings(deadline=None, max_examples=150)
@given(
    expr=expressions(six_fields=False, any_day=False).filter(lambda e: not e.fixed_wall_time),
    where=zone_and_start(),
)
def test_elapsed_time_cron_skips_no_matching_minute_across_dst(
    expr: Expr, where: tuple[str, datetime]
) -> None:
    # Elapsed time: an instant fires exactly when its local wall-clock time matches, so
    # both passes of a repeated hour run and a missing hour never does.
    tz, start = where
    zone = ZoneInfo(tz)
    first, second = islice(cron.iterate(Cron(expr.text, tz).expr, tz, start), 2)
    t = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while t < second:
        assert expr.matches(t.astimezone(zone)) == (t == first), t.isoformat()
        t += timedelta(minutes=1)
    assert expr.matches(second.astimezone(zone))


@settings(deadline=None)
@given(
    every=st.timedeltas(timedelta(seconds=1), timedelta(days=30)),
    anchor=st.datetimes(
        datetime(2020, 1, 1), datetime(2030, 1, 1), timezones=st.sampled_from(ZONES).map(ZoneInfo)
    ),
    now=st.datetimes(datetime(2020, 1, 1), datetime(2030, 1, 1), timezones=st.just(UTC)),
)
def test_interval_slots_are_exactly_every_apart_on_the_anchor_grid(
    every: timedelta, anchor: datetime, now: datetime
) -> None:
    schedule = Interval(every, anchor=anchor)
    slot = schedule.first_slot(now)
    assert slot > now
    assert (slot - anchor) % every == timedelta(0)
    if anchor > now:
        # Compared in UTC: PEP 495 makes == between zones False for an ambiguous (fold) time.
        assert slot == anchor.astimezone(UTC)
    else:
        assert slot - every <= now  # no slot between now and the first one was skipped
    for _ in range(5):
        nxt = schedule.next_after(slot)
        assert nxt is not None
        assert nxt - slot == every
        assert nxt.tzinfo is UTC
        slot = nxt
