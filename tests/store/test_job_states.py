"""A job's state says what an operator means (docs/job-lifecycle.md, ``JobState.of``).

A one-off job is ``scheduled`` until its slot is triggered, then reads as its latest run:
``queued``, ``running``, ``failed``, ``succeeded``, ``dead`` or ``cancelled``, and
``finished`` once no run is left to say. A recurring job is ``active``, ``paused`` or
``cancelled``. Every read (``get_job``, ``list_jobs``, a repeated idempotency key) derives
it the same way, and ``list_jobs(state=...)`` filters on exactly that state, in SQL.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tickwork.client import Client
from tickwork.errors import ValidationError
from tickwork.job import Job, JobSpec, JobState, MisfirePolicy
from tickwork.retry import RetryPolicy
from tickwork.schedule import Interval, Once
from tickwork.store import Store


def now_job(key: str | None = None, attempts: int = 2) -> JobSpec:
    return JobSpec(
        task="t",
        schedule=Once(delay=timedelta(0)),
        retry=RetryPolicy(max_attempts=attempts),
        idempotency_key=key,
    )


def state_of(store: Store, job: Job) -> JobState:
    """The job's state as every read says it: the get and its listing row agree."""
    got = store.get_job(job.id).state
    (listed,) = [j for j in store.list_jobs(limit=100).items if j.id == job.id]
    assert listed.state is got
    return got


def claim_one(store: Store, now: datetime) -> tuple[int, int]:
    (run,) = store.claim("w", limit=1, now=now)
    return run.id, run.fencing_token


def test_a_one_off_job_reads_as_its_run_through_its_life(store: Store, t0: datetime) -> None:
    later = store.submit(JobSpec(task="t", schedule=Once(at=t0 + timedelta(hours=1))), now=t0)
    assert later.job.state is state_of(store, later.job) is JobState.SCHEDULED

    submitted = store.submit(now_job(), now=t0)
    job = submitted.job
    assert job.state is state_of(store, job) is JobState.QUEUED

    run_id, token = claim_one(store, t0)
    assert state_of(store, job) is JobState.RUNNING
    store.fail(run_id, token, "boom", now=t0)
    assert state_of(store, job) is JobState.FAILED  # its retry waits
    run_id, token = claim_one(store, t0 + timedelta(hours=1))
    store.fail(run_id, token, "boom again", now=t0 + timedelta(hours=1))
    assert state_of(store, job) is JobState.DEAD

    store.retry_run(run_id, now=t0 + timedelta(hours=2))
    assert state_of(store, job) is JobState.QUEUED
    run_id, token = claim_one(store, t0 + timedelta(hours=2))
    store.complete(run_id, token, now=t0 + timedelta(hours=2))
    assert state_of(store, job) is JobState.SUCCEEDED

    # An operator's extra run is the job's latest: it reads as that one now.
    extra = store.trigger_job(job.id, now=t0 + timedelta(hours=3))
    assert state_of(store, job) is JobState.QUEUED
    store.cancel_run(extra.id, now=t0 + timedelta(hours=3))
    assert state_of(store, job) is JobState.CANCELLED


def test_pause_and_cancel_are_the_jobs_own_whatever_its_kind(store: Store, t0: datetime) -> None:
    one_off = store.submit(JobSpec(task="t", schedule=Once(at=t0 + timedelta(hours=1))), now=t0)
    recurring = store.submit(JobSpec(task="t", schedule=Interval(timedelta(minutes=1))), now=t0)
    assert state_of(store, recurring.job) is JobState.ACTIVE
    for submitted in (one_off, recurring):
        assert store.pause_job(submitted.job.id, now=t0).state is JobState.PAUSED
        assert state_of(store, submitted.job) is JobState.PAUSED
    assert store.resume_job(one_off.job.id, now=t0).state is JobState.SCHEDULED
    assert store.resume_job(recurring.job.id, now=t0).state is JobState.ACTIVE
    due = store.submit(now_job(), now=t0)
    for submitted in (one_off, recurring, due):
        assert store.cancel_job(submitted.job.id, now=t0).state is JobState.CANCELLED
        assert state_of(store, submitted.job) is JobState.CANCELLED


