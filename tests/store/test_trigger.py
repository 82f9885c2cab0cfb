"""Conformance: triggering due slots into runs, once per slot, fenced by the leader epoch."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tickwork.errors import LeadershipLost
from tickwork.job import (
    DEFAULT_MISFIRE_LIMIT,
    ONE_OFF_LEAD,
    JobSpec,
    JobState,
    MisfirePolicy,
    OverlapPolicy,
    RunState,
)
from tickwork.retry import RetryPolicy
from tickwork.schedule import Cron, Interval, Once
from tickwork.store import Store, open_store
from tickwork.store.base import LeaseStatus, SlotFate

Children = Callable[..., list[dict[str, Any]]]


def every(seconds: float, anchor: datetime, **fields: Any) -> JobSpec:
    fields.setdefault("task", "tests.every")
    return JobSpec(schedule=Interval(timedelta(seconds=seconds), anchor=anchor), **fields)


def lead(store: Store, now: datetime, node: str = "test-leader") -> int:
    lease = store.acquire_leadership(node, timedelta(days=30), now=now)
    assert lease is not None
    return lease.epoch


def skip_rows(skips: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((s.fate, s.first_slot, s.last_slot, s.count) for s in skips)


def test_due_recurring_job_gets_a_queued_run_and_moves_to_its_next_slot(
    store: Store, t0: datetime
) -> None:
    job = store.submit(every(60, t0, queue="q", priority=4, args={"x": 1}), now=t0).job
    assert job.next_run_at == t0 + timedelta(seconds=60)
    epoch = lead(store, t0)

    result = store.trigger(epoch, now=t0 + timedelta(seconds=61))

    assert len(result.runs) == 1
    run = result.runs[0]
    assert run.job_id == job.id
    assert run.state is RunState.QUEUED
    assert run.scheduled_for == t0 + timedelta(seconds=60)
    assert run.run_at == run.scheduled_for
    assert (run.queue, run.priority, run.args, run.attempt) == ("q", 4, {"x": 1}, 1)
    assert result.jobs_advanced == 1
    assert result.batch_full is False
    assert result.next_due_at == t0 + timedelta(seconds=120)
    after = store.get_job(job.id)
    assert after.next_run_at == t0 + timedelta(seconds=120)
    assert after.state is JobState.ACTIVE
    assert store.get_run(run.id) == run


def test_one_trigger_copies_each_job_into_its_run_whatever_the_schedule_kind(
    store: Store, t0: datetime
) -> None:
    copied: dict[str, Any] = {
        "tenant": "acme",
        "queue": "q",
        "priority": -3,
        "retry": RetryPolicy(max_attempts=7),
        "timeout": timedelta(seconds=42.5),
        "args": {"nested": [1, "two", None]},
    }
    specs = [
        every(60, t0, task="t.interval", **copied),
        JobSpec(task="t.cron", schedule=Cron("* * * * *"), **copied),
        JobSpec(task="t.once", schedule=Once(at=t0 + timedelta(seconds=30)), **copied),
    ]
    jobs = [store.submit(spec, now=t0).job for spec in specs]

    # At t0 + 60 s exactly: the interval's first slot is due, and the cron job's first slot
    # (the first whole minute after t0) but never its second, wherever t0 falls in a minute.
    result = store.trigger(lead(store, t0), now=t0 + timedelta(seconds=60))

    assert sorted(r.task for r in result.runs) == ["t.cron", "t.interval", "t.once"]
    for run in result.runs:
        assert run == store.get_run(run.id)
        assert (run.tenant, run.queue, run.priority, run.max_attempts, run.timeout) == (
            "acme",
            "q",
            -3,
            7,
            timedelta(seconds=42.5),
        )
        assert run.args == {"nested": [1, "two", None]}
    after = {j.task: store.get_job(j.id) for j in jobs}
    assert after["t.interval"].next_run_at == t0 + timedelta(seconds=120)
    assert after["t.cron"].next_run_at == jobs[1].schedule.next_after(t0 + timedelta(seconds=60))
    assert after["t.once"].state is JobState.QUEUED  # it reads as its new run


def test_job_not_yet_due_is_not_triggered(store: Store, t0: datetime) -> None:
    job = store.submit(every(60, t0), now=t0).job
    result = store.trigger(lead(store, t0), now=t0 + timedelta(seconds=59))
    assert result.runs == []
    assert result.jobs_advanced == 0
    assert result.next_due_at == t0 + timedelta(seconds=60)
    assert store.get_job(job.id).next_run_at == t0 + timedelta(seconds=60)


def test_a_slot_is_triggered_once_however_often_trigger_is_called(
    store: Store, t0: datetime
) -> None:
    job = store.submit(every(60, t0), now=t0).job
    epoch = lead(store, t0)
    first = store.trigger(epoch, now=t0 + timedelta(seconds=61))
    second = store.trigger(epoch, now=t0 + timedelta(seconds=61))
    third = store.trigger(epoch, now=t0 + timedelta(seconds=62))
    assert len(first.runs) == 1
    assert second.runs == third.runs == []
    assert len(store.list_runs(job_id=job.id).items) == 1


def test_future_one_off_job_is_triggered_when_due_and_completes(store: Store, t0: datetime) -> None:
    at = t0 + timedelta(seconds=30)
    job = store.submit(JobSpec(task="t", schedule=Once(at=at)), now=t0).job
    epoch = lead(store, t0)
    assert store.trigger(epoch, now=t0 + timedelta(seconds=29)).runs == []
    result = store.trigger(epoch, now=t0 + timedelta(seconds=31))
    assert [(r.job_id, r.scheduled_for) for r in result.runs] == [(job.id, at)]
    after = store.get_job(job.id)
    assert after.state is JobState.QUEUED
    assert after.next_run_at is None
    assert store.trigger(epoch, now=t0 + timedelta(hours=1)).runs == []


def test_trigger_works_in_batches_earliest_due_first(store: Store, t0: datetime) -> None:
    # Five jobs due at t0+10, +20, ... +50.
    jobs = [
        store.submit(
            JobSpec(task=f"t{i}", schedule=Once(at=t0 + timedelta(seconds=10 * (5 - i)))),
            now=t0,
        ).job
        for i in range(5)
    ]
    by_due = sorted(jobs, key=lambda j: j.next_run_at or t0)
    epoch = lead(store, t0)
    now = t0 + timedelta(minutes=1)

    first = store.trigger(epoch, limit=2, now=now)
    second = store.trigger(epoch, limit=2, now=now)
    third = store.trigger(epoch, limit=2, now=now)

    assert [r.job_id for r in first.runs] == [j.id for j in by_due[:2]]
    assert first.batch_full is True
    assert [r.job_id for r in second.runs] == [j.id for j in by_due[2:4]]
    assert second.batch_full is True
    assert [r.job_id for r in third.runs] == [by_due[4].id]
    assert third.batch_full is False
    assert third.next_due_at is None
    assert len(store.list_runs().items) == 5


def test_next_due_at_is_the_earliest_active_job(store: Store, t0: datetime) -> None:
    assert store.next_due_at() is None
    later = store.submit(JobSpec(task="t", schedule=Once(at=t0 + timedelta(hours=2))), now=t0)
    paused = store.submit(JobSpec(task="t", schedule=Once(at=t0 + timedelta(hours=1))), now=t0)
    store.pause_job(paused.job.id, now=t0)
    # A one-off is triggered ONE_OFF_LEAD ahead of its time: the trigger has work then.
    assert store.next_due_at() == t0 + timedelta(hours=2) - ONE_OFF_LEAD
    assert later.job.next_run_at == t0 + timedelta(hours=2)
    sooner = store.submit(every(60, t0 + timedelta(minutes=30)), now=t0)
    assert store.next_due_at() == sooner.job.next_run_at == t0 + timedelta(minutes=30)


# -- fencing by epoch --------------------------------------------------------------------------


def test_stale_epoch_raises_leadership_lost_and_triggers_nothing(
    store: Store, t0: datetime
) -> None:
    job = store.submit(every(60, t0), now=t0).job
    old = store.acquire_leadership("node-a", timedelta(seconds=10), now=t0)
    assert old is not None
    new = store.acquire_leadership("node-b", timedelta(seconds=60), now=t0 + timedelta(seconds=20))
    assert new is not None
    assert new.epoch > old.epoch

    with pytest.raises(LeadershipLost):
        store.trigger(old.epoch, now=t0 + timedelta(seconds=61))

    assert store.list_runs().items == []
    assert store.get_job(job.id) == job
    assert len(store.trigger(new.epoch, now=t0 + timedelta(seconds=61)).runs) == 1


def test_leadership_lost_from_a_stale_trigger_does_not_name_the_new_holder_as_the_loser(
    store: Store, t0: datetime
) -> None:
    old = store.acquire_leadership("node-a", timedelta(seconds=10), now=t0)
    assert old is not None
    new = store.acquire_leadership("node-b", timedelta(seconds=60), now=t0 + timedelta(seconds=20))
    assert new is not None

    with pytest.raises(LeadershipLost) as lost:
        store.trigger(old.epoch, now=t0 + timedelta(seconds=30))

    assert lost.value.node_id != "node-b"
    assert lost.value.epoch == old.epoch
    assert lost.value.holder == "node-b"
    assert "'node-b' no longer leads" not in str(lost.value)


def test_expired_leader_epoch_triggers_nothing(store: Store, t0: datetime) -> None:
    job = store.submit(every(60, t0), now=t0).job
    lease = store.acquire_leadership("node-a", timedelta(seconds=30), now=t0)
    assert lease is not None
    with pytest.raises(LeadershipLost):
        store.trigger(lease.epoch, now=t0 + timedelta(seconds=61))
    assert store.list_runs().items == []
    assert store.get_job(job.id) == job


def test_epoch_nobody_holds_triggers_nothing(store: Store, t0: datetime) -> None:
    store.submit(every(60, t0), now=t0)
    with pytest.raises(LeadershipLost):
        store.trigger(12345, now=t0 + timedelta(seconds=61))
    lease = store.acquire_leadership("node-a", timedelta(minutes=5), now=t0)
    assert lease is not None
    with pytest.raises(LeadershipLost):
        store.trigger(lease.epoch + 1, now=t0 + timedelta(seconds=61))
    assert store.list_runs().items == []


def test_resigned_leader_epoch_triggers_nothing(store: Store, t0: datetime) -> None:
    store.submit(every(60, t0), now=t0)
    lease = store.acquire_leadership("node-a", timedelta(minutes=5), now=t0)
    assert lease is not None
    store.resign_leadership("node-a", lease.epoch)
    with pytest.raises(LeadershipLost):
        store.trigger(lease.epoch, now=t0 + timedelta(seconds=61))
    assert store.list_runs().items == []


# -- once per slot under concurrency ------------------------------------------------------------

RACE_JOBS = 30
RACE_SLOTS = 3


def due_race_jobs(store: Store, t0: datetime) -> list[int]:
    """RACE_JOBS jobs, each with RACE_SLOTS due slots that all get a run (misfire 'all')."""
    anchor = t0 - timedelta(seconds=60 * RACE_SLOTS)
    return [
        store.submit(
            every(
                60,
                anchor,
                task=f"race{i}",
                misfire=MisfirePolicy.ALL,
                misfire_grace=timedelta(hours=1),
            ),
            now=anchor,
        ).job.id
        for i in range(RACE_JOBS)
    ]


def assert_one_run_per_slot(store: Store, job_ids: list[int], t0: datetime) -> None:
    runs = []
    cursor = None
    while True:
        page = store.list_runs(after=cursor, limit=1000)
        runs.extend(page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    per_slot = Counter((run.job_id, run.scheduled_for) for run in runs)
    doubled = {key: n for key, n in per_slot.items() if n > 1}
    assert doubled == {}
    expected = {
        (job_id, t0 - timedelta(seconds=60 * k)) for job_id in job_ids for k in range(RACE_SLOTS)
    }
    assert set(per_slot) == expected
    for job_id in job_ids:
        assert store.get_job(job_id).next_run_at == t0 + timedelta(seconds=60)


def test_threads_triggering_one_epoch_create_one_run_per_slot(
    store: Store, store_url: str, t0: datetime
) -> None:
    job_ids = due_race_jobs(store, t0)
    epoch = lead(store, t0)
    threads = 4
    barrier = threading.Barrier(threads)
    created: list[int] = []
    errors: list[BaseException] = []

    def trigger() -> None:
        own = open_store(store_url)
        try:
            barrier.wait()
            while True:
                result = own.trigger(epoch, limit=7, now=t0)
                created.extend(run.id for run in result.runs)
                if not result.runs and not result.batch_full:
                    break
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()

    workers = [threading.Thread(target=trigger) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert len(created) == len(set(created)) == RACE_JOBS * RACE_SLOTS
    assert_one_run_per_slot(store, job_ids, t0)


def test_processes_triggering_one_epoch_create_one_run_per_slot(
    store: Store, store_url: str, t0: datetime, children: Children
) -> None:
    job_ids = due_race_jobs(store, t0)
    epoch = lead(store, t0)
    results = children(
        [
            {
                "op": "trigger_all",
                "url": store_url,
                "epoch": epoch,
                "limit": 7,
                "now": t0.isoformat(),
            }
            for _ in range(4)
        ]
    )
    assert [r["error"] for r in results] == [None] * 4
    created = [run[0] for r in results for run in r["runs"]]
    assert len(created) == len(set(created)) == RACE_JOBS * RACE_SLOTS
    assert_one_run_per_slot(store, job_ids, t0)


# -- misfire and overlap policies ---------------------------------------------------------------


def outage_job(store: Store, t0: datetime, **fields: Any) -> tuple[int, datetime]:
    """A per-minute job whose slots A+60 ... A+600 (= t0) are due at t0 + 5 s, grace 10 s:
    nine slots are late, the last one (5 s old) is on time."""
    anchor = t0 - timedelta(minutes=10)
    fields.setdefault("misfire_grace", timedelta(seconds=10))
    job = store.submit(every(60, anchor, **fields), now=anchor).job
    assert job.next_run_at == anchor + timedelta(seconds=60)
    return job.id, anchor


def test_misfire_skip_runs_only_the_on_time_slot(store: Store, t0: datetime) -> None:
    job_id, a = outage_job(store, t0, misfire=MisfirePolicy.SKIP)
    result = store.trigger(lead(store, t0), now=t0 + timedelta(seconds=5))
    assert [r.scheduled_for for r in result.runs] == [t0]
    expected = [(SlotFate.MISFIRE, a + timedelta(seconds=60), a + timedelta(seconds=540), 9)]
    assert skip_rows(result.skipped) == expected
    assert skip_rows(store.slot_skips(job_id)) == expected
    assert all(s.job_id == job_id for s in store.slot_skips(job_id))
    assert store.get_job(job_id).next_run_at == t0 + timedelta(seconds=60)


def test_misfire_once_folds_late_slots_into_one_run(store: Store, t0: datetime) -> None:
    job_id, a = outage_job(store, t0, misfire=MisfirePolicy.ONCE)
    result = store.trigger(lead(store, t0), now=t0 + timedelta(seconds=5))
    assert sorted(r.scheduled_for for r in result.runs) == [a + timedelta(seconds=540), t0]
    coalesced_into = next(r.id for r in result.runs if r.scheduled_for != t0)
    skips = store.slot_skips(job_id)
    expected = [(SlotFate.COALESCED, a + timedelta(seconds=60), a + timedelta(seconds=480), 8)]
    assert skip_rows(skips) == expected
    assert skips[0].run_id == coalesced_into
    assert store.get_job(job_id).next_run_at == t0 + timedelta(seconds=60)


def test_misfire_all_runs_every_late_slot(store: Store, t0: datetime) -> None:
    job_id, a = outage_job(store, t0, misfire=MisfirePolicy.ALL)
    result = store.trigger(lead(store, t0), now=t0 + timedelta(seconds=5))
    assert sorted(r.scheduled_for for r in result.runs) == [
        a + timedelta(seconds=60 * k) for k in range(1, 11)
    ]
    assert all(r.run_at == r.scheduled_for for r in result.runs)
    assert store.slot_skips(job_id) == []


def test_misfire_all_runs_at_most_the_limit_and_records_the_rest(
    store: Store, t0: datetime
) -> None:
    late = DEFAULT_MISFIRE_LIMIT + 20
    anchor = t0 - timedelta(seconds=late)
    job = store.submit(
        every(1, anchor, misfire=MisfirePolicy.ALL, misfire_grace=timedelta(0)), now=anchor
    ).job
    # Slots anchor+1 s ... t0+30 s (late + 30 of them) are all late at t0 + 30.5 s.
    now = t0 + timedelta(seconds=30, milliseconds=500)
    result = store.trigger(lead(store, t0), now=now)
    slots = sorted(r.scheduled_for for r in result.runs)
    assert slots == [anchor + timedelta(seconds=k) for k in range(1, DEFAULT_MISFIRE_LIMIT + 1)]
    skips = store.slot_skips(job.id)
    assert [(s.fate, s.count) for s in skips] == [
        (SlotFate.MISFIRE, late + 30 - DEFAULT_MISFIRE_LIMIT)
    ]
    assert skips[0].last_slot == t0 + timedelta(seconds=30)
    assert store.get_job(job.id).next_run_at == t0 + timedelta(seconds=31)


def test_overlap_forbid_skips_a_slot_while_the_previous_run_is_unfinished(
    store: Store, t0: datetime
) -> None:
    job = store.submit(every(60, t0, overlap=OverlapPolicy.FORBID), now=t0).job
    epoch = lead(store, t0)
    first = store.trigger(epoch, now=t0 + timedelta(seconds=60)).runs
    assert len(first) == 1

    blocked = store.trigger(epoch, now=t0 + timedelta(seconds=120))
    assert blocked.runs == []
    slot = t0 + timedelta(seconds=120)
    assert skip_rows(blocked.skipped) == [(SlotFate.OVERLAP, slot, slot, 1)]
    assert skip_rows(store.slot_skips(job.id)) == [(SlotFate.OVERLAP, slot, slot, 1)]
    assert store.get_job(job.id).next_run_at == t0 + timedelta(seconds=180)

    claimed = store.claim("w", limit=1, now=t0 + timedelta(seconds=121))
    store.complete(claimed[0].id, claimed[0].fencing_token, now=t0 + timedelta(seconds=122))
    after = store.trigger(epoch, now=t0 + timedelta(seconds=180))
    assert [r.scheduled_for for r in after.runs] == [t0 + timedelta(seconds=180)]


def test_overlap_forbid_runs_only_the_first_of_several_due_slots(
    store: Store, t0: datetime
) -> None:
    anchor = t0 - timedelta(seconds=180)
    job = store.submit(
        every(
            60,
            anchor,
            overlap=OverlapPolicy.FORBID,
            misfire=MisfirePolicy.ALL,
            misfire_grace=timedelta(hours=1),
        ),
        now=anchor,
    ).job
    result = store.trigger(lead(store, t0), now=t0)
    assert [r.scheduled_for for r in result.runs] == [anchor + timedelta(seconds=60)]
    assert skip_rows(store.slot_skips(job.id)) == [
        (SlotFate.OVERLAP, anchor + timedelta(seconds=120), t0, 2)
    ]


def test_overlap_replace_cancels_the_unfinished_run_and_runs_the_new_slot(
    store: Store, t0: datetime
) -> None:
    job = store.submit(every(60, t0, overlap=OverlapPolicy.REPLACE), now=t0).job
    epoch = lead(store, t0)
    store.trigger(epoch, now=t0 + timedelta(seconds=60))
    held = store.claim("w", limit=1, now=t0 + timedelta(seconds=61))[0]

    result = store.trigger(epoch, now=t0 + timedelta(seconds=120))

    assert [r.scheduled_for for r in result.runs] == [t0 + timedelta(seconds=120)]
    assert result.cancelled_run_ids == [held.id]
    assert store.get_run(held.id).state is RunState.CANCELLED
    beat = store.heartbeat(held.id, held.fencing_token, now=t0 + timedelta(seconds=121))
    assert beat.status is LeaseStatus.CANCELLED
    states = Counter(r.state for r in store.list_runs(job_id=job.id).items)
    assert states == {RunState.CANCELLED: 1, RunState.QUEUED: 1}


def test_overlap_replace_keeps_only_the_last_of_several_due_slots(
    store: Store, t0: datetime
) -> None:
    anchor = t0 - timedelta(seconds=180)
    job = store.submit(
        every(
            60,
            anchor,
            overlap=OverlapPolicy.REPLACE,
            misfire=MisfirePolicy.ALL,
            misfire_grace=timedelta(hours=1),
        ),
        now=anchor,
    ).job
    result = store.trigger(lead(store, t0), now=t0)
    assert [r.scheduled_for for r in result.runs] == [t0]
    assert result.cancelled_run_ids == []
    assert skip_rows(store.slot_skips(job.id)) == [
        (SlotFate.REPLACED, anchor + timedelta(seconds=60), anchor + timedelta(seconds=120), 2)
    ]


def test_slot_ledger_lists_newest_first(store: Store, t0: datetime) -> None:
    job_id, a = outage_job(store, t0, misfire=MisfirePolicy.SKIP)
    epoch = lead(store, t0)
    store.trigger(epoch, now=t0 + timedelta(seconds=5))  # misfire: A+60 ... A+540
    store.pause_job(job_id, now=t0 + timedelta(seconds=6))
    store.resume_job(job_id, now=t0 + timedelta(seconds=130))  # paused: t0+60, t0+120
    skips = store.slot_skips(job_id)
    assert [(s.fate, s.first_slot, s.count) for s in skips] == [
        (SlotFate.PAUSED, t0 + timedelta(seconds=60), 2),
        (SlotFate.MISFIRE, a + timedelta(seconds=60), 9),
    ]
    assert [s.fate for s in store.slot_skips(job_id, limit=1)] == [SlotFate.PAUSED]


def test_cron_job_moves_to_its_next_fire_time_across_a_dst_change(store: Store) -> None:
    # 09:00 in Berlin is 08:00 UTC in winter (CET) and 07:00 UTC in summer (CEST);
    # the clocks go forward on 2030-03-31.
    created = datetime(2030, 3, 29, 12, 0, tzinfo=UTC)
    spec = JobSpec(task="t", schedule=Cron("0 9 * * *", tz="Europe/Berlin"))
    job = store.submit(spec, now=created).job
    assert job.next_run_at == datetime(2030, 3, 30, 8, 0, tzinfo=UTC)
    epoch = lead(store, created)

    first = store.trigger(epoch, now=datetime(2030, 3, 30, 8, 0, 1, tzinfo=UTC))
    assert [r.scheduled_for for r in first.runs] == [datetime(2030, 3, 30, 8, 0, tzinfo=UTC)]
    assert store.get_job(job.id).next_run_at == datetime(2030, 3, 31, 7, 0, tzinfo=UTC)

    second = store.trigger(epoch, now=datetime(2030, 3, 31, 7, 0, 1, tzinfo=UTC))
    assert [r.scheduled_for for r in second.runs] == [datetime(2030, 3, 31, 7, 0, tzinfo=UTC)]
    assert store.get_job(job.id).next_run_at == datetime(2030, 4, 1, 7, 0, tzinfo=UTC)


def test_late_one_off_job_with_misfire_skip_completes_without_a_run(
    store: Store, t0: datetime
) -> None:
    at = t0 + timedelta(seconds=10)
    spec = JobSpec(
        task="t",
        schedule=Once(at=at),
        misfire=MisfirePolicy.SKIP,
        misfire_grace=timedelta(seconds=30),
    )
    job = store.submit(spec, now=t0).job
    result = store.trigger(lead(store, t0), now=at + timedelta(minutes=5))
    assert result.runs == []
    assert skip_rows(store.slot_skips(job.id)) == [(SlotFate.MISFIRE, at, at, 1)]
    after = store.get_job(job.id)
    # No slot left and no run to read as: finished (explain says why).
    assert (after.state, after.next_run_at) == (JobState.FINISHED, None)


# -- one-off jobs are triggered a moment early (ONE_OFF_LEAD) ------------------------------


def test_a_one_off_job_gets_its_run_a_moment_before_its_time_claimable_only_then(
    store: Store, t0: datetime
) -> None:
    # The run exists before its slot, so a worker waits for the time, not for the trigger:
    # the trigger's wake-up and round trips leave the start lag.
    slot = t0 + timedelta(seconds=10)
    job = store.submit(JobSpec(task="t", schedule=Once(at=slot)), now=t0).job
    epoch = lead(store, t0)
    early = slot - ONE_OFF_LEAD / 2
    assert store.next_due_at() == slot - ONE_OFF_LEAD

    result = store.trigger(epoch, now=early)

    (run,) = result.runs
    assert (run.job_id, run.scheduled_for, run.run_at) == (job.id, slot, slot)
    assert run.state is RunState.QUEUED
    assert store.get_job(job.id).state is JobState.QUEUED
    assert result.skipped == []
    assert store.claim("w", limit=10, now=early) == []  # not before its time
    assert store.next_claimable_at() == slot
    (claimed,) = store.claim("w", limit=10, now=slot)
    assert claimed.id == run.id


def test_a_one_off_job_further_ahead_than_the_lead_is_not_triggered(
    store: Store, t0: datetime
) -> None:
    slot = t0 + timedelta(seconds=10)
    store.submit(JobSpec(task="t", schedule=Once(at=slot)), now=t0)
    epoch = lead(store, t0)

    result = store.trigger(epoch, now=slot - ONE_OFF_LEAD - timedelta(milliseconds=1))

    assert result.runs == []
    assert result.jobs_advanced == 0


def test_a_recurring_job_is_never_triggered_before_its_slot(store: Store, t0: datetime) -> None:
    job = store.submit(every(60, t0), now=t0).job
    slot = t0 + timedelta(seconds=60)
    epoch = lead(store, t0)
    assert store.next_due_at() == slot  # no lead for a recurring job

    assert store.trigger(epoch, now=slot - ONE_OFF_LEAD / 2).runs == []
    (run,) = store.trigger(epoch, now=slot).runs
    assert (run.job_id, run.scheduled_for) == (job.id, slot)


def test_a_one_off_due_with_a_recurring_job_keeps_its_lead(store: Store, t0: datetime) -> None:
    slot = t0 + timedelta(seconds=60)
    for _ in range(3):  # recurring jobs first, so that insertion order cannot pick the one-off
        store.submit(every(60, t0), now=t0)
    store.submit(JobSpec(task="t", schedule=Once(at=slot)), now=t0)

    assert store.next_due_at() == slot - ONE_OFF_LEAD
