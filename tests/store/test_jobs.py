"""Conformance: submitting and scheduling jobs, their lifecycle, reads and tenancy."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.errors import (
    InvalidTransition,
    JobNotFound,
    NotFound,
    RunNotFound,
    ValidationError,
)
from tickwork.job import JobSpec, JobState, MisfirePolicy, OverlapPolicy, RunState
from tickwork.retry import RetryPolicy
from tickwork.schedule import Cron, Interval, Once
from tickwork.store import Store, open_store
from tickwork.store.base import SlotFate

Children = Callable[..., list[dict[str, Any]]]


def one_off(at: datetime | None = None, **fields: Any) -> JobSpec:
    schedule = Once(at=at) if at is not None else Once(delay=timedelta(hours=1))
    fields.setdefault("task", "tests.one_off")
    return JobSpec(schedule=schedule, **fields)


def every(seconds: float, anchor: datetime | None = None, **fields: Any) -> JobSpec:
    fields.setdefault("task", "tests.every")
    return JobSpec(schedule=Interval(timedelta(seconds=seconds), anchor=anchor), **fields)


def skip_rows(skips: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((s.fate, s.first_slot, s.last_slot, s.count) for s in skips)


def lead(store: Store, now: datetime) -> int:
    lease = store.acquire_leadership("test-leader", timedelta(days=30), now=now)
    assert lease is not None
    return lease.epoch


# -- submit ------------------------------------------------------------------------------


def test_submit_returns_the_job_with_every_field_of_the_spec(store: Store, t0: datetime) -> None:
    spec = JobSpec(
        task="reports.send",
        schedule=Once(at=t0 + timedelta(hours=2)),
        args={"to": "ops@example.com", "n": [1, 2, {"x": None}]},
        tenant="acme",
        name="nightly report",
        queue="mail",
        priority=7,
        retry=RetryPolicy(max_attempts=5, backoff_base=2.0, backoff_cap=60.0),
        timeout=timedelta(seconds=30),
        misfire=MisfirePolicy.SKIP,
        misfire_grace=timedelta(seconds=5),
        overlap=OverlapPolicy.FORBID,
        idempotency_key="req-1",
    )
    submitted = store.submit(spec, now=t0)
    job = submitted.job
    assert submitted.created is True
    assert submitted.run is None
    assert job.id > 0
    assert (job.task, job.args, job.tenant, job.name) == (
        "reports.send",
        {"to": "ops@example.com", "n": [1, 2, {"x": None}]},
        "acme",
        "nightly report",
    )
    assert (job.queue, job.priority, job.retry, job.timeout) == (
        "mail",
        7,
        RetryPolicy(max_attempts=5, backoff_base=2.0, backoff_cap=60.0),
        timedelta(seconds=30),
    )
    assert (job.misfire, job.misfire_grace, job.overlap, job.idempotency_key) == (
        MisfirePolicy.SKIP,
        timedelta(seconds=5),
        OverlapPolicy.FORBID,
        "req-1",
    )
    assert job.schedule == Once(at=t0 + timedelta(hours=2))
    assert job.state is JobState.SCHEDULED  # a one-off job before its slot
    assert job.next_run_at == t0 + timedelta(hours=2)
    assert job.created_at == t0
    assert job.next_run_at.tzinfo is not None
    assert job.next_run_at.utcoffset() == timedelta(0)


def test_submitted_job_is_durable_across_a_reopen(store_url: str, t0_real: datetime) -> None:
    first = open_store(store_url)
    try:
        job = first.submit(one_off(t0_real + timedelta(hours=1), args={"k": 1}), now=t0_real).job
    finally:
        first.close()
    first.close()  # idempotent
    second = open_store(store_url)
    try:
        assert second.get_job(job.id) == job
    finally:
        second.close()


@pytest.fixture
def t0_real() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def test_one_off_at_an_instant_is_first_due_at_that_instant(store: Store, t0: datetime) -> None:
    job = store.submit(one_off(t0 + timedelta(minutes=3)), now=t0).job
    assert job.next_run_at == t0 + timedelta(minutes=3)


def test_one_off_delay_is_resolved_against_the_store_clock(store: Store, t0: datetime) -> None:
    spec = JobSpec(task="t", schedule=Once(delay=timedelta(seconds=90)))
    job = store.submit(spec, now=t0).job
    assert job.next_run_at == t0 + timedelta(seconds=90)
    assert job.schedule == Once(at=t0 + timedelta(seconds=90))
    assert store.get_job(job.id).next_run_at == t0 + timedelta(seconds=90)


def test_one_off_delay_without_now_uses_the_store_clock(store: Store) -> None:
    spec = JobSpec(task="t", schedule=Once(delay=timedelta(seconds=300)))
    before = store.now()
    job = store.submit(spec).job
    after = store.now()
    assert job.next_run_at is not None
    assert before + timedelta(seconds=300) <= job.next_run_at <= after + timedelta(seconds=300)


def test_cron_job_is_first_due_at_the_next_fire_time(store: Store) -> None:
    now = datetime(2030, 1, 7, 9, 2, 30, tzinfo=UTC)
    job = store.submit(JobSpec(task="t", schedule=Cron("*/5 * * * *")), now=now).job
    assert job.next_run_at == datetime(2030, 1, 7, 9, 5, tzinfo=UTC)


def test_cron_job_first_slot_follows_its_time_zone(store: Store) -> None:
    now = datetime(2030, 1, 7, 7, 0, tzinfo=UTC)  # 08:00 in Berlin (CET, UTC+1)
    spec = JobSpec(task="t", schedule=Cron("0 9 * * *", tz="Europe/Berlin"))
    job = store.submit(spec, now=now).job
    assert job.next_run_at == datetime(2030, 1, 7, 8, 0, tzinfo=UTC)
    assert job.schedule == Cron("0 9 * * *", tz="Europe/Berlin")


def test_interval_without_anchor_is_anchored_at_submit(store: Store, t0: datetime) -> None:
    job = store.submit(every(30), now=t0).job
    assert job.next_run_at == t0 + timedelta(seconds=30)
    assert job.schedule == Interval(timedelta(seconds=30), anchor=t0)


def test_interval_with_past_anchor_is_first_due_on_its_grid(store: Store, t0: datetime) -> None:
    job = store.submit(every(60, anchor=t0 - timedelta(seconds=150)), now=t0).job
    assert job.next_run_at == t0 + timedelta(seconds=30)


def test_interval_with_future_anchor_is_first_due_at_the_anchor(store: Store, t0: datetime) -> None:
    job = store.submit(every(60, anchor=t0 + timedelta(seconds=500)), now=t0).job
    assert job.next_run_at == t0 + timedelta(seconds=500)


def test_due_one_off_job_gets_a_queued_run_at_submit_and_completes(
    store: Store, t0: datetime
) -> None:
    submitted = store.submit(one_off(t0 - timedelta(seconds=5), args={"a": 1}), now=t0)
    run = submitted.run
    assert run is not None
    assert run.state is RunState.QUEUED
    assert run.job_id == submitted.job.id
    assert run.scheduled_for == t0 - timedelta(seconds=5)
    assert run.run_at == t0 - timedelta(seconds=5)
    assert run.attempt == 1
    assert run.args == {"a": 1}
    assert submitted.job.state is JobState.QUEUED  # it reads as its run
    assert submitted.job.next_run_at is None
    assert store.get_job(submitted.job.id).state is JobState.QUEUED
    assert store.get_run(run.id) == run
    assert [r.id for r in store.list_runs(job_id=submitted.job.id).items] == [run.id]


def test_zero_delay_job_is_queued_at_submit(store: Store, t0: datetime) -> None:
    spec = JobSpec(task="t", schedule=Once(delay=timedelta(0)))
    submitted = store.submit(spec, now=t0)
    assert submitted.run is not None
    assert submitted.run.run_at == t0
    assert submitted.job.state is JobState.QUEUED


def test_run_copies_the_job_fields_it_executes_with(store: Store, t0: datetime) -> None:
    spec = one_off(
        t0,
        task="x.y",
        args={"k": "v"},
        tenant="acme",
        queue="q1",
        priority=-3,
        retry=RetryPolicy(max_attempts=4),
        timeout=timedelta(seconds=9),
    )
    run = store.submit(spec, now=t0).run
    assert run is not None
    assert (run.task, run.args, run.tenant, run.queue, run.priority) == (
        "x.y",
        {"k": "v"},
        "acme",
        "q1",
        -3,
    )
    assert (run.max_attempts, run.timeout) == (4, timedelta(seconds=9))
    assert run.worker is None
    assert run.lease_expires_at is None
    assert run.finished_at is None


def test_submit_with_a_known_idempotency_key_returns_the_existing_job(
    store: Store, t0: datetime
) -> None:
    first = store.submit(one_off(idempotency_key="order-42", args={"v": 1}), now=t0)
    again = store.submit(
        one_off(idempotency_key="order-42", args={"v": 2}), now=t0 + timedelta(seconds=1)
    )
    assert again.created is False
    assert again.job == first.job
    assert len(store.list_jobs().items) == 1


def test_idempotency_keys_are_per_tenant(store: Store, t0: datetime) -> None:
    first = store.submit(one_off(idempotency_key="k", tenant="a"), now=t0)
    other = store.submit(one_off(idempotency_key="k", tenant="b"), now=t0)
    assert other.created is True
    assert other.job.id != first.job.id
    assert other.job.tenant == "b"


def test_due_one_off_with_a_known_idempotency_key_gets_no_second_run(
    store: Store, t0: datetime
) -> None:
    first = store.submit(one_off(t0, idempotency_key="once"), now=t0)
    again = store.submit(one_off(t0, idempotency_key="once"), now=t0)
    assert again.created is False
    assert again.job.id == first.job.id
    assert len(store.list_runs().items) == 1


def test_concurrent_submits_with_one_key_from_threads_make_one_job(
    store: Store, store_url: str, t0: datetime
) -> None:
    threads = 6
    barrier = threading.Barrier(threads)
    results: list[tuple[int, bool]] = []
    errors: list[BaseException] = []

    def submit(i: int) -> None:
        own = open_store(store_url)
        try:
            barrier.wait()
            submitted = own.submit(one_off(idempotency_key="same", args={"i": i}), now=t0)
            results.append((submitted.job.id, submitted.created))
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()

    workers = [threading.Thread(target=submit, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert len({job_id for job_id, _ in results}) == 1
    assert sorted(created for _, created in results) == [False] * (threads - 1) + [True]
    assert len(store.list_jobs().items) == 1


def test_concurrent_submits_with_one_key_from_processes_make_one_job(
    store: Store, store_url: str, children: Children
) -> None:
    results = children(
        [
            {"op": "submit_idempotent", "url": store_url, "tenant": "t", "key": "k", "node": n}
            for n in range(4)
        ]
    )
    assert len({r["job_id"] for r in results}) == 1
    assert sorted(r["created"] for r in results) == [False, False, False, True]
    assert len(store.list_jobs().items) == 1


def test_submit_with_a_taken_name_is_rejected_and_writes_nothing(
    store: Store, t0: datetime
) -> None:
    first = store.submit(every(60, name="sync"), now=t0).job
    with pytest.raises(ValidationError):
        store.submit(one_off(t0 - timedelta(seconds=1), name="sync"), now=t0)
    assert [job.id for job in store.list_jobs().items] == [first.id]
    assert store.list_runs().items == []
    assert store.get_job(first.id) == first


def test_names_are_unique_per_tenant_only(store: Store, t0: datetime) -> None:
    store.submit(every(60, name="sync", tenant="a"), now=t0)
    other = store.submit(every(60, name="sync", tenant="b"), now=t0)
    assert other.created is True


# -- put_schedule ----------------------------------------------------------------------------


def test_put_schedule_creates_a_named_job(store: Store) -> None:
    now = datetime(2030, 1, 7, 9, 2, 30, tzinfo=UTC)
    spec = JobSpec(task="t", schedule=Cron("*/5 * * * *"), name="five")
    put = store.put_schedule(spec, now=now)
    assert put.created is True
    assert put.job.name == "five"
    assert put.job.state is JobState.ACTIVE
    assert put.job.next_run_at == datetime(2030, 1, 7, 9, 5, tzinfo=UTC)
    assert store.get_job(put.job.id) == put.job


def test_put_schedule_again_with_the_same_spec_changes_nothing(store: Store) -> None:
    now = datetime(2030, 1, 7, 9, 2, 30, tzinfo=UTC)
    spec = JobSpec(task="t", schedule=Cron("*/5 * * * *"), name="five", args={"a": 1})
    first = store.put_schedule(spec, now=now).job
    # Later, past the first slot, which a scheduler has not triggered yet.
    again = store.put_schedule(spec, now=now + timedelta(minutes=4))
    assert again.created is False
    assert again.job == first
    assert store.get_job(first.id) == first
    assert len(store.list_jobs().items) == 1


def test_put_schedule_again_with_an_unanchored_interval_changes_nothing(
    store: Store, t0: datetime
) -> None:
    # The interval is anchored at the first put; the same declaration at the next start of
    # the app is the same spec, not a new anchor.
    first = store.put_schedule(every(60, name="tick"), now=t0).job
    again = store.put_schedule(every(60, name="tick"), now=t0 + timedelta(seconds=25))
    assert again.created is False
    assert again.job == first
    assert first.next_run_at == t0 + timedelta(seconds=60)


def test_put_schedule_changing_other_fields_keeps_next_run_at(store: Store) -> None:
    now = datetime(2030, 1, 7, 9, 2, 30, tzinfo=UTC)
    spec = JobSpec(task="t", schedule=Cron("*/5 * * * *"), name="five")
    first = store.put_schedule(spec, now=now).job
    changed = store.put_schedule(
        JobSpec(task="t", schedule=Cron("*/5 * * * *"), name="five", priority=9, queue="fast"),
        now=now + timedelta(minutes=4),
    )
    assert changed.created is False
    assert changed.job.id == first.id
    assert (changed.job.priority, changed.job.queue) == (9, "fast")
    # Only a change of schedule recomputes the next slot; 09:05 is still owed a run.
    assert changed.job.next_run_at == datetime(2030, 1, 7, 9, 5, tzinfo=UTC)


def test_put_schedule_with_a_changed_cron_recomputes_next_run_at(store: Store) -> None:
    now = datetime(2030, 1, 7, 9, 2, 30, tzinfo=UTC)
    first = store.put_schedule(
        JobSpec(task="t", schedule=Cron("*/5 * * * *"), name="sync"), now=now
    ).job
    changed = store.put_schedule(
        JobSpec(task="t", schedule=Cron("*/10 * * * *"), name="sync", priority=3),
        now=now + timedelta(seconds=10),
    )
    assert changed.created is False
    assert changed.job.id == first.id
    assert changed.job.schedule == Cron("*/10 * * * *")
    assert changed.job.next_run_at == datetime(2030, 1, 7, 9, 10, tzinfo=UTC)
    assert changed.job.priority == 3
    assert store.get_job(first.id) == changed.job


def test_concurrent_put_schedule_of_a_new_name_from_processes_makes_one_job(
    store: Store, store_url: str, children: Children
) -> None:
    # Several nodes start at once and each syncs the schedules declared in code.
    results = children(
        [
            {"op": "put_schedule", "url": store_url, "name": "nightly", "cron": "0 3 * * *"}
            for _ in range(4)
        ]
    )
    assert [r["error"] for r in results] == [None] * 4
    assert len({r["job_id"] for r in results}) == 1
    assert sorted(r["created"] for r in results) == [False, False, False, True]
    assert len(store.list_jobs().items) == 1


def test_concurrent_put_schedule_of_a_new_name_from_threads_makes_one_job(
    store: Store, store_url: str, t0: datetime
) -> None:
    threads = 6
    barrier = threading.Barrier(threads)
    results: list[tuple[int, bool]] = []
    errors: list[BaseException] = []

    def sync() -> None:
        own = open_store(store_url)
        try:
            barrier.wait()
            synced = own.put_schedule(every(60, anchor=t0, name="sync"), now=t0)
            results.append((synced.job.id, synced.created))
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()

    workers = [threading.Thread(target=sync) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert len({job_id for job_id, _ in results}) == 1
    assert sorted(created for _, created in results) == [False] * (threads - 1) + [True]


def test_put_schedule_revives_a_cancelled_job_of_that_name(store: Store, t0: datetime) -> None:
    first = store.put_schedule(every(60, name="sync"), now=t0).job
    store.cancel_job(first.id, now=t0)
    revived = store.put_schedule(every(60, name="sync"), now=t0 + timedelta(seconds=1))
    assert revived.job.id == first.id
    assert revived.job.state is JobState.ACTIVE
    assert revived.job.next_run_at is not None
    assert revived.job.next_run_at > t0 + timedelta(seconds=1)


def test_put_schedule_without_a_name_is_rejected(store: Store, t0: datetime) -> None:
    with pytest.raises(ValidationError):
        store.put_schedule(every(60), now=t0)
    assert store.list_jobs().items == []


# -- cancel, pause, resume -------------------------------------------------------------------


def test_cancel_job_cancels_its_waiting_runs_but_not_a_running_one(
    store: Store, t0: datetime
) -> None:
    job = store.submit(
        every(
            60,
            anchor=t0 - timedelta(minutes=10),
            misfire=MisfirePolicy.ALL,
            misfire_grace=timedelta(hours=1),
        ),
        now=t0 - timedelta(minutes=10),
    ).job
    runs = store.trigger(lead(store, t0), now=t0).runs
    assert len(runs) == 10
    running = store.claim("w", limit=1, now=t0)[0]
    failing = store.claim("w", limit=1, now=t0)[0]
    failed = store.fail(
        failing.id, failing.fencing_token, "boom", retry_after=timedelta(minutes=5), now=t0
    )
    assert failed.state is RunState.FAILED

    cancelled = store.cancel_job(job.id, now=t0 + timedelta(seconds=1))
    assert cancelled.state is JobState.CANCELLED
    assert store.get_job(job.id).state is JobState.CANCELLED
    states = {run.id: run.state for run in store.list_runs(job_id=job.id).items}
    assert states.pop(running.id) is RunState.RUNNING
    assert set(states.values()) == {RunState.CANCELLED}
    assert len(states) == 9


def test_cancelled_job_is_not_triggered(store: Store, t0: datetime) -> None:
    job = store.submit(every(60), now=t0).job
    store.cancel_job(job.id, now=t0)
    result = store.trigger(lead(store, t0), now=t0 + timedelta(minutes=5))
    assert result.runs == []
    assert store.list_runs(job_id=job.id).items == []
    assert store.next_due_at() is None


def test_cancelling_a_cancelled_job_returns_it_unchanged(store: Store, t0: datetime) -> None:
    job = store.submit(every(60), now=t0).job
    cancelled = store.cancel_job(job.id, now=t0)
    again = store.cancel_job(job.id, now=t0 + timedelta(seconds=5))
    assert again == cancelled


def test_cancel_job_of_a_completed_one_off(store: Store, t0: datetime) -> None:
    submitted = store.submit(one_off(t0), now=t0)
    assert submitted.run is not None
    cancelled = store.cancel_job(submitted.job.id, now=t0)
    assert cancelled.state is JobState.CANCELLED
    assert store.get_run(submitted.run.id).state is RunState.CANCELLED


def test_cancel_unknown_job_raises_job_not_found(store: Store) -> None:
    with pytest.raises(JobNotFound):
        store.cancel_job(987654)


def test_paused_job_is_not_triggered(store: Store, t0: datetime) -> None:
    job = store.submit(every(60), now=t0).job
    paused = store.pause_job(job.id, now=t0)
    assert paused.state is JobState.PAUSED
    result = store.trigger(lead(store, t0), now=t0 + timedelta(minutes=5))
    assert result.runs == []
    assert store.list_runs(job_id=job.id).items == []
    assert store.next_due_at() is None


def test_pausing_a_paused_job_returns_it_unchanged(store: Store, t0: datetime) -> None:
    job = store.submit(every(60), now=t0).job
    paused = store.pause_job(job.id, now=t0)
    assert store.pause_job(job.id, now=t0 + timedelta(seconds=3)) == paused


def test_pausing_a_cancelled_or_triggered_one_off_job_is_an_invalid_transition(
    store: Store, t0: datetime
) -> None:
    cancelled = store.submit(every(60), now=t0).job
    store.cancel_job(cancelled.id, now=t0)
    triggered = store.submit(one_off(t0), now=t0).job
    for job_id, state in ((cancelled.id, JobState.CANCELLED), (triggered.id, JobState.QUEUED)):
        with pytest.raises(InvalidTransition):
            store.pause_job(job_id, now=t0)
        assert store.get_job(job_id).state is state


def test_resume_records_slots_that_fell_while_paused_and_does_not_run_them(
    store: Store, t0: datetime
) -> None:
    job = store.submit(every(60, anchor=t0), now=t0).job
    store.pause_job(job.id, now=t0 + timedelta(seconds=10))
    # Slots t0+60 ... t0+300 fall while paused; resume at t0+330.
    resumed = store.resume_job(job.id, now=t0 + timedelta(seconds=330))
    assert resumed.state is JobState.ACTIVE
    assert resumed.next_run_at == t0 + timedelta(seconds=360)
    assert store.list_runs(job_id=job.id).items == []
    skips = store.slot_skips(job.id)
    assert [(s.fate, s.first_slot, s.last_slot, s.count) for s in skips] == [
        (SlotFate.PAUSED, t0 + timedelta(seconds=60), t0 + timedelta(seconds=300), 5)
    ]
    # Nothing due until the next slot.
    result = store.trigger(lead(store, t0), now=t0 + timedelta(seconds=331))
    assert result.runs == []


def test_resume_of_a_one_off_job_whose_time_fell_while_paused_still_runs_it(
    store: Store, t0: datetime
) -> None:
    # A one-off job has no later slot to wait for: dropping its slot would lose the job.
    at = t0 + timedelta(seconds=30)
    job = store.submit(one_off(at), now=t0).job
    store.pause_job(job.id, now=t0 + timedelta(seconds=1))
    resumed = store.resume_job(job.id, now=t0 + timedelta(seconds=40))
    assert store.slot_skips(job.id) == []
    assert resumed.state is JobState.SCHEDULED
    assert resumed.next_run_at == at
    runs = store.trigger(lead(store, t0), now=t0 + timedelta(seconds=41)).runs
    assert [(r.job_id, r.scheduled_for) for r in runs] == [(job.id, at)]


def test_resume_before_any_slot_fell_records_nothing(store: Store, t0: datetime) -> None:
    job = store.submit(every(60, anchor=t0), now=t0).job
    store.pause_job(job.id, now=t0 + timedelta(seconds=10))
    resumed = store.resume_job(job.id, now=t0 + timedelta(seconds=20))
    assert resumed.next_run_at == t0 + timedelta(seconds=60)
    assert resumed.state is JobState.ACTIVE
    assert store.slot_skips(job.id) == []


def test_resuming_an_active_job_returns_it_unchanged(store: Store, t0: datetime) -> None:
    job = store.submit(every(60), now=t0).job
    assert store.resume_job(job.id, now=t0 + timedelta(seconds=1)) == job


def test_resuming_a_cancelled_job_is_an_invalid_transition(store: Store, t0: datetime) -> None:
    job = store.submit(every(60), now=t0).job
    store.pause_job(job.id, now=t0)
    store.cancel_job(job.id, now=t0)
    with pytest.raises(InvalidTransition):
        store.resume_job(job.id, now=t0)
    assert store.get_job(job.id).state is JobState.CANCELLED


def test_pause_and_resume_unknown_job_raise_job_not_found(store: Store) -> None:
    with pytest.raises(JobNotFound):
        store.pause_job(424242)
    with pytest.raises(JobNotFound):
        store.resume_job(424242)


# -- reads, pagination, tenancy --------------------------------------------------------------


def test_get_unknown_ids_raise_not_found(store: Store) -> None:
    with pytest.raises(JobNotFound):
        store.get_job(123456)
    with pytest.raises(RunNotFound):
        store.get_run(123456)


def test_list_jobs_pages_newest_first_with_a_cursor(store: Store, t0: datetime) -> None:
    ids = [store.submit(one_off(task=f"t{i}"), now=t0).job.id for i in range(7)]
    seen: list[int] = []
    pages = 0
    cursor: int | None = None
    while True:
        page = store.list_jobs(after=cursor, limit=3)
        pages += 1
        seen.extend(job.id for job in page.items)
        assert len(page.items) <= 3
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == sorted(ids, reverse=True)
    assert pages == 3


def test_a_page_that_ends_the_listing_exactly_says_it_is_the_last(
    store: Store, t0: datetime
) -> None:
    # Six jobs (and six runs due now), pages of three: two pages, the second with no
    # cursor, not a cursor to an empty third page.
    for i in range(6):
        store.submit(one_off(t0, task=f"t{i}"), now=t0)
    for listing in (store.list_jobs, store.list_runs):
        first = listing(limit=3)
        assert len(first.items) == 3
        assert first.next_cursor == first.items[-1].id
        second = listing(after=first.next_cursor, limit=3)
        assert len(second.items) == 3
        assert second.next_cursor is None


def test_list_jobs_filters_by_tenant_state_and_task(store: Store, t0: datetime) -> None:
    a1 = store.submit(one_off(task="mail", tenant="a"), now=t0).job
    a2 = store.submit(one_off(task="sync", tenant="a"), now=t0).job
    b1 = store.submit(one_off(task="mail", tenant="b"), now=t0).job
    store.pause_job(a2.id, now=t0)
    assert [j.id for j in store.list_jobs(tenant="a").items] == [a2.id, a1.id]
    assert [j.id for j in store.list_jobs(task="mail").items] == [b1.id, a1.id]
    assert [j.id for j in store.list_jobs(state=JobState.PAUSED).items] == [a2.id]
    assert [j.id for j in store.list_jobs(tenant="b", task="sync").items] == []


def test_list_runs_filters_and_pages(store: Store, t0: datetime) -> None:
    job_a = store.submit(
        every(
            60,
            anchor=t0 - timedelta(minutes=5),
            tenant="a",
            misfire=MisfirePolicy.ALL,
            misfire_grace=timedelta(hours=1),
        ),
        now=t0 - timedelta(minutes=5),
    ).job
    lone = store.submit(one_off(t0, tenant="b"), now=t0).run
    assert lone is not None
    runs_a = store.trigger(lead(store, t0), now=t0).runs
    assert len(runs_a) == 5
    claimed = store.claim("w", limit=1, queues=None, now=t0 + timedelta(seconds=1))
    assert len(claimed) == 1

    everything = store.list_runs(limit=100).items
    assert [r.id for r in everything] == sorted((r.id for r in everything), reverse=True)
    assert len(everything) == 6
    assert {r.id for r in store.list_runs(job_id=job_a.id).items} == {r.id for r in runs_a}
    assert [r.id for r in store.list_runs(tenant="b").items] == [lone.id]
    running = store.list_runs(state=RunState.RUNNING).items
    assert [r.id for r in running] == [claimed[0].id]

    seen: list[int] = []
    cursor: int | None = None
    while True:
        page = store.list_runs(job_id=job_a.id, after=cursor, limit=2)
        seen.extend(r.id for r in page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == sorted((r.id for r in runs_a), reverse=True)


def test_another_tenants_rows_look_missing(store: Store, t0: datetime) -> None:
    submitted = store.submit(one_off(t0, tenant="a"), now=t0)
    job, run = submitted.job, submitted.run
    assert run is not None
    with pytest.raises(JobNotFound):
        store.get_job(job.id, tenant="b")
    with pytest.raises(RunNotFound):
        store.get_run(run.id, tenant="b")
    with pytest.raises(NotFound):
        store.cancel_job(job.id, tenant="b", now=t0)
    with pytest.raises(NotFound):
        store.pause_job(job.id, tenant="b", now=t0)
    with pytest.raises(NotFound):
        store.cancel_run(run.id, tenant="b", now=t0)
    with pytest.raises(NotFound):
        store.retry_run(run.id, tenant="b", now=t0)
    with pytest.raises(NotFound):
        store.slot_skips(job.id, tenant="b")
    assert store.list_jobs(tenant="b").items == []
    assert store.list_runs(tenant="b").items == []
    # Nothing changed, and the owner (and an admin) still see both.
    assert store.get_job(job.id, tenant="a") == job
    assert store.get_run(run.id, tenant="a") == run
    assert store.get_job(job.id) == job


# -- migrations --------------------------------------------------------------------------------


def test_migrate_again_applies_nothing(store: Store) -> None:
    applied, latest = store.schema_version()
    assert applied == latest >= 1
    assert store.migrate() == []
    assert store.schema_version() == (applied, latest)


def test_migrate_on_a_blank_database_applies_every_version_once(blank_store_url: str) -> None:
    store = open_store(blank_store_url, migrate=True)
    try:
        applied, latest = store.schema_version()
        assert applied == latest >= 1
        assert store.migrate() == []
        job = store.submit(one_off()).job
        assert store.get_job(job.id) == job
    finally:
        store.close()


def test_explicit_migrate_applies_versions_in_order(blank_store_url: str) -> None:
    store = open_store(blank_store_url, migrate=False)
    try:
        applied = store.migrate()
        latest = store.schema_version()[1]
        assert applied
        assert applied == sorted(set(applied))
        assert applied[-1] == latest
        assert store.schema_version() == (latest, latest)
    finally:
        store.close()


def test_concurrent_migrations_apply_each_version_exactly_once(
    blank_store_url: str, children: Children
) -> None:
    results = children(
        [{"op": "migrate", "url": blank_store_url, "migrate": False} for _ in range(3)]
    )
    applied = sorted(v for r in results for v in r["applied"])
    latest = results[0]["version"][1]
    assert applied, "no child applied any migration"
    assert applied == sorted(set(applied)), f"a version was applied twice: {applied}"
    assert applied[-1] == latest
    assert all(r["version"] == [latest, latest] for r in results)


# PostgreSQL is migrated by `tickwork db migrate`, never implicitly.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_fresh_sqlite_file_is_migrated_on_first_use(backend: str, tmp_path: Path) -> None:
    path = tmp_path / "first-use.db"
    store = open_store("sqlite:///" + str(path.resolve()))
    try:
        applied, latest = store.schema_version()
        assert applied == latest >= 1
        job = store.submit(one_off()).job
        assert store.get_job(job.id).id == job.id
    finally:
        store.close()
    assert path.exists()


# -- trigger_job (an operator's extra run) ---------------------------------------------------


def test_trigger_job_queues_one_run_at_now_and_leaves_the_schedule(
    store: Store, t0: datetime
) -> None:
    job = store.submit(every(3600, t0), now=t0).job
    at = t0 + timedelta(minutes=5)
    run = store.trigger_job(job.id, now=at)
    assert (run.job_id, run.state, run.scheduled_for, run.run_at) == (
        job.id,
        RunState.QUEUED,
        at,
        at,
    )
    assert store.trigger_job(job.id, now=at).id == run.id  # that microsecond's slot is taken
    assert store.get_job(job.id).next_run_at == job.next_run_at


def test_trigger_job_refuses_a_cancelled_or_foreign_job(store: Store, t0: datetime) -> None:
    job = store.submit(every(3600, t0, tenant="a"), now=t0).job
    with pytest.raises(JobNotFound):
        store.trigger_job(job.id, tenant="b", now=t0)
    store.cancel_job(job.id, now=t0)
    with pytest.raises(InvalidTransition):
        store.trigger_job(job.id, now=t0 + timedelta(seconds=1))
    assert store.list_runs(job_id=job.id).items == []