def test_a_one_off_job_with_no_run_left_is_finished(store: Store, t0: datetime) -> None:
    done = store.submit(now_job(), now=t0).job
    run_id, token = claim_one(store, t0)
    store.complete(run_id, token, now=t0)
    assert store.prune(timedelta(days=1), now=t0 + timedelta(days=2)) == 1
    assert state_of(store, done) is JobState.FINISHED

    at = t0 + timedelta(minutes=1)
    skipped = JobSpec(task="t", schedule=Once(at=at), misfire=MisfirePolicy.SKIP,
                      misfire_grace=timedelta(seconds=1))  # fmt: skip
    late = store.submit(skipped, now=t0).job
    lease = store.acquire_leadership("l", timedelta(days=30), now=t0 + timedelta(days=2))
    assert lease is not None
    store.trigger(lease.epoch, now=t0 + timedelta(days=2))
    assert state_of(store, late) is JobState.FINISHED


def test_a_repeated_idempotency_key_answers_the_job_as_it_is_now(
    store: Store, t0: datetime
) -> None:
    first = store.submit(now_job(key="k"), now=t0)
    run_id, token = claim_one(store, t0)
    store.complete(run_id, token, now=t0)
    again = store.submit(now_job(key="k"), now=t0)
    (in_batch,) = store.submit_many([now_job(key="k")], now=t0)
    assert not again.created
    assert not in_batch.created
    assert again.job.id == in_batch.job.id == first.job.id
    assert again.job.state is in_batch.job.state is JobState.SUCCEEDED


def test_the_state_filter_matches_exactly_the_jobs_in_that_state(
    store: Store, t0: datetime
) -> None:
    store.submit(JobSpec(task="t", schedule=Once(at=t0 + timedelta(hours=1))), now=t0)
    store.submit(JobSpec(task="t", schedule=Interval(timedelta(minutes=1))), now=t0)
    paused = store.submit(JobSpec(task="t", schedule=Interval(timedelta(minutes=5))), now=t0)
    store.pause_job(paused.job.id, now=t0)
    for _ in range(5):
        store.submit(now_job(attempts=1), now=t0)
    (running,) = store.claim("w", limit=1, now=t0)
    (dead,) = store.claim("w", limit=1, now=t0)
    store.fail(dead.id, dead.fencing_token, "boom", now=t0)
    (ok,) = store.claim("w", limit=1, now=t0)
    store.complete(ok.id, ok.fencing_token, now=t0)
    (cancelled,) = store.claim("w", limit=1, now=t0)
    store.cancel_run(cancelled.id, now=t0)

    everything = store.list_jobs(limit=100).items
    seen = {state: {j.id for j in everything if j.state is state} for state in JobState}
    assert {state for state, ids in seen.items() if ids} == {
        JobState.SCHEDULED,
        JobState.ACTIVE,
        JobState.PAUSED,
        JobState.QUEUED,
        JobState.RUNNING,
        JobState.DEAD,
        JobState.SUCCEEDED,
        JobState.CANCELLED,
    }
    for state, ids in seen.items():
        assert {j.id for j in store.list_jobs(state=state, limit=100).items} == ids, state
    assert running.job_id in seen[JobState.RUNNING]


@pytest.mark.parametrize("retired", ["completed"])
def test_a_filter_on_the_retired_state_completed_is_refused_with_what_replaced_it(
    store: Store, retired: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        Client(store).list_jobs(state=retired)
    assert refused.value.field == "state"
    assert "job state 'completed' is gone" in str(refused.value)
    assert "succeeded, dead" in str(refused.value)
