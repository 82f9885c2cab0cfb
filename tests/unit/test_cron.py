"""Cron expressions: validation messages, names, nicknames, seconds, plain English."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tickwork import cron
from tickwork.clock import LATEST
from tickwork.errors import InvalidCron, InvalidTimezone, ValidationError
from tickwork.schedule import Cron

START = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday


def fires(expr: str, tz: str = "UTC", after: datetime = START, n: int = 3) -> list[datetime]:
    times: list[datetime] = []
    for fire in cron.iterate(Cron(expr, tz).expr, tz, after):
        times.append(fire)
        if len(times) == n:
            break
    return times


def utc(text: str) -> datetime:
    """A literal UTC instant, e.g. ``utc("2026-03-29T01:00:00Z")``."""
    value = datetime.fromisoformat(text)
    assert value.utcoffset() == timedelta(0), text
    return value


# -- validation ------------------------------------------------------------------------------


def test_out_of_range_minute_is_rejected_naming_the_field_and_value() -> None:
    with pytest.raises(InvalidCron) as caught:
        Cron("61 * * * *")
    assert str(caught.value) == "invalid cron expression '61 * * * *': bad minute field '61'"
    assert caught.value.reason == "bad minute field '61'"
    assert caught.value.field == "cron"


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("* 24 * * *", "bad hour field '24'"),
        ("* * 0 * *", "bad day-of-month field '0'"),
        ("* * 32 * *", "bad day-of-month field '32'"),
        ("* * * 13 *", "bad month field '13'"),
        ("* * * FOO *", "bad month field 'FOO'"),
        ("* * * * 8", "bad day-of-week field '8'"),
        ("* * * * FUNDAY", "bad day-of-week field 'FUNDAY'"),
        ("*/0 * * * *", "bad minute field '*/0'"),
        ("5-1 * * * *", "bad minute field '5-1'"),
        ("60 * * * * *", "bad second field '60'"),
        ("0 60 * * * *", "bad minute field '60'"),
    ],
)
def test_each_bad_field_is_named_with_its_value(expr: str, reason: str) -> None:
    with pytest.raises(InvalidCron) as caught:
        Cron(expr)
    assert caught.value.reason == reason


@pytest.mark.parametrize(("expr", "count"), [("* * * *", 4), ("* * * * * * *", 7), ("*", 1)])
def test_wrong_number_of_fields_is_rejected_with_the_count(expr: str, count: int) -> None:
    with pytest.raises(InvalidCron) as caught:
        Cron(expr)
    assert caught.value.reason.startswith("expected 5 fields")
    assert caught.value.reason.endswith(f"got {count}")


@pytest.mark.parametrize("expr", ["", "   "])
def test_empty_expression_is_rejected(expr: str) -> None:
    with pytest.raises(InvalidCron, match="the expression is empty"):
        Cron(expr)


@pytest.mark.parametrize(
    ("expr", "month"), [("0 0 31 2 *", "'2'"), ("0 0 30 2 *", "'2'"), ("0 0 31 4,6 *", "'4,6'")]
)
def test_day_of_month_that_never_occurs_in_the_month_is_rejected(expr: str, month: str) -> None:
    with pytest.raises(InvalidCron) as caught:
        Cron(expr)
    assert caught.value.reason.startswith("day-of-month '3")
    assert caught.value.reason.endswith(f"never occurs in month {month}")


def test_february_29th_is_accepted_and_fires_in_the_next_leap_year() -> None:
    assert fires("0 0 29 2 *", n=2) == [utc("2028-02-29T00:00:00Z"), utc("2032-02-29T00:00:00Z")]


def test_day_31_in_february_or_on_mondays_fires_on_february_mondays() -> None:
    # Debian cron: with both day fields restricted, a day matching either one fires.
    assert fires("0 0 31 2 MON", n=2) == [utc("2026-02-02T00:00:00Z"), utc("2026-02-09T00:00:00Z")]


def test_invalid_cron_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        Cron("nope")


# -- nicknames -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nickname", "expr"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@HOURLY", "0 * * * *"),
        ("  @daily ", "0 0 * * *"),
    ],
)
def test_nickname_expands_to_its_five_fields(nickname: str, expr: str) -> None:
    assert Cron(nickname).expr == expr


def test_hourly_nickname_fires_at_the_top_of_each_hour() -> None:
    assert fires("@hourly") == [
        utc("2026-01-01T01:00:00Z"),
        utc("2026-01-01T02:00:00Z"),
        utc("2026-01-01T03:00:00Z"),
    ]


def test_reboot_nickname_is_rejected_listing_the_known_ones() -> None:
    with pytest.raises(InvalidCron) as caught:
        Cron("@reboot")
    assert caught.value.reason.startswith("unknown nickname '@reboot' (known: @annually,")


# -- names, whitespace, seconds ----------------------------------------------------------------


def test_weekday_names_select_monday_to_friday() -> None:
    # 2026-01-01 is a Thursday: Thu, Fri, then Monday the 5th.
    assert fires("0 9 * * MON-FRI") == [
        utc("2026-01-01T09:00:00Z"),
        utc("2026-01-02T09:00:00Z"),
        utc("2026-01-05T09:00:00Z"),
    ]


def test_lower_case_names_are_accepted() -> None:
    assert fires("0 9 * * mon-fri") == fires("0 9 * * MON-FRI")
    assert fires("0 0 1 jan,jul *") == fires("0 0 1 JAN,JUL *")


def test_month_names_select_those_months() -> None:
    assert fires("0 0 1 JAN,JUL *") == [
        utc("2026-07-01T00:00:00Z"),
        utc("2027-01-01T00:00:00Z"),
        utc("2027-07-01T00:00:00Z"),
    ]


def test_runs_of_blanks_between_fields_are_collapsed() -> None:
    assert Cron("  0\t9  *  * \n *").expr == "0 9 * * *"


def test_six_fields_read_seconds_first() -> None:
    assert fires("30 0 9 * * *", n=2) == [utc("2026-01-01T09:00:30Z"), utc("2026-01-02T09:00:30Z")]


def test_six_fields_step_in_seconds() -> None:
    assert fires("*/15 * * * * *", n=4) == [
        utc("2026-01-01T00:00:15Z"),
        utc("2026-01-01T00:00:30Z"),
        utc("2026-01-01T00:00:45Z"),
        utc("2026-01-01T00:01:00Z"),
    ]


def test_next_after_is_strictly_after_a_fire_time() -> None:
    assert Cron("0 * * * *").next_after(utc("2026-01-01T05:00:00Z")) == utc("2026-01-01T06:00:00Z")


def test_next_after_a_time_with_microseconds_keeps_the_same_minute_out() -> None:
    after = datetime(2026, 1, 1, 5, 0, 0, 1, tzinfo=UTC)
    assert Cron("* * * * *").next_after(after) == utc("2026-01-01T05:01:00Z")


def test_fire_times_are_utc_whatever_the_zone_of_the_start() -> None:
    after = datetime(2026, 1, 1, 8, 0, tzinfo=ZoneInfo("Asia/Tokyo"))  # 2025-12-31 23:00 UTC
    fire = Cron("0 9 * * *", "Asia/Tokyo").next_after(after)
    assert fire == utc("2026-01-01T00:00:00Z")
    assert fire.tzinfo is UTC


# -- time zones ------------------------------------------------------------------------------


@pytest.mark.parametrize("tz", ["Mars/Olympus_Mons", "", " UTC", "../../etc/passwd", "/etc/UTC"])
def test_unknown_time_zone_is_rejected(tz: str) -> None:
    with pytest.raises(InvalidTimezone) as caught:
        Cron("* * * * *", tz)
    assert caught.value.tz == tz
    assert caught.value.field == "tz"
    assert str(caught.value).startswith(f"unknown time zone {tz!r}")


def test_cron_is_read_in_its_time_zone() -> None:
    # 09:00 in New York in January is 14:00 UTC (EST, UTC-5).
    assert Cron("0 9 * * *", "America/New_York").next_after(START) == utc("2026-01-01T14:00:00Z")


# -- plain English ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        ("0 9 * * MON-FRI", "At 09:00 on Monday through Friday"),
        ("@hourly", "At the start of every hour"),
        ("*/30 * * * *", "Every 30th minute of every hour"),
    ],
)
def test_explain_says_it_in_plain_english(expr: str, text: str) -> None:
    assert cron.explain(Cron(expr).expr) == text


def test_describe_names_the_time_zone() -> None:
    assert Cron("0 9 * * *", "Europe/Berlin").describe() == "At 09:00 every day (Europe/Berlin)"


@pytest.mark.parametrize(
    ("expr", "normal"),
    [
        ("5-5/1 * * * *", "5 * * * *"),
        ("0 0 * * mon-MON/2", "0 0 * * mon"),
        ("5-9/2,7-7/3 * * * *", "5-9/2,7 * * * *"),
    ],
)
def test_stepped_range_of_one_value_is_that_value(expr: str, normal: str) -> None:
    # cronsim alone reads 5-5/1 as 5/1 (5-59/1): every minute from :05 on.
    assert Cron(expr).expr == normal


def test_stepped_range_of_one_value_fires_once_an_hour() -> None:
    assert fires("5-5/1 * * * *", n=2) == [utc("2026-01-01T00:05:00Z"), utc("2026-01-01T01:05:00Z")]


def test_single_value_with_a_step_runs_from_it_to_the_end_of_the_range() -> None:
    assert fires("50/5 * * * *", n=3) == [
        utc("2026-01-01T00:50:00Z"),
        utc("2026-01-01T00:55:00Z"),
        utc("2026-01-01T01:50:00Z"),
    ]


@pytest.mark.parametrize(
    "expr", ["* * * * *", "*/7 * * * * *", "0 */2 * * MON-FRI", "30 * 1,15 * *"]
)
@pytest.mark.parametrize("offset_hours", [0, 5.75, -3])
def test_the_reused_parse_iterates_exactly_like_a_fresh_cronsim(
    expr: str, offset_hours: float
) -> None:
    from datetime import timezone as fixed

    from cronsim import CronSim

    from tickwork.cron import _fixed_offset_sim

    start = datetime(2026, 3, 29, 0, 59, 59, 500_000, tzinfo=fixed(timedelta(hours=offset_hours)))
    fresh, reused = CronSim(expr, start), _fixed_offset_sim(expr, start)
    assert [next(fresh) for _ in range(50)] == [next(reused) for _ in range(50)]


@pytest.mark.parametrize(
    ("expr", "span"),
    [
        ("* * * * *", timedelta(hours=3)),
        ("0 9 * * *", timedelta(days=3)),
        ("*/10 * * * * *", timedelta(minutes=30)),
        ("0 0 1 1 *", timedelta(days=400)),
    ],
)
@pytest.mark.parametrize("tz", ["UTC", "Europe/Berlin", "Pacific/Kiritimati", "Pacific/Niue"])
def test_fire_times_end_at_the_calendars_end(expr: str, span: timedelta, tz: str) -> None:
    start = LATEST - span

    fires = list(cron.iterate(expr, tz, start))

    assert fires
    assert fires[-1] <= LATEST
    assert cron.next_after(expr, tz, fires[-1]) is None
    assert cron.next_after(expr, tz, LATEST) is None


@pytest.mark.parametrize(
    "expr",
    ["0\x1c9 * * *", "0 9 * * *\u3000", "\x85@daily", "0\xa09 * * *"],
    ids=["file-separator", "ideographic-space", "next-line", "no-break-space"],
)
def test_fields_separated_by_a_blank_that_is_not_ascii_are_refused(expr: str) -> None:
    with pytest.raises(InvalidCron, match="separate fields by spaces or tabs") as caught:
        Cron(expr)
    assert caught.value.field == "cron"


def test_a_nul_in_a_field_is_refused() -> None:
    with pytest.raises(InvalidCron, match="bad day-of-week field"):
        Cron("0 9 * * *\x00")
