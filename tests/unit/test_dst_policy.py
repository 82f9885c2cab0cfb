"""DST policies per cron schedule (``dst_gap``, ``dst_repeat``), as properties over the
transitions of zones with 1 h shifts (Europe/Berlin, America/New_York) and a 30 min one
(Australia/Lord_Howe), for wall-clock and elapsed-time expressions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from itertools import islice

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork import cron
from tickwork.cron import DstGap, DstRepeat
from tickwork.errors import InvalidSchedule
from tickwork.schedule import Cron, from_json

ZONES = ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe")
YEARS = range(2025, 2031)


def changes(tz: str, *, gap: bool) -> list[cron.Transition]:
    found = cron.transitions(
        tz, datetime(YEARS[0], 1, 1, tzinfo=UTC), datetime(YEARS[-1], 12, 31, tzinfo=UTC)
    )
    return [c for c in found if (c.shift > timedelta(0)) == gap]


def wall_minutes_in_gap(change: cron.Transition) -> list[tuple[int, int]]:
    """(hour, minute) of each whole minute that does not exist in the gap."""
    start = change.at.astimezone(timezone(change.before))
    return [
        ((start + timedelta(minutes=k)).hour, (start + timedelta(minutes=k)).minute)
        for k in range(int(change.shift.total_seconds() // 60))
    ]


def repeated_minutes(change: cron.Transition) -> list[tuple[int, int]]:
    """(hour, minute) of each whole minute that happens twice at a fall-back change."""
    start = change.at.astimezone(timezone(change.after))
    return [
        ((start + timedelta(minutes=k)).hour, (start + timedelta(minutes=k)).minute)
        for k in range(int(-change.shift.total_seconds() // 60))
    ]


def runs(schedule: Cron, start: datetime, end: datetime) -> list[datetime]:
    found = []
    for at in schedule.iterate(start):
        if at > end:
            break
        found.append(at)
    return found


zone = st.sampled_from(ZONES)
pick = st.integers(min_value=0, max_value=10_000)


@settings(max_examples=40, deadline=None)
@given(tz=zone, which=pick, minute=pick)
def test_wall_clock_slot_in_a_gap_runs_right_after_it_or_is_skipped(
    tz: str, which: int, minute: int
) -> None:
    gaps = changes(tz, gap=True)
    change = gaps[which % len(gaps)]
    hour, mm = wall_minutes_in_gap(change)[minute % len(wall_minutes_in_gap(change))]
    expr = f"{mm} {hour} * * *"
    window = (change.at - timedelta(hours=6), change.at + timedelta(hours=6))

    after = runs(Cron(expr, tz, dst_gap=DstGap.RUN_AFTER), *window)
    skipped = runs(Cron(expr, tz, dst_gap=DstGap.SKIP), *window)

    assert after == [change.at]  # once, at the first instant after the gap
    assert skipped == []
    # The default is run-after, Debian cron's rule, and equals the plain schedule.
    assert runs(Cron(expr, tz), *window) == after


@settings(max_examples=40, deadline=None)
@given(tz=zone, which=pick, minute=pick)
def test_wall_clock_slot_in_a_repeated_hour_runs_once_or_twice(
    tz: str, which: int, minute: int
) -> None:
    falls = changes(tz, gap=False)
    change = falls[which % len(falls)]
    minutes = repeated_minutes(change)
    hour, mm = minutes[minute % len(minutes)]
    expr = f"{mm} {hour} * * *"
    span = -change.shift
    window = (change.at - timedelta(hours=6), change.at + timedelta(hours=6))

    once = runs(Cron(expr, tz, dst_repeat=DstRepeat.ONCE), *window)
    twice = runs(Cron(expr, tz, dst_repeat=DstRepeat.TWICE), *window)

    assert len(once) == 1
    first = once[0]
    assert change.at - span <= first < change.at  # the first pass
    assert twice == [first, first + span]  # the same wall time, in both passes
    local = [t.astimezone(cron.zone(tz)) for t in twice]
    assert local[0].strftime("%H:%M") == local[1].strftime("%H:%M") == f"{hour:02d}:{mm:02d}"
    assert runs(Cron(expr, tz), *window) == once  # the default: once


@settings(max_examples=30, deadline=None)
@given(tz=zone, which=pick, step=st.sampled_from([1, 5, 10, 15, 30]))
def test_elapsed_schedule_fires_through_both_passes_or_only_the_first(
    tz: str, which: int, step: int
) -> None:
    falls = changes(tz, gap=False)
    change = falls[which % len(falls)]
    span = -change.shift
    expr = f"*/{step} * * * *"
    window = (change.at - timedelta(hours=3), change.at + timedelta(hours=3))

    twice = runs(Cron(expr, tz, dst_repeat=DstRepeat.TWICE), *window)
    once = runs(Cron(expr, tz, dst_repeat=DstRepeat.ONCE), *window)

    second_pass = [t for t in twice if change.at <= t < change.at + span]
    assert second_pass  # every step of 30 min or less meets the repeated span
    assert once == [t for t in twice if t not in second_pass]
    # Nothing is repeated in wall time under 'once': each wall time fires at most once.
    shown = [t.astimezone(cron.zone(tz)).strftime("%Y-%m-%d %H:%M") for t in once]
    assert len(shown) == len(set(shown))
    assert runs(Cron(expr, tz), *window) == twice  # the default: twice


@settings(max_examples=30, deadline=None)
@given(tz=zone, which=pick, step=st.sampled_from([5, 15, 20]))
def test_elapsed_schedule_skips_the_gap_or_runs_once_after_it(
    tz: str, which: int, step: int
) -> None:
    gaps = changes(tz, gap=True)
    change = gaps[which % len(gaps)]
    expr = f"{step // 5} * * * *" if step == 5 else f"*/{step} * * * *"
    window = (change.at - timedelta(hours=3), change.at + timedelta(hours=3))

    skip = runs(Cron(expr, tz, dst_gap=DstGap.SKIP), *window)
    after = runs(Cron(expr, tz, dst_gap=DstGap.RUN_AFTER), *window)

    assert skip == runs(Cron(expr, tz), *window)  # the default for elapsed time
    assert set(skip) <= set(after)
    extra = sorted(set(after) - set(skip))
    assert extra in ([], [change.at])  # at most one run for the whole gap, right after it
    gap_matches = cron._first_in_gap(cron.normalize(expr), change) is not None
    assert (change.at in after) == (gap_matches or change.at in skip)


@pytest.mark.parametrize("tz", ZONES)
def test_policy_is_stored_and_read_back(tz: str) -> None:
    schedule = Cron("30 2 * * *", tz, dst_gap="skip", dst_repeat="twice")  # type: ignore[arg-type]
    assert from_json(schedule.to_json()) == schedule
    assert schedule.to_json()["dst_gap"] == "skip"
    # No policy writes no keys: the schedules of existing jobs read back unchanged.
    assert set(Cron("30 2 * * *", tz).to_json()) == {"kind", "expr", "tz"}


def test_unknown_policy_is_refused_with_its_choices() -> None:
    with pytest.raises(
        InvalidSchedule, match=r"dst_gap must be one of run-after, skip, got 'later'"
    ):
        Cron("0 2 * * *", "Europe/Berlin", dst_gap="later")  # type: ignore[arg-type]
    with pytest.raises(InvalidSchedule, match="dst_repeat must be one of once, twice"):
        Cron("0 2 * * *", "Europe/Berlin", dst_repeat="thrice")  # type: ignore[arg-type]


def test_notes_name_the_date_and_what_the_policy_does() -> None:
    schedule = Cron("30 2 * * *", "Europe/Berlin", dst_gap="skip", dst_repeat="twice")  # type: ignore[arg-type]
    fires = list(islice(schedule.fires(datetime(2026, 3, 28, 12, tzinfo=UTC)), 2))
    assert fires[0].skipped
    assert (
        fires[0].note == "02:30 does not exist on 2026-03-29 (DST starts): skipped (--dst-gap skip)"
    )
    autumn = list(islice(schedule.fires(datetime(2026, 10, 24, tzinfo=UTC)), 3))
    assert [f.at for f in autumn[1:3]] == [
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
    ]
    assert autumn[2].note == (
        "02:30 CET is the second pass of a repeated hour on 2026-10-25 (DST ends): runs again "
        "(--dst-repeat twice)"
    )


def test_warnings_name_each_dst_change_of_the_next_year_the_schedule_meets() -> None:
    now = datetime(2026, 1, 10, tzinfo=UTC)
    found = Cron("30 2 * * *", "America/New_York").dst_warnings(now)
    assert found == [
        "'30 2 * * *' in America/New_York: 02:30 does not exist on 2026-03-08 (DST starts): "
        "runs right after the gap, at 03:00 EDT (--dst-gap run-after)",
    ]  # New York repeats 01:00-01:59, not 02:30
    assert Cron("30 1 * * *", "America/New_York").dst_warnings(now) == [
        "'30 1 * * *' in America/New_York: 01:30 happens twice on 2026-11-01 (DST ends): runs "
        "at this first pass only (--dst-repeat once)",
    ]
    assert Cron("0 9 * * *", "America/New_York").dst_warnings(now) == []  # never touched
    assert Cron("30 2 * * *", "UTC").dst_warnings(now) == []
