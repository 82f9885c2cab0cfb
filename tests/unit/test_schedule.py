"""One-off and interval schedules, durations and instants as users type them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tickwork.clock import EARLIEST, LATEST
from tickwork.errors import InvalidSchedule, ValidationError
from tickwork.schedule import Cron, Interval, Once, Schedule, from_json, interval_from_json
from tickwork.timetext import parse_duration, parse_instant

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def utc(text: str) -> datetime:
    """A literal UTC instant, e.g. ``utc("2026-03-29T01:00:00Z")``."""
    value = datetime.fromisoformat(text)
    assert value.utcoffset() == timedelta(0), text
    return value


# -- once ------------------------------------------------------------------------------------


def test_once_at_an_instant_has_that_single_slot() -> None:
    once = Once(at=utc("2026-07-01T09:00:00Z"))
    assert once.first_slot(NOW) == utc("2026-07-01T09:00:00Z")
    assert once.next_after(utc("2026-07-01T09:00:00Z")) is None


def test_once_at_an_instant_in_another_zone_is_stored_as_utc() -> None:
    once = Once(at=datetime(2026, 7, 1, 11, 0, tzinfo=ZoneInfo("Europe/Berlin")))
    assert once.at == utc("2026-07-01T09:00:00Z")
    assert once.at is not None
    assert once.at.tzinfo is UTC


def test_once_after_a_delay_falls_that_long_after_submit() -> None:
    once = Once(delay=timedelta(minutes=10))
    assert once.first_slot(NOW) == utc("2026-06-01T12:10:00Z")
    assert once.resolve(NOW) == Once(at=utc("2026-06-01T12:10:00Z"))


def test_once_with_zero_delay_is_due_at_submit() -> None:
    assert Once(delay=timedelta(0)).first_slot(NOW) == NOW


def test_once_with_negative_delay_is_rejected() -> None:
    with pytest.raises(InvalidSchedule, match="delay must not be negative, got -5 s") as caught:
        Once(delay=timedelta(seconds=-5))
    assert caught.value.field == "delay"


def test_once_at_a_naive_datetime_is_rejected() -> None:
    with pytest.raises(InvalidSchedule, match="has no time zone offset") as caught:
        Once(at=datetime(2026, 7, 1, 9, 0))
    assert caught.value.field == "at"


@pytest.mark.parametrize(
    "kwargs", [{}, {"at": datetime(2026, 7, 1, tzinfo=UTC), "delay": timedelta(1)}]
)
def test_once_takes_exactly_one_of_at_or_delay(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidSchedule, match="exactly one of 'at' or 'delay'"):
        Once(**kwargs)  # type: ignore[arg-type]


# -- interval --------------------------------------------------------------------------------


def test_interval_without_anchor_first_fires_one_interval_after_submit() -> None:
    every = Interval(timedelta(minutes=5))
    assert every.first_slot(NOW) == utc("2026-06-01T12:05:00Z")
    assert every.resolve(NOW).anchor == NOW


def test_interval_with_past_anchor_fires_on_the_anchor_grid_after_now() -> None:
    every = Interval(timedelta(hours=1), anchor=utc("2026-01-01T00:30:00Z"))
    assert every.first_slot(utc("2026-06-01T12:00:00Z")) == utc("2026-06-01T12:30:00Z")
    assert every.next_after(utc("2026-06-01T12:30:00Z")) == utc("2026-06-01T13:30:00Z")


def test_interval_first_slot_is_strictly_after_now_when_now_is_on_the_grid() -> None:
    every = Interval(timedelta(hours=1), anchor=utc("2026-01-01T00:00:00Z"))
    assert every.first_slot(utc("2026-06-01T12:00:00Z")) == utc("2026-06-01T13:00:00Z")


def test_interval_with_future_anchor_first_fires_at_the_anchor() -> None:
    every = Interval(timedelta(hours=1), anchor=utc("2026-06-02T08:00:00Z"))
    assert every.first_slot(NOW) == utc("2026-06-02T08:00:00Z")
    assert every.next_after(NOW) == utc("2026-06-02T08:00:00Z")
    assert every.next_after(utc("2026-06-02T08:00:00Z")) == utc("2026-06-02T09:00:00Z")


def test_interval_of_one_second_is_the_shortest_allowed() -> None:
    every = Interval(timedelta(seconds=1), anchor=NOW)
    assert every.next_after(NOW) == NOW + timedelta(seconds=1)


@pytest.mark.parametrize("seconds", [0.999, 0, -60])
def test_interval_below_one_second_is_rejected(seconds: float) -> None:
    with pytest.raises(InvalidSchedule, match="interval must be at least 1 s") as caught:
        Interval(timedelta(seconds=seconds))
    assert caught.value.field == "every"


def test_interval_with_naive_anchor_is_rejected() -> None:
    with pytest.raises(InvalidSchedule, match=r"anchor .* has no time zone offset") as caught:
        Interval(timedelta(hours=1), anchor=datetime(2026, 1, 1))
    assert caught.value.field == "anchor"


def test_unresolved_interval_cannot_compute_a_next_slot() -> None:
    with pytest.raises(InvalidSchedule, match="must be resolved"):
        Interval(timedelta(hours=1)).next_after(NOW)


def test_interval_with_sub_second_remainder_keeps_exact_microseconds() -> None:
    every = Interval(timedelta(seconds=1, microseconds=500_000), anchor=NOW)
    assert every.next_after(NOW + timedelta(seconds=2)) == NOW + timedelta(seconds=3)


@pytest.mark.parametrize(
    ("every", "text"),
    [
        (timedelta(days=2), "every 2 days"),
        (timedelta(hours=1), "every 1 hour"),
        (timedelta(minutes=90), "every 90 minutes"),
        (timedelta(seconds=45), "every 45 seconds"),
    ],
)
def test_interval_describes_itself_in_the_largest_whole_unit(every: timedelta, text: str) -> None:
    assert Interval(every).describe() == text


# -- JSON round trip -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        Once(at=utc("2026-07-01T09:00:00Z")),
        Once(delay=timedelta(seconds=90)),
        Cron("0 9 * * MON-FRI", "Europe/Berlin"),
        Interval(timedelta(minutes=5)),
        Interval(timedelta(minutes=5), anchor=utc("2026-01-01T00:00:00Z")),
    ],
    ids=["once-at", "once-delay", "cron", "interval", "interval-anchored"],
)
def test_schedule_survives_a_json_round_trip(schedule: Schedule) -> None:
    assert from_json(schedule.to_json()) == schedule


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "weekly"}, "unknown schedule kind 'weekly'"),
        ({"kind": "cron"}, "missing or mistypes 'expr'"),
        ({"kind": "once", "delay": "soon"}, "missing or mistypes"),
        ({"kind": "interval", "every": "often"}, "missing or mistypes"),
    ],
)
def test_malformed_schedule_json_is_an_invalid_schedule(
    data: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidSchedule, match=message):
        from_json(data)


def test_schedule_json_keeps_the_precise_error_of_the_schedule_itself() -> None:
    with pytest.raises(InvalidSchedule, match="interval must be at least 1 s"):
        from_json({"kind": "interval", "every": 0.5})


def test_interval_read_from_the_text_of_its_json_fields_is_the_one_from_json_reads() -> None:
    # What a store's SQL extracts (PostgreSQL's ->> gives text) reads as from_json reads.
    schedule = Interval(timedelta(seconds=90), anchor=utc("2026-01-01T00:00:00.000123Z"))
    data = schedule.to_json()
    assert interval_from_json(str(data["every"]), data["anchor"]) == schedule
    assert interval_from_json(data["every"], None) == Interval(timedelta(seconds=90))
    with pytest.raises(InvalidSchedule, match="anchor"):
        interval_from_json("90", "yesterday")


# -- parse_duration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("1.5", 1.5),
        ("90s", 90),
        ("10m", 600),
        ("1h30m", 5400),
        ("2d", 172_800),
        ("1w", 604_800),
        ("250ms", 0.25),
        ("1m30s", 90),
        (" 10M ", 600),
        ("0", 0),
    ],
)
def test_duration_is_read_with_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("soon", "is not a duration"),
        ("10x", "is not a duration"),
        ("m", "is not a duration"),
        ("1.2.3s", "is not a duration"),
        ("inf", "is not a duration"),
        ("nan", "is not a duration"),
        ("5m5", "has a number without a unit"),
        ("-5", "must not be negative"),
        ("-5m", "is not a duration"),
        ("99999999999999", "is too long"),
    ],
)
def test_bad_duration_is_rejected_naming_the_problem(text: str, message: str) -> None:
    with pytest.raises(InvalidSchedule, match=message) as caught:
        parse_duration(text, field="--in")
    assert caught.value.field == "--in"
    assert caught.value.message.startswith("--in ")


# -- parse_instant ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01T09:00:00Z", "2026-12-01T09:00:00Z"),
        ("2026-12-01T09:00:00+01:00", "2026-12-01T08:00:00Z"),
        ("2026-12-01T09:00:00.250-05:00", "2026-12-01T14:00:00.250Z"),
        ("  2026-12-01 09:00+00:00 ", "2026-12-01T09:00:00Z"),
    ],
)
def test_instant_with_an_offset_is_read_as_utc(text: str, expected: str) -> None:
    value = parse_instant(text)
    assert value == utc(expected)
    assert value.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2026-12-01T09:00:00", "has no UTC offset"),
        ("2026-12-01", "has no UTC offset"),
        ("tomorrow", "is not an ISO-8601 time"),
        ("0001-01-01T00:00:00+01:00", "is out of range"),
    ],
)
def test_bad_instant_is_rejected_naming_the_problem(text: str, message: str) -> None:
    with pytest.raises(InvalidSchedule, match=message) as caught:
        parse_instant(text, field="--at")
    assert caught.value.field == "--at"


@pytest.mark.parametrize(
    "text",
    [
        "0001-01-01T00:00:00+00:00",
        "1969-12-31T23:59:59.999999Z",
        "9999-12-30T00:00:00.000001Z",
        "9999-12-31T23:59:59+00:00",
        "9999-12-31T23:59:59-01:00",
    ],
)
def test_an_instant_outside_the_calendar_tickwork_keeps_is_out_of_range(text: str) -> None:
    with pytest.raises(InvalidSchedule, match="is out of range") as caught:
        parse_instant(text, field="anchor")
    assert caught.value.field == "anchor"
    assert "1970-01-01T00:00:00+00:00 to 9999-12-30T00:00:00+00:00" in caught.value.message


def test_the_first_and_last_instants_of_the_range_are_accepted() -> None:
    assert parse_instant("1970-01-01T00:00:00Z") == EARLIEST
    assert parse_instant("9999-12-30T01:00:00+01:00") == LATEST


@pytest.mark.parametrize(
    "text",
    [
        "2030-01-01T00:00:00+00:00\x00",
        "2030-01-01T00:00:00+00:00\x00ignored",
        "2030-01-01T00:00:00\x00+05:00",
        "\x1c2030-01-01T00:00:00Z",
        "2030-01-01T00:00:00Z\u2003",
        "2030-01-01T00:00:00Z\n",
        "2030-01-01\u00e900:00:00Z",
    ],
    ids=[
        "nul",
        "nul-then-text",
        "nul-before-offset",
        "file-separator",
        "em-space",
        "newline",
        "non-ascii-separator",
    ],
)
def test_an_instant_with_a_control_or_non_ascii_character_is_refused_not_trimmed(
    text: str,
) -> None:
    with pytest.raises(InvalidSchedule, match="only printable ASCII") as caught:
        parse_instant(text, field="at")
    assert caught.value.field == "at"


def test_a_stored_schedule_is_read_whatever_its_times() -> None:
    # Rows written before the range rule (an anchor in year 1) must still be readable.
    stored = {"kind": "interval", "every": 60.0, "anchor": "0001-01-01T00:00:00+00:00"}

    read = from_json(stored)

    assert isinstance(read, Interval)
    assert read.anchor == datetime(1, 1, 1, tzinfo=UTC)


def test_an_interval_ends_at_the_calendars_end() -> None:
    every = Interval(timedelta(seconds=3e9), anchor=utc("2026-01-01T00:00:00Z"))
    slots = [utc("2026-01-01T00:00:00Z")]

    while (slot := every.next_after(slots[-1])) is not None:
        slots.append(slot)

    assert len(slots) == 84  # 95 years apart, from 2026 to the end of year 9999
    assert slots[-1] <= LATEST
    assert LATEST - slots[-1] < every.every


def test_an_interval_anchored_past_the_calendars_end_has_no_slot_after_it() -> None:
    legacy = from_json({"kind": "interval", "every": 60.0, "anchor": "9999-12-31T23:59:00Z"})

    assert legacy.next_after(utc("9999-12-31T23:59:00Z")) is None


def test_schedule_errors_are_validation_errors() -> None:
    assert issubclass(InvalidSchedule, ValidationError)


def test_a_delay_or_interval_beyond_a_century_is_bad_input_not_an_overflow() -> None:
    with pytest.raises(InvalidSchedule, match="100 years"):
        Once(delay=timedelta(days=3_000_000))
    with pytest.raises(InvalidSchedule, match="100 years"):
        Interval(timedelta(days=3_000_000))
