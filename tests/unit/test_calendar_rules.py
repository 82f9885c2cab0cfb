"""Business-day calendars and the cron rules over them: skip, next-business-day,
previous-business-day, the n-th business day, business-days-only; and bad input."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import islice

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork import cron
from tickwork.calendar import Calendar, HolidayPolicy, make_calendar
from tickwork.errors import InvalidCalendar, InvalidSchedule, ValidationError
from tickwork.inputs import cron_schedule
from tickwork.schedule import Cron, from_json

BERLIN = cron.zone("Europe/Berlin")
DE_BY = make_calendar("de-by", country="DE", subdiv="BY", add=["2026-12-24"])


def local(fires: list[datetime]) -> list[str]:
    return [f.astimezone(BERLIN).strftime("%a %Y-%m-%d %H:%M") for f in fires]


def daily(policy: str, expr: str = "0 9 * * *") -> Cron:
    return Cron(expr, "Europe/Berlin", calendar="de-by", on_holiday=policy, calendar_def=DE_BY)  # type: ignore[arg-type]


def first(schedule: Cron, after: datetime, n: int) -> list[datetime]:
    return list(islice(schedule.iterate(after), n))


CHRISTMAS_WEEK = datetime(2026, 12, 22, 12, tzinfo=UTC)  # Tuesday


def test_calendar_knows_holidays_weekends_and_its_own_days() -> None:
    assert DE_BY.closed(date(2026, 12, 25)) == "a holiday in calendar de-by (Christmas Day)"
    assert DE_BY.closed(date(2026, 1, 6)) == "a holiday in calendar de-by (Epiphany)"  # BY only
    assert make_calendar("de", country="DE").is_business_day(date(2026, 1, 6))
    assert DE_BY.closed(date(2026, 12, 24)) == "a day off added to calendar de-by"
    assert DE_BY.closed(date(2026, 12, 27)) == "a Sunday, a weekend day in calendar de-by"
    assert DE_BY.is_business_day(date(2026, 12, 23))
    removed = make_calendar("x", country="DE", remove=["2026-12-25"])
    assert removed.is_business_day(date(2026, 12, 25))
    gulf = make_calendar("ae", weekend="FRI,SAT")
    assert not gulf.is_business_day(date(2026, 12, 25))  # a Friday
    assert gulf.is_business_day(date(2026, 12, 27))  # a Sunday


def test_on_holiday_skip_runs_on_business_days_only_and_says_why() -> None:
    schedule = daily("skip")
    assert local(first(schedule, CHRISTMAS_WEEK, 3)) == [
        "Wed 2026-12-23 09:00",
        "Mon 2026-12-28 09:00",
        "Tue 2026-12-29 09:00",
    ]
    notes = [f.note for f in islice(schedule.fires(CHRISTMAS_WEEK), 6) if f.skipped]
    assert notes == [
        "skipped: 2026-12-24 is a day off added to calendar de-by",
        "skipped: 2026-12-25 is a holiday in calendar de-by (Christmas Day)",
        "skipped: 2026-12-26 is a holiday in calendar de-by (Second Day of Christmas)",
        "skipped: 2026-12-27 is a Sunday, a weekend day in calendar de-by",
    ]


def test_next_business_day_moves_a_day_off_slot_forward_once() -> None:
    # On the 25th of every month; December's (a holiday) moves to Monday the 28th.
    schedule = daily("next-business-day", "0 9 25 * *")
    assert local(first(schedule, datetime(2026, 11, 1, tzinfo=UTC), 3)) == [
        "Wed 2026-11-25 09:00",
        "Mon 2026-12-28 09:00",
        "Mon 2027-01-25 09:00",
    ]


def test_previous_business_day_moves_a_day_off_slot_back() -> None:
    # "If the 15th is a Sunday, run on the Friday before": 2026-11-15 is a Sunday.
    schedule = daily("previous-business-day", "0 9 15 * *")
    assert local(first(schedule, datetime(2026, 10, 20, tzinfo=UTC), 2)) == [
        "Fri 2026-11-13 09:00",
        "Tue 2026-12-15 09:00",
    ]


def test_moved_slots_that_meet_one_instant_run_once_in_order() -> None:
    for policy in ("next-business-day", "previous-business-day"):
        fires = first(daily(policy, "0 9,17 * * *"), CHRISTMAS_WEEK, 8)
        assert fires == sorted(set(fires))
    assert local(first(daily("next-business-day", "0 9,17 * * *"), CHRISTMAS_WEEK, 4)) == [
        "Tue 2026-12-22 17:00",
        "Wed 2026-12-23 09:00",
        "Wed 2026-12-23 17:00",
        "Mon 2026-12-28 09:00",
    ]


def test_a_slot_before_the_start_that_moves_past_it_is_found() -> None:
    # Saturday 09:00 has passed; next-business-day moved it to Monday 09:00, still ahead.
    saturday_noon = datetime(2026, 12, 12, 11, tzinfo=UTC)
    schedule = daily("next-business-day", "0 9 * * SAT")
    assert local(first(schedule, saturday_noon, 1)) == ["Mon 2026-12-14 09:00"]


def test_nth_and_last_business_day_of_the_month() -> None:
    last = Cron("@monthly", "Europe/Berlin", calendar="de-by", business_day=-1, calendar_def=DE_BY)
    assert local(first(last, datetime(2026, 10, 1, tzinfo=UTC), 3)) == [
        "Fri 2026-10-30 00:00",
        "Mon 2026-11-30 00:00",
        "Thu 2026-12-31 00:00",
    ]
    third = Cron("0 8 * * *", "Europe/Berlin", calendar="de-by", business_day=3, calendar_def=DE_BY)
    assert local(first(third, datetime(2026, 12, 20, tzinfo=UTC), 2)) == [
        "Thu 2027-01-07 08:00",  # 1 Jan holiday, 2-3 weekend, 4, 5, (6 Epiphany), 7
        "Wed 2027-02-03 08:00",
    ]


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 15) | st.integers(-15, -1), month=st.integers(1, 12))
def test_nth_business_day_is_a_business_day_with_n_minus_one_before_it(n: int, month: int) -> None:
    schedule = Cron(
        "30 7 * * *", "Europe/Berlin", calendar="de-by", business_day=n, calendar_def=DE_BY
    )
    after = datetime(2027, month, 1, tzinfo=BERLIN) - timedelta(microseconds=1)
    (fire,) = first(schedule, after, 1)
    day = fire.astimezone(BERLIN).date()
    assert (day.year, day.month) == (2027, month)
    assert DE_BY.is_business_day(day)
    days = DE_BY.business_days(2027, month)
    assert days.index(day) == (n - 1 if n > 0 else len(days) + n)


def test_business_days_only_is_on_holiday_skip() -> None:
    short = cron_schedule("0 9 * * *", "Europe/Berlin", calendar="de-by", business_days_only=True)
    assert short == Cron(
        "0 9 * * *", "Europe/Berlin", calendar="de-by", on_holiday=HolidayPolicy.SKIP
    )
    assert Cron("0 9 * * *", calendar="de-by").on_holiday is HolidayPolicy.SKIP  # the default


def test_conflicting_or_incomplete_rules_are_refused() -> None:
    with pytest.raises(ValidationError, match="business_days_only is short for on_holiday=skip"):
        cron_schedule("0 9 * * *", calendar="de-by", business_days_only=True, on_holiday="skip")
    with pytest.raises(ValidationError, match="business_days_only needs a calendar"):
        cron_schedule("0 9 * * *", business_days_only=True)
    with pytest.raises(InvalidSchedule, match="on_holiday needs a calendar"):
        Cron("0 9 * * *", on_holiday="skip")  # type: ignore[arg-type]
    with pytest.raises(InvalidSchedule, match="business_day picks a business day itself"):
        Cron("@monthly", calendar="de-by", business_day=1, on_holiday="skip")  # type: ignore[arg-type]
    with pytest.raises(InvalidSchedule, match="with business_day the day is the rule's"):
        Cron("0 9 15 * *", calendar="de-by", business_day=1)
    with pytest.raises(InvalidCalendar, match="business_day must be 1 to 23"):
        Cron("@monthly", calendar="de-by", business_day=0)
    with pytest.raises(InvalidSchedule, match="on_holiday must be one of skip, next-business-day"):
        Cron("0 9 * * *", calendar="de-by", on_holiday="monday")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"country": "ZZ"}, "unknown country 'ZZ'"),
        ({"country": "DE", "subdiv": "XX"}, "unknown region 'XX' of DE"),
        ({"subdiv": "BY"}, "a region .* needs a country"),
        ({"add": ["2026-12-32"]}, "add '2026-12-32' is not a date: write YYYY-MM-DD"),
        ({"remove": ["24.12.2026"]}, "remove '24.12.2026' is not a date"),
        ({"weekend": "SAT,FUNDAY"}, "'FUNDAY' is not a day"),
        ({"weekend": "MON,TUE,WED,THU,FRI,SAT,SUN"}, "leaves no business day"),
        ({"add": ["2026-12-24"], "remove": ["2026-12-24"]}, "both added and removed"),
    ],
)
def test_bad_calendar_input_is_refused_by_name(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidCalendar, match=message):
        make_calendar("x", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "De-By", "-x", "a b", "x" * 64])
def test_bad_calendar_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidCalendar, match="calendar name"):
        Calendar(name)


def test_schedule_with_calendar_reads_back_with_its_definition() -> None:
    schedule = daily("next-business-day")
    stored = schedule.to_json()
    assert stored["calendar"] == "de-by"
    restored = from_json(stored)
    assert restored == schedule
    assert isinstance(restored, Cron)
    assert restored.calendar_def == DE_BY


def test_unbound_calendar_schedule_cannot_plan() -> None:
    with pytest.raises(InvalidSchedule, match="calendar 'de-by' is not loaded"):
        Cron("0 9 * * *", calendar="de-by").next_after(CHRISTMAS_WEEK)
