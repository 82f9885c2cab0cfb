"""Cron across daylight-saving changes, against hand-worked UTC instants.

The rules (Debian cron, as cronsim implements it; see ``tickwork.cron``):

- a fixed-time job (minute and hour fixed) whose time falls in the spring-forward gap runs
  once, right after the gap; in the fall-back hour it runs once, on the first pass;
- a job whose minute or hour is a wildcard or a step runs on elapsed time: it skips the
  gap and runs through both passes of the repeated hour.

The 2026 transitions used here (offsets: CET +01, CEST +02, EST -05, EDT -04)::

    Europe/Berlin     2026-03-29 02:00 CET  -> 03:00 CEST   (at 01:00 UTC)
                      2026-10-25 03:00 CEST -> 02:00 CET    (at 01:00 UTC)
    America/New_York  2026-03-08 02:00 EST  -> 03:00 EDT    (at 07:00 UTC)
                      2026-11-01 02:00 EDT  -> 01:00 EST    (at 06:00 UTC)

Every expected instant below was worked out by hand from that table, never by the code
under test; the comment beside it is the local wall-clock time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

from tickwork import cron
from tickwork.schedule import Cron, Interval

BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"


def utc(text: str) -> datetime:
    """A literal UTC instant, e.g. ``utc("2026-03-29T01:00:00Z")``."""
    value = datetime.fromisoformat(text)
    assert value.utcoffset() == timedelta(0), text
    return value


def fires(expr: str, tz: str, after: str, n: int) -> list[datetime]:
    schedule = Cron(expr, tz)
    return list(islice(cron.iterate(schedule.expr, schedule.tz, utc(after)), n))


def chain(expr: str, tz: str, after: str, n: int) -> list[datetime]:
    """The same times by repeated ``Cron.next_after``, as the trigger advances a job."""
    schedule = Cron(expr, tz)
    times: list[datetime] = []
    at = utc(after)
    for _ in range(n):
        nxt = schedule.next_after(at)
        assert nxt is not None
        times.append(nxt)
        at = nxt
    return times


# -- Europe/Berlin ---------------------------------------------------------------------------


def test_berlin_fixed_time_job_in_spring_gap_runs_once_right_after_it() -> None:
    expected = [
        utc("2026-03-28T01:30:00Z"),  # 02:30 CET
        utc("2026-03-29T01:00:00Z"),  # 02:30 does not exist: 03:00 CEST, right after the gap
        utc("2026-03-30T00:30:00Z"),  # 02:30 CEST
    ]
    assert fires("30 2 * * *", BERLIN, "2026-03-28T00:00:00Z", 3) == expected
    assert chain("30 2 * * *", BERLIN, "2026-03-28T00:00:00Z", 3) == expected


def test_berlin_fixed_time_job_in_fall_back_hour_runs_once_on_the_first_pass() -> None:
    expected = [
        utc("2026-10-24T00:30:00Z"),  # 02:30 CEST
        utc("2026-10-25T00:30:00Z"),  # 02:30 CEST, first pass; not 02:30 CET (01:30 UTC)
        utc("2026-10-26T01:30:00Z"),  # 02:30 CET
    ]
    assert fires("30 2 * * *", BERLIN, "2026-10-24T00:00:00Z", 3) == expected
    assert chain("30 2 * * *", BERLIN, "2026-10-24T00:00:00Z", 3) == expected


def test_berlin_fixed_time_job_asked_during_the_second_pass_waits_for_the_next_day() -> None:
    # 01:10 UTC is 02:10 CET, the second pass: today's 02:30 already ran on the first pass.
    assert Cron("30 2 * * *", BERLIN).next_after(utc("2026-10-25T01:10:00Z")) == utc(
        "2026-10-26T01:30:00Z"
    )


def test_berlin_every_30_minutes_skips_the_spring_gap() -> None:
    assert fires("*/30 * * * *", BERLIN, "2026-03-29T00:00:00Z", 3) == [
        utc("2026-03-29T00:30:00Z"),  # 01:30 CET
        utc("2026-03-29T01:00:00Z"),  # 03:00 CEST: 02:00 and 02:30 do not exist
        utc("2026-03-29T01:30:00Z"),  # 03:30 CEST
    ]


def test_berlin_every_30_minutes_runs_through_both_passes_of_the_fall_back_hour() -> None:
    expected = [
        utc("2026-10-25T00:30:00Z"),  # 02:30 CEST, first pass
        utc("2026-10-25T01:00:00Z"),  # 02:00 CET, second pass
        utc("2026-10-25T01:30:00Z"),  # 02:30 CET, second pass
        utc("2026-10-25T02:00:00Z"),  # 03:00 CET
    ]
    assert fires("*/30 * * * *", BERLIN, "2026-10-25T00:00:00Z", 4) == expected
    assert chain("*/30 * * * *", BERLIN, "2026-10-25T00:00:00Z", 4) == expected


def test_berlin_every_30_minutes_shows_the_skipped_wall_clock_times_in_local_time() -> None:
    local = [
        t.astimezone(ZoneInfo(BERLIN)).isoformat()
        for t in fires("*/30 * * * *", BERLIN, "2026-03-29T00:00:00Z", 3)
    ]
    assert local == [
        "2026-03-29T01:30:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T03:30:00+02:00",
    ]


def test_berlin_six_field_fixed_time_job_runs_on_elapsed_time_across_both_changes() -> None:
    # Six fields are not Debian cron: no gap fix-up, and both passes of the repeated hour.
    assert fires("0 30 2 * * *", BERLIN, "2026-03-28T12:00:00Z", 1) == [
        utc("2026-03-30T00:30:00Z"),  # 2026-03-29 has no 02:30: no run that day
    ]
    assert fires("0 30 2 * * *", BERLIN, "2026-10-24T12:00:00Z", 3) == [
        utc("2026-10-25T00:30:00Z"),  # 02:30 CEST
        utc("2026-10-25T01:30:00Z"),  # 02:30 CET
        utc("2026-10-26T01:30:00Z"),  # 02:30 CET
    ]


# -- America/New_York ------------------------------------------------------------------------


def test_new_york_fixed_time_job_in_spring_gap_runs_once_right_after_it() -> None:
    expected = [
        utc("2026-03-07T07:30:00Z"),  # 02:30 EST
        utc("2026-03-08T07:00:00Z"),  # 02:30 does not exist: 03:00 EDT, right after the gap
        utc("2026-03-09T06:30:00Z"),  # 02:30 EDT
    ]
    assert fires("30 2 * * *", NEW_YORK, "2026-03-07T00:00:00Z", 3) == expected
    assert chain("30 2 * * *", NEW_YORK, "2026-03-07T00:00:00Z", 3) == expected


def test_new_york_fixed_time_job_in_fall_back_hour_runs_once_on_the_first_pass() -> None:
    # New York repeats 01:00-02:00, so the fixed time in the repeated hour is 01:30.
    expected = [
        utc("2026-10-31T05:30:00Z"),  # 01:30 EDT
        utc("2026-11-01T05:30:00Z"),  # 01:30 EDT, first pass; not 01:30 EST (06:30 UTC)
        utc("2026-11-02T06:30:00Z"),  # 01:30 EST
    ]
    assert fires("30 1 * * *", NEW_YORK, "2026-10-31T00:00:00Z", 3) == expected
    assert chain("30 1 * * *", NEW_YORK, "2026-10-31T00:00:00Z", 3) == expected


def test_new_york_fixed_time_job_after_the_repeated_hour_is_not_moved() -> None:
    assert fires("30 2 * * *", NEW_YORK, "2026-10-31T12:00:00Z", 2) == [
        utc("2026-11-01T07:30:00Z"),  # 02:30 EST, the first 02:30 of the day
        utc("2026-11-02T07:30:00Z"),
    ]


def test_new_york_every_30_minutes_skips_the_spring_gap() -> None:
    assert fires("*/30 * * * *", NEW_YORK, "2026-03-08T06:00:00Z", 3) == [
        utc("2026-03-08T06:30:00Z"),  # 01:30 EST
        utc("2026-03-08T07:00:00Z"),  # 03:00 EDT: 02:00 and 02:30 do not exist
        utc("2026-03-08T07:30:00Z"),  # 03:30 EDT
    ]


def test_new_york_every_30_minutes_runs_through_both_passes_of_the_fall_back_hour() -> None:
    expected = [
        utc("2026-11-01T05:30:00Z"),  # 01:30 EDT, first pass
        utc("2026-11-01T06:00:00Z"),  # 01:00 EST, second pass
        utc("2026-11-01T06:30:00Z"),  # 01:30 EST, second pass
        utc("2026-11-01T07:00:00Z"),  # 02:00 EST
    ]
    assert fires("*/30 * * * *", NEW_YORK, "2026-11-01T05:00:00Z", 4) == expected
    assert chain("*/30 * * * *", NEW_YORK, "2026-11-01T05:00:00Z", 4) == expected


def test_new_york_hourly_at_a_fixed_minute_runs_on_elapsed_time_in_the_repeated_hour() -> None:
    assert fires("15 * * * *", NEW_YORK, "2026-11-01T05:00:00Z", 3) == [
        utc("2026-11-01T05:15:00Z"),  # 01:15 EDT
        utc("2026-11-01T06:15:00Z"),  # 01:15 EST
        utc("2026-11-01T07:15:00Z"),  # 02:15 EST
    ]


# -- Pacific/Chatham: changes at a quarter to the hour ------------------------------------------
# CHAST +12:45, CHADT +13:45.  2026-04-05 03:45 CHADT -> 02:45 CHAST  (at 2026-04-04 14:00 UTC)
#                              2026-09-27 02:45 CHAST -> 03:45 CHADT  (at 2026-09-26 14:00 UTC)
# The repeated and the missing periods straddle 03:00, so a wall-clock jump to the start of
# the hour lands on the other side of the change.

CHATHAM = "Pacific/Chatham"


def test_chatham_every_15_minutes_in_hour_3_runs_through_both_passes_of_the_fall_back() -> None:
    assert fires("*/15 3 * * *", CHATHAM, "2026-04-04T13:00:00Z", 8) == [
        utc("2026-04-04T13:15:00Z"),  # 03:00 CHADT, first pass
        utc("2026-04-04T13:30:00Z"),  # 03:15 CHADT
        utc("2026-04-04T13:45:00Z"),  # 03:30 CHADT; 03:45 CHADT is already 02:45 CHAST
        utc("2026-04-04T14:15:00Z"),  # 03:00 CHAST, second pass
        utc("2026-04-04T14:30:00Z"),  # 03:15 CHAST
        utc("2026-04-04T14:45:00Z"),  # 03:30 CHAST
        utc("2026-04-04T15:00:00Z"),  # 03:45 CHAST
        utc("2026-04-05T14:15:00Z"),  # 03:00 CHAST, the next day
    ]


def test_chatham_next_slot_after_the_first_pass_is_found_on_the_second() -> None:
    # Repeated next_after, as the trigger advances a job, must not loop in the fall-back.
    assert chain("*/15 3 * * *", CHATHAM, "2026-04-04T13:40:00Z", 3) == [
        utc("2026-04-04T13:45:00Z"),  # 03:30 CHADT
        utc("2026-04-04T14:15:00Z"),  # 03:00 CHAST
        utc("2026-04-04T14:30:00Z"),  # 03:15 CHAST
    ]


def test_chatham_every_15_minutes_in_hour_3_skips_the_spring_gap() -> None:
    assert fires("*/15 3 * * *", CHATHAM, "2026-09-26T13:00:00Z", 3) == [
        utc("2026-09-26T14:00:00Z"),  # 03:45 CHADT: 03:00 to 03:30 do not exist
        utc("2026-09-27T13:15:00Z"),  # 03:00 CHADT, the next day
        utc("2026-09-27T13:30:00Z"),  # 03:15 CHADT
    ]


def test_chatham_fixed_time_job_in_spring_gap_runs_once_right_after_it() -> None:
    assert fires("0 3 * * *", CHATHAM, "2026-09-26T13:00:00Z", 2) == [
        utc("2026-09-26T14:00:00Z"),  # 03:00 does not exist: 03:45 CHADT, right after the gap
        utc("2026-09-27T13:15:00Z"),  # 03:00 CHADT
    ]


# -- intervals are elapsed time --------------------------------------------------------------


def test_hourly_interval_across_berlin_spring_forward_stays_3600_seconds_apart() -> None:
    # Anchored at 01:00 CET given as Berlin local time; slots are counted in UTC.
    every = Interval(
        timedelta(hours=1), anchor=datetime(2026, 3, 29, 1, 0, tzinfo=ZoneInfo(BERLIN))
    )
    first = every.first_slot(utc("2026-03-29T00:10:00Z"))
    second = every.next_after(first)
    third = every.next_after(second) if second is not None else None
    assert [first, second, third] == [
        utc("2026-03-29T01:00:00Z"),  # 03:00 CEST, one elapsed hour after 01:00 CET
        utc("2026-03-29T02:00:00Z"),  # 04:00 CEST (01:00 CET + 2 h on the wall clock is
        #                               03:00 CEST, the previous slot again)
        utc("2026-03-29T03:00:00Z"),
    ]


def test_hourly_interval_across_berlin_fall_back_stays_3600_seconds_apart() -> None:
    every = Interval(timedelta(hours=1), anchor=utc("2026-10-24T23:00:00Z"))
    slots = [every.first_slot(utc("2026-10-24T23:30:00Z"))]
    for _ in range(3):
        nxt = every.next_after(slots[-1])
        assert nxt is not None
        slots.append(nxt)
    assert slots == [
        utc("2026-10-25T00:00:00Z"),  # 02:00 CEST, first pass
        utc("2026-10-25T01:00:00Z"),  # 02:00 CET, second pass
        utc("2026-10-25T02:00:00Z"),  # 03:00 CET
        utc("2026-10-25T03:00:00Z"),
    ]
    assert {b - a for a, b in pairwise(slots)} == {timedelta(seconds=3600)}


def test_daily_interval_moves_an_hour_on_the_wall_clock_across_spring_forward() -> None:
    # Every 24 h from 09:00 CET: the next slot is 24 elapsed hours later, 10:00 CEST.
    every = Interval(timedelta(days=1), anchor=utc("2026-03-28T08:00:00Z"))
    assert every.next_after(utc("2026-03-28T08:00:00Z")) == utc("2026-03-29T08:00:00Z")
