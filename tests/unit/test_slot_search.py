"""The search for a schedule's slots is bounded in work (issue 23): a rule that cannot fire
is refused at once, naming the rule; a rule that fires rarely is still found; every search
(next slot, upcoming slots, notes, the slot before) stops within its budget.

The day-by-day search is held to the slot-by-slot search it replaced
(:mod:`slot_reference`) over random rules whose slots come soon.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from itertools import islice, takewhile
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st
from tests.unit.slot_reference import TooSlow, reference_fires

from tickwork import cron
from tickwork.budget import SEARCH_BUDGET, Budget
from tickwork.calendar import Calendar, make_calendar
from tickwork.errors import InvalidSchedule, NeverFires, ValidationError
from tickwork.explain import slot_before
from tickwork.job import DEFAULT_MISFIRE_GRACE, Job, JobState, MisfirePolicy, OverlapPolicy
from tickwork.retry import RetryPolicy
from tickwork.schedule import Cron

NOW = datetime(2026, 5, 1, tzinfo=UTC)  # a Friday
WEEKDAYS = make_calendar("x")  # Saturday and Sunday off, no holidays
DE = make_calendar("de", country="DE")

pytestmark = pytest.mark.timeout(20)  # today's search ran for minutes to hours


def rule(expr: str, calendar: Calendar = WEEKDAYS, tz: str = "UTC", **rules: Any) -> Cron:
    return Cron(expr, tz, calendar=calendar.name, calendar_def=calendar, **rules)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def job(schedule: Cron) -> Job:
    return Job(
        id=1,
        tenant="default",
        name="report",
        task="shell",
        args={},
        schedule=schedule,
        state=JobState.ACTIVE,
        next_run_at=None,
        queue="default",
        priority=0,
        retry=RetryPolicy(),
        timeout=None,
        misfire=MisfirePolicy.ONCE,
        misfire_grace=DEFAULT_MISFIRE_GRACE,
        overlap=OverlapPolicy.ALLOW,
        idempotency_key=None,
        created_at=NOW,
        updated_at=NOW,
    )


# -- a rule that cannot fire is refused, naming it ----------------------------------------


NEVER = [
    # The three examples.
    (
        rule("0 9 * 2 *", business_day=23),
        "cron '0 9 * 2 *' with calendar 'x' (the 23rd business day of the month) never fires: "
        "February has at most 21 business days in calendar x (weekend SAT,SUN)",
    ),
    (
        rule("0 9 * * 6"),
        "cron '0 9 * * 6' with calendar 'x' (business days only) never fires: every day it "
        "names is a weekend day in calendar x (SAT,SUN)",
    ),
    (
        rule("* * * * 6"),
        "cron '* * * * 6' with calendar 'x' (business days only) never fires: every day it "
        "names is a weekend day in calendar x (SAT,SUN)",
    ),
    # Six fields, seconds first: Saturday still.
    (rule("* * * * * 6"), "cron '* * * * * 6' with calendar 'x' (business days only) never"),
    (rule("0 9 * * SAT,SUN"), "never fires: every day it names is a weekend day"),
    (rule("0 9 * * 5", make_calendar("gulf", weekend="FRI,SAT")), "weekend day in calendar gulf"),
    (rule("0 9 * * 6L"), "never fires"),  # the last Saturday of the month
    (
        rule("0 9 * 2 *", business_day=-23),
        "cron '0 9 * 2 *' with calendar 'x' (the 23rd last business day of the month) never",
    ),
    (
        rule("0 9 * 2,4 *", business_day=23),
        "never fires: February and April have at most 22 business days",
    ),
    (
        rule("0 9 * 2 *", make_calendar("long", weekend="FRI,SAT,SUN"), business_day=18),
        "never fires: February has at most 17 business days in calendar long (weekend FRI,SAT,SUN)",
    ),
]


@pytest.mark.parametrize(("schedule", "message"), NEVER, ids=[s.expr for s, _ in NEVER])
def test_a_rule_that_cannot_fire_is_refused_naming_the_rule(schedule: Cron, message: str) -> None:
    with pytest.raises(NeverFires, match=re.escape(message)) as caught:
        schedule.first_slot(NOW)
    assert isinstance(caught.value, InvalidSchedule)  # HTTP 400, CLI exit 2
    assert caught.value.field == "schedule"
    assert schedule.next_after(NOW) is None
    assert list(islice(schedule.iterate(NOW), 3)) == []


def test_a_rule_with_a_time_zone_is_named_with_it() -> None:
    schedule = rule("0 9 * * 6", tz="Europe/Berlin")
    with pytest.raises(NeverFires, match=r"^cron '0 9 \* \* 6' in Europe/Berlin with calendar"):
        schedule.first_slot(NOW)


def test_a_rule_whose_only_slot_has_passed_fires_no_more() -> None:
    # Saturday 2 January 2027 is worked: the one day a Saturday rule can fire.
    calendar = make_calendar("x", remove=["2027-01-02"])
    schedule = rule("0 9 * * 6", calendar)
    assert schedule.first_slot(NOW) == at("2027-01-02T09:00")
    assert list(islice(schedule.iterate(NOW), 3)) == [at("2027-01-02T09:00")]
    with pytest.raises(NeverFires, match="never fires after 2027-01-02T09:00:00"):
        schedule.first_slot(at("2027-01-02T09:00"))


def test_a_worked_day_gives_the_business_day_rule_a_month_it_could_not_have() -> None:
    # February 2027 has 20 weekdays; three Saturdays worked make 23 business days.
    calendar = make_calendar("x", remove=["2027-02-06", "2027-02-13", "2027-02-20"])
    schedule = rule("0 9 * 2 *", calendar, business_day=23)
    assert schedule.first_slot(NOW) == at("2027-02-26T09:00")
    assert schedule.next_after(at("2027-02-26T09:00")) is None


# -- a rule that fires rarely is still found -------------------------------------------------


RARE = [
    ("0 9 29 2 *", {}, NOW, "2028-02-29T09:00"),
    ("0 9 29 2 *", {}, at("2028-03-01T00:00"), "2036-02-29T09:00"),  # 2032-02-29: a Sunday
    ("0 9 29 2 *", {}, at("2096-03-01T00:00"), "2104-02-29T09:00"),  # 2100 is no leap year
    ("0 0 * 2 MON#5", {}, at("2072-03-01T00:00"), "2112-02-29T00:00"),  # 40 years apart
    ("0 9 * * *", {"business_day": 23}, NOW, "2026-07-31T09:00"),  # 23 weekdays in July
    ("0 9 * 2 *", {"business_day": 21}, NOW, "2028-02-29T09:00"),  # a leap February
    ("0 9 * 2 *", {"business_day": -21}, NOW, "2028-02-01T09:00"),
    ("* * * * * 6", {"on_holiday": "next-business-day"}, NOW, "2026-05-04T00:00"),
    ("0 9 * * 6", {"on_holiday": "previous-business-day"}, NOW, "2026-05-01T09:00"),
]


@pytest.mark.parametrize(("expr", "rules", "after", "expected"), RARE)
def test_a_rare_rule_is_found(
    expr: str, rules: dict[str, Any], after: datetime, expected: str
) -> None:
    schedule = rule(expr, **rules)
    assert schedule.first_slot(after) == at(expected)
    found = schedule.search(after)
    assert (found.slot, found.exhausted) == (at(expected), False)


def test_a_rare_rule_on_a_calendar_with_holidays_is_found() -> None:
    # The 23rd business day: a 31-day month that starts on Monday to Wednesday and has no
    # holiday on a weekday. March 2027 would, but for Good Friday (26 March).
    schedule = rule("0 9 * * *", DE, business_day=23)
    assert schedule.first_slot(NOW) == at("2026-07-31T09:00")
    assert schedule.next_after(at("2026-07-31T09:00")) == at("2027-12-31T09:00")


def test_past_the_years_a_country_has_holidays_for_its_calendar_keeps_its_weekend() -> None:
    # holidays knows Germany's holidays to 2100; Christmas Day on a weekday is then a
    # business day by the calendar's weekend alone.
    schedule = rule("0 9 25 12 *", DE)
    assert schedule.first_slot(NOW) == at("2102-12-25T09:00")  # 2101-12-25 is a Sunday


def test_dense_slots_moved_off_a_weekend_are_found_without_walking_it() -> None:
    schedule = rule("* * * * * 6", on_holiday="next-business-day")
    budget = Budget()
    monday = at("2026-05-04T00:00")
    assert list(islice(schedule.iterate(NOW, budget=budget), 3)) == [
        monday,
        monday + timedelta(seconds=1),
        monday + timedelta(seconds=2),
    ]
    assert budget.spent < 100  # not Saturday's 86,400 slots


def test_a_day_offs_midnight_slot_moves_when_the_search_starts_on_that_day() -> None:
    # Saturday 00:00 moves to Monday 00:00. Asked on Saturday morning (a calendar edit, a
    # resume, `tickwork next --from`), the search before issue 23 began at Saturday
    # midnight exclusive, lost that slot, and answered the Monday after.
    schedule = rule("0 0 * * 6", on_holiday="next-business-day")
    assert schedule.next_after(at("2026-05-02T10:00")) == at("2026-05-04T00:00")


# -- every search stops within its budget ----------------------------------------------------


def test_a_search_that_runs_out_of_budget_says_so_and_is_refused_at_submit() -> None:
    schedule = rule("0 9 29 2 *")
    # Eight years of Februaries, and two 29ths (2032's a Sunday): eleven steps.
    budget = Budget()
    assert schedule.search(at("2028-03-01T00:00"), budget=budget).slot == at("2036-02-29T09:00")
    assert budget.spent == 11
    found = schedule.search(at("2028-03-01T00:00"), budget=Budget(5))
    assert (found.slot, found.exhausted) == (None, True)
    assert found.reached == date(2032, 2, 1)
    assert schedule.next_after(at("2028-03-01T00:00"), budget=Budget(5)) is None


def test_the_budget_is_one_named_number_of_days_and_slots() -> None:
    assert Budget().left == SEARCH_BUDGET
    budget = Budget(3)
    budget.spend(2)
    assert (budget.spent, budget.left, budget.exhausted) == (2, 1, False)


def test_a_calendar_that_closes_every_day_for_decades_exhausts_the_search() -> None:
    years = SEARCH_BUDGET // 200 + 10  # more weekdays than the budget can examine
    off = [
        (date(2027, 1, 1) + timedelta(days=k)).isoformat()
        for k in range(366 * years)
        if (date(2027, 1, 1) + timedelta(days=k)).weekday() < 5
    ]
    closed = make_calendar("closed", add=off)
    schedule = rule("0 9 * * *", closed)
    assert schedule.first_slot(at("2026-12-30T00:00")) == at("2026-12-30T09:00")
    found = schedule.search(at("2026-12-31T10:00"))
    assert (found.slot, found.exhausted) == (None, True)
    with pytest.raises(NeverFires, match="finds no slot within the search budget") as caught:
        schedule.first_slot(at("2026-12-31T10:00"))
    assert f"{SEARCH_BUDGET:,} days and slots" in str(caught.value)


def test_upcoming_notes_and_the_slot_before_stay_bounded_for_a_rule_that_cannot_fire() -> None:
    schedule = rule("* * * * 6")
    # No day it names can be a business day: there is nothing to walk, not even days off.
    assert list(islice(schedule.fires(NOW, days_off=5), 20)) == []
    assert schedule.note_at(at("2026-05-02T09:00")) == (
        "skipped: 2026-05-02 is a Saturday, a weekend day in calendar x"
    )
    assert slot_before(job(schedule), at("2030-01-01T00:00")) is None


def test_the_slot_before_a_rare_rule_is_found_within_its_windows() -> None:
    schedule = rule("0 9 29 2 *")
    assert slot_before(job(schedule), at("2031-01-01T00:00")) == at("2028-02-29T09:00")


def test_the_year_past_the_calendars_end_is_no_error() -> None:
    late = at("9999-12-20T00:00")
    for schedule in (rule("0 9 * 12 *", business_day=23), rule("0 9 * * *", business_day=-1)):
        following = schedule.next_after(late)
        assert following is None or following > late
        with pytest.raises(ValidationError):
            schedule.first_slot(at("9999-12-31T12:00"))


# -- the day-by-day search gives the slot-by-slot search's answers ---------------------------

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe")
SECONDS = ("0", "30", "*/20", "0,45")
MINUTES = ("0", "30", "*/15", "5,35", "*", "0-10/5")
HOURS = ("9", "2", "1-3", "*/6", "*", "0,12", "23")
DOMS = ("*", "1", "15", "29", "31", "L", "LW", "1-7", "24-31")
MONTHS = ("*", "2", "3", "1-6", "10,11", "12")
DOWS = ("*", "1-5", "6", "0", "6,0", "MON", "FRI", "SUN#1", "5L")


@st.composite
def expressions(draw: st.DrawFn) -> str:
    fields = [
        draw(st.sampled_from(MINUTES)),
        draw(st.sampled_from(HOURS)),
        draw(st.sampled_from(DOMS)),
        draw(st.sampled_from(MONTHS)),
        draw(st.sampled_from(DOWS)),
    ]
    if draw(st.booleans()):
        fields.insert(0, draw(st.sampled_from(SECONDS)))
    return " ".join(fields)


@st.composite
def calendars(draw: st.DrawFn) -> Calendar:
    weekend = draw(st.sets(st.integers(0, 6), max_size=6))
    near = st.dates(date(2026, 1, 1), date(2028, 12, 31)).map(date.isoformat)
    added = draw(st.lists(near, max_size=12, unique=True))
    removed = draw(st.lists(near.filter(lambda d: d not in added), max_size=6, unique=True))
    return Calendar(
        "rand",
        draw(st.sampled_from([None, None, "DE", "US"])),
        None,
        frozenset(weekend),
        tuple(date.fromisoformat(d) for d in added),
        tuple(date.fromisoformat(d) for d in removed),
    )


@st.composite
def schedules(draw: st.DrawFn) -> Cron:
    calendar = draw(calendars())
    rules: dict[str, object] = {
        "dst_gap": draw(st.sampled_from([None, "skip", "run-after"])),
        "dst_repeat": draw(st.sampled_from([None, "once", "twice"])),
    }
    kind = draw(st.sampled_from(["skip", "next-business-day", "previous-business-day", "nth"]))
    expr = draw(expressions())
    if kind == "nth":
        parts = expr.split()
        parts[-3], parts[-1] = "*", "*"
        expr = " ".join(parts)
        rules["business_day"] = draw(st.integers(1, 23) | st.integers(-23, -1))
    else:
        rules["on_holiday"] = kind
    try:
        return rule(expr, calendar, draw(st.sampled_from(ZONES)), **rules)
    except ValidationError:
        assume(False)
        raise


CHANGES = sorted(
    change.at
    for tz in ZONES
    for change in cron.transitions(
        tz, datetime(2026, 1, 1, tzinfo=UTC), datetime(2028, 7, 1, tzinfo=UTC)
    )
)
"""Where DST moves wall times: a start a few days before one puts it among the first slots."""
STARTS = st.one_of(
    st.datetimes(datetime(2026, 1, 1), datetime(2028, 6, 30)).map(lambda t: t.replace(tzinfo=UTC)),
    st.builds(
        lambda at, back: at - back,
        st.sampled_from(CHANGES),
        st.timedeltas(timedelta(0), timedelta(days=4)),
    ),
)
HORIZON = timedelta(days=3 * 366)


@pytest.mark.timeout(300)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=schedules(), after=STARTS)
def test_the_day_search_finds_the_slots_the_slot_search_found(
    schedule: Cron, after: datetime
) -> None:
    note(f"{schedule!r} after {after!r}")
    found = schedule.search(after)
    assert not found.exhausted
    assume(found.slot is not None and found.slot < after + HORIZON)
    end = after + HORIZON
    try:
        old = list(islice(takewhile(lambda f: f.at < end, reference_fires(schedule, after)), 3000))
    except TooSlow:
        assume(False)
        raise
    running_old = [f.at for f in old if not f.skipped][:6]
    assert list(islice(schedule.iterate(after), len(running_old))) == running_old
    assert found.slot == (running_old[0] if running_old else found.slot)
    assert schedule.calendar_def is not None
    worked = set(schedule.calendar_def.removed)
    zone = cron.zone(schedule.tz)
    if running_old and all(t.astimezone(zone).date() in worked for t in running_old):
        # No day the expression names is a business day but for worked dates: the search
        # goes from one worked date to the next, and reports no day off on the way.
        return
    new = list(islice(takewhile(lambda f: f.at < end, schedule.fires(after)), 12))
    assert new == old[: len(new)]
