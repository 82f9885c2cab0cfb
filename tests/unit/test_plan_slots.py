"""plan_slots: the fate of every slot between a job's next_run_at and now.

A slot no older than the grace is on time; older slots have misfired and follow the
misfire policy (skip, once, all); then the overlap policy (allow, forbid, replace) thins
what is left. Every expectation is worked out by hand.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tickwork.job import (
    MAX_SLOT_SCAN,
    MisfirePolicy,
    OverlapPolicy,
    SlotPlan,
    SlotRange,
    plan_slots,
)
from tickwork.schedule import Cron, Interval, Once, Schedule

MINUTELY = Cron("* * * * *")
GRACE = timedelta(seconds=60)


def utc(text: str) -> datetime:
    """A literal UTC instant, e.g. ``utc("2026-03-29T01:00:00Z")``."""
    value = datetime.fromisoformat(text)
    assert value.utcoffset() == timedelta(0), text
    return value


def minutes(first: str, last: str) -> list[datetime]:
    start, end = utc(first), utc(last)
    return [
        start + timedelta(minutes=i) for i in range(int((end - start) / timedelta(minutes=1)) + 1)
    ]


def plan(
    due: str,
    now: str,
    *,
    schedule: Schedule = MINUTELY,
    misfire: MisfirePolicy = MisfirePolicy.ONCE,
    grace: timedelta = GRACE,
    overlap: OverlapPolicy = OverlapPolicy.ALLOW,
    has_unfinished: bool = False,
    misfire_limit: int = 100,
) -> SlotPlan:
    return plan_slots(
        schedule,
        utc(due),
        utc(now),
        misfire=misfire,
        grace=grace,
        overlap=overlap,
        has_unfinished=has_unfinished,
        misfire_limit=misfire_limit,
    )


# -- on time ---------------------------------------------------------------------------------


def test_slot_not_yet_due_plans_nothing_and_keeps_next_run_at() -> None:
    assert plan("2026-05-04T10:05:00Z", "2026-05-04T10:00:00Z") == SlotPlan(
        [], [], None, utc("2026-05-04T10:05:00Z"), False
    )


def test_due_slot_runs_and_the_job_advances_to_the_next_slot() -> None:
    result = plan("2026-05-04T10:00:00Z", "2026-05-04T10:00:00.300Z")
    assert result.run_slots == [utc("2026-05-04T10:00:00Z")]
    assert result.skipped == []
    assert result.next_run_at == utc("2026-05-04T10:01:00Z")


def test_slot_exactly_grace_old_is_still_on_time() -> None:
    result = plan("2026-05-04T10:00:00Z", "2026-05-04T10:01:00Z", misfire=MisfirePolicy.SKIP)
    assert result.run_slots == minutes("2026-05-04T10:00:00Z", "2026-05-04T10:01:00Z")
    assert result.skipped == []


def test_slot_a_microsecond_older_than_grace_has_misfired() -> None:
    result = plan("2026-05-04T10:00:00Z", "2026-05-04T10:01:00.000001Z", misfire=MisfirePolicy.SKIP)
    assert result.run_slots == [utc("2026-05-04T10:01:00Z")]
    late = utc("2026-05-04T10:00:00Z")
    assert result.skipped == [SlotRange(late, late, 1, "misfire")]


# -- misfire: the docstring's outage (per-minute job down 09:00:30 -> 10:00:10) ---------------


def test_misfire_once_coalesces_the_outage_into_its_latest_slot() -> None:
    result = plan("2026-05-04T09:01:00Z", "2026-05-04T10:00:10Z", misfire=MisfirePolicy.ONCE)
    # 09:01 ... 09:59 misfired (59): 09:59 runs, 58 coalesced; 10:00 is 10 s late: on time.
    assert result.run_slots == [utc("2026-05-04T09:59:00Z"), utc("2026-05-04T10:00:00Z")]
    assert result.skipped == [
        SlotRange(utc("2026-05-04T09:01:00Z"), utc("2026-05-04T09:58:00Z"), 58, "coalesced")
    ]
    assert result.coalesced_into == utc("2026-05-04T09:59:00Z")
    assert result.next_run_at == utc("2026-05-04T10:01:00Z")
    assert not result.cancel_unfinished


def test_misfire_skip_runs_only_the_on_time_slot() -> None:
    result = plan("2026-05-04T09:01:00Z", "2026-05-04T10:00:10Z", misfire=MisfirePolicy.SKIP)
    assert result.run_slots == [utc("2026-05-04T10:00:00Z")]
    assert result.skipped == [
        SlotRange(utc("2026-05-04T09:01:00Z"), utc("2026-05-04T09:59:00Z"), 59, "misfire")
    ]
    assert result.coalesced_into is None
    assert result.next_run_at == utc("2026-05-04T10:01:00Z")


def test_misfire_all_runs_every_missed_slot_within_the_limit() -> None:
    result = plan("2026-05-04T09:01:00Z", "2026-05-04T10:00:10Z", misfire=MisfirePolicy.ALL)
    assert result.run_slots == minutes("2026-05-04T09:01:00Z", "2026-05-04T10:00:00Z")
    assert result.skipped == []


def test_misfire_all_runs_the_oldest_up_to_the_limit_and_skips_the_rest() -> None:
    result = plan(
        "2026-05-04T09:01:00Z",
        "2026-05-04T10:00:10Z",
        misfire=MisfirePolicy.ALL,
        misfire_limit=10,
    )
    assert result.run_slots == [
        *minutes("2026-05-04T09:01:00Z", "2026-05-04T09:10:00Z"),
        utc("2026-05-04T10:00:00Z"),
    ]
    assert result.skipped == [
        SlotRange(utc("2026-05-04T09:11:00Z"), utc("2026-05-04T09:59:00Z"), 49, "misfire")
    ]


def test_misfire_once_with_a_single_late_slot_coalesces_nothing() -> None:
    result = plan("2026-05-04T09:58:00Z", "2026-05-04T09:59:30Z")
    assert result.run_slots == [utc("2026-05-04T09:58:00Z"), utc("2026-05-04T09:59:00Z")]
    assert result.skipped == []
    assert result.coalesced_into is None


def test_one_off_job_late_beyond_grace_still_runs_once_by_default() -> None:
    result = plan(
        "2026-05-04T09:00:00Z",
        "2026-05-04T12:00:00Z",
        schedule=Once(at=utc("2026-05-04T09:00:00Z")),
    )
    assert result.run_slots == [utc("2026-05-04T09:00:00Z")]
    assert result.next_run_at is None


def test_one_off_job_late_beyond_grace_under_skip_never_runs_and_ends() -> None:
    result = plan(
        "2026-05-04T09:00:00Z",
        "2026-05-04T12:00:00Z",
        schedule=Once(at=utc("2026-05-04T09:00:00Z")),
        misfire=MisfirePolicy.SKIP,
    )
    assert result.run_slots == []
    late = utc("2026-05-04T09:00:00Z")
    assert result.skipped == [SlotRange(late, late, 1, "misfire")]
    assert result.next_run_at is None


# -- overlap ---------------------------------------------------------------------------------


def test_overlap_forbid_skips_the_slot_while_a_run_is_unfinished() -> None:
    result = plan(
        "2026-05-04T10:00:00Z",
        "2026-05-04T10:00:05Z",
        overlap=OverlapPolicy.FORBID,
        has_unfinished=True,
    )
    slot = utc("2026-05-04T10:00:00Z")
    assert result.run_slots == []
    assert result.skipped == [SlotRange(slot, slot, 1, "overlap")]
    assert result.next_run_at == utc("2026-05-04T10:01:00Z")


def test_overlap_forbid_runs_only_the_first_of_several_due_slots() -> None:
    result = plan(
        "2026-05-04T10:00:00Z",
        "2026-05-04T10:02:00Z",
        grace=timedelta(minutes=10),
        overlap=OverlapPolicy.FORBID,
    )
    assert result.run_slots == [utc("2026-05-04T10:00:00Z")]
    assert result.skipped == [
        SlotRange(utc("2026-05-04T10:01:00Z"), utc("2026-05-04T10:02:00Z"), 2, "overlap")
    ]


def test_overlap_forbid_drops_the_coalescing_run_when_it_is_blocked() -> None:
    result = plan(
        "2026-05-04T09:01:00Z",
        "2026-05-04T10:00:10Z",
        overlap=OverlapPolicy.FORBID,
        has_unfinished=True,
    )
    assert result.run_slots == []
    assert result.coalesced_into is None
    assert result.skipped[-1] == SlotRange(
        utc("2026-05-04T09:59:00Z"), utc("2026-05-04T10:00:00Z"), 2, "overlap"
    )


def test_overlap_allow_runs_every_due_slot_even_with_an_unfinished_run() -> None:
    result = plan(
        "2026-05-04T10:00:00Z",
        "2026-05-04T10:02:00Z",
        grace=timedelta(minutes=10),
        has_unfinished=True,
    )
    assert result.run_slots == minutes("2026-05-04T10:00:00Z", "2026-05-04T10:02:00Z")
    assert not result.cancel_unfinished


def test_overlap_replace_runs_the_latest_slot_and_cancels_the_unfinished_run() -> None:
    result = plan(
        "2026-05-04T10:00:00Z",
        "2026-05-04T10:02:00Z",
        grace=timedelta(minutes=10),
        overlap=OverlapPolicy.REPLACE,
        has_unfinished=True,
    )
    assert result.run_slots == [utc("2026-05-04T10:02:00Z")]
    assert result.skipped == [
        SlotRange(utc("2026-05-04T10:00:00Z"), utc("2026-05-04T10:01:00Z"), 2, "replaced")
    ]
    assert result.cancel_unfinished


def test_overlap_replace_cancels_nothing_when_nothing_is_unfinished() -> None:
    result = plan("2026-05-04T10:00:00Z", "2026-05-04T10:00:01Z", overlap=OverlapPolicy.REPLACE)
    assert result.run_slots == [utc("2026-05-04T10:00:00Z")]
    assert not result.cancel_unfinished


# -- very long outages -----------------------------------------------------------------------

SECONDLY = Interval(timedelta(seconds=1), anchor=utc("2026-05-04T00:00:00Z"))
# A day down: 86,400 missed slots, of which the first MAX_SLOT_SCAN (10,000) are counted.
DAY_LATER = "2026-05-05T00:00:00.500Z"
LAST_COUNTED = utc("2026-05-04T02:46:39Z")  # slot 10,000: 00:00:00 + 9,999 s


def test_long_outage_counts_a_bounded_number_of_slots_and_says_there_were_more() -> None:
    assert MAX_SLOT_SCAN == 10_000
    result = plan("2026-05-04T00:00:00Z", DAY_LATER, schedule=SECONDLY, misfire=MisfirePolicy.SKIP)
    assert result.run_slots == []
    assert result.skipped == [
        SlotRange(utc("2026-05-04T00:00:00Z"), LAST_COUNTED, 10_000, "misfire", more=True)
    ]
    assert result.next_run_at == utc("2026-05-05T00:00:01Z")


def test_long_outage_under_once_runs_one_slot_and_coalesces_at_least_the_counted_rest() -> None:
    result = plan("2026-05-04T00:00:00Z", DAY_LATER, schedule=SECONDLY)
    assert result.run_slots == [LAST_COUNTED]
    assert result.skipped == [
        SlotRange(
            utc("2026-05-04T00:00:00Z"),
            utc("2026-05-04T02:46:38Z"),
            9_999,
            "coalesced",
            more=True,
        )
    ]
    assert result.next_run_at == utc("2026-05-05T00:00:01Z")


def test_long_outage_under_all_runs_the_limit_and_skips_at_least_the_counted_rest() -> None:
    result = plan("2026-05-04T00:00:00Z", DAY_LATER, schedule=SECONDLY, misfire=MisfirePolicy.ALL)
    assert len(result.run_slots) == 100
    assert result.run_slots[-1] == utc("2026-05-04T00:01:39Z")
    assert result.skipped == [
        SlotRange(utc("2026-05-04T00:01:40Z"), LAST_COUNTED, 9_900, "misfire", more=True)
    ]


def test_long_outage_under_all_with_a_limit_above_the_scan_never_counts_negative() -> None:
    result = plan(
        "2026-05-04T00:00:00Z",
        DAY_LATER,
        schedule=SECONDLY,
        misfire=MisfirePolicy.ALL,
        misfire_limit=20_000,
    )
    assert len(result.run_slots) == 10_000
    first_uncounted = utc("2026-05-04T02:46:40Z")
    assert result.skipped == [SlotRange(first_uncounted, first_uncounted, 1, "misfire", more=True)]


def test_month_long_outage_of_a_per_minute_cron_job_resumes_after_now() -> None:
    result = plan("2026-05-01T00:00:00Z", "2026-05-31T00:00:30Z", misfire=MisfirePolicy.SKIP)
    assert result.skipped[0].count == 10_000
    assert result.skipped[0].more
    assert result.next_run_at == utc("2026-05-31T00:01:00Z")


def test_missed_slots_blocked_by_an_unfinished_run_are_recorded_as_overlap_not_coalesced() -> None:
    every_minute = Cron("* * * * *")
    due = datetime(2026, 12, 1, 9, 1, tzinfo=UTC)
    now = datetime(2026, 12, 1, 9, 10, 30, tzinfo=UTC)
    plan = plan_slots(
        every_minute,
        due,
        now,
        misfire=MisfirePolicy.ONCE,
        grace=timedelta(seconds=60),
        overlap=OverlapPolicy.FORBID,
        has_unfinished=True,
    )
    assert plan.run_slots == []
    assert plan.coalesced_into is None
    assert {r.fate for r in plan.skipped} == {"overlap"}
    assert sum(r.count for r in plan.skipped) == 10
