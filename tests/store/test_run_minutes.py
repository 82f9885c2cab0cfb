"""Conformance: the per-minute rollup (the dashboard's time axis), queue stats, bulk retry
and cancel, and the run and job filters the dashboard's runs page and search use."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from tickwork.errors import ValidationError
from tickwork.job import JobSpec, Run, RunState
from tickwork.retry import RetryPolicy
from tickwork.schedule import Once
from tickwork.stats import bucket_percentile
from tickwork.store import Store

SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def m0(t0: datetime) -> datetime:
    """A whole minute, a little in the past (folds are called with later clocks)."""
    return t0.replace(second=0) - timedelta(hours=1)


def queued(store: Store, at: datetime, **fields: Any) -> Run:
    fields.setdefault("task", "tests.run")
    run = store.submit(JobSpec(schedule=Once(at=at), **fields), now=at).run
    assert run is not None
    return run


def finish(store: Store, at: datetime, outcome: str, lag: timedelta = SECOND, **fields: Any) -> Run:
    """A run scheduled at ``at``, started ``lag`` later, ending ``outcome`` a second after."""
    if outcome == "failed":
        fields["retry"] = RetryPolicy(max_attempts=3)
    elif outcome == "dead":
        fields["retry"] = RetryPolicy(max_attempts=1)
    run = queued(store, at, **fields)
    [held] = store.claim("w1", limit=1, now=at + lag)
    assert held.id == run.id
    if outcome == "succeeded":
        return store.complete(run.id, held.fencing_token, now=at + lag + SECOND)
    # A retry far off, so that later claims in a test do not take it again.
    wait = timedelta(hours=2)
    return store.fail(run.id, held.fencing_token, "boom", retry_after=wait, now=at + lag + SECOND)


def test_fold_counts_runs_by_minute_and_outcome_with_their_lag(store: Store, m0: datetime) -> None:
    finish(store, m0 + 5 * SECOND, "succeeded", lag=SECOND)
    finish(store, m0 + 10 * SECOND, "succeeded", lag=3 * SECOND)
    finish(store, m0 + 15 * SECOND, "dead")
    finish(store, m0 + 20 * SECOND, "failed")
    finish(store, m0 + MINUTE + 5 * SECOND, "succeeded")

    assert store.fold_minutes(now=m0 + 3 * MINUTE) > 0
    minutes = {m.minute: m for m in store.run_minutes(m0 - MINUTE)}

    first = minutes[m0]
    assert (first.succeeded, first.failed, first.dead) == (2, 1, 1)
    # Three first attempts started in the minute, 1, 1 and 3 s late (the failed one's is
    # folded when it finishes). Percentiles read from the histogram: at most 10 % high.
    p50 = bucket_percentile(first.lag, 50)
    p99 = bucket_percentile(first.lag, 99)
    assert p50 is not None
    assert 1000 <= p50 <= 1100
    assert p99 is not None
    assert 3000 <= p99 <= 3300
    assert minutes[m0 + MINUTE].succeeded == 1


def test_a_second_fold_counts_nothing_twice(store: Store, m0: datetime) -> None:
    finish(store, m0 + 5 * SECOND, "succeeded")
    store.fold_minutes(now=m0 + 3 * MINUTE)
    assert store.fold_minutes(now=m0 + 3 * MINUTE) == 0
    store.fold_minutes(now=m0 + 10 * MINUTE)
    [minute] = [m for m in store.run_minutes(m0 - MINUTE) if m.succeeded]
    assert minute.succeeded == 1
    assert sum(minute.lag.values()) == 1


def test_manual_triggers_and_retries_are_no_schedule_lag(store: Store, m0: datetime) -> None:
    dead = finish(store, m0, "dead", lag=SECOND)
    store.fold_minutes(now=m0 + 3 * MINUTE)
    # Retried by hand half an hour later: its start is not half an hour of lag.
    store.retry_run(dead.id, now=m0 + 30 * MINUTE)
    [again] = store.claim("w1", limit=1, now=m0 + 30 * MINUTE + SECOND)
    store.complete(again.id, again.fencing_token, now=m0 + 30 * MINUTE + 2 * SECOND)
    triggered = store.trigger_job(dead.job_id, now=m0 + 31 * MINUTE)
    [held] = store.claim("w1", limit=1, now=m0 + 31 * MINUTE + 10 * SECOND)
    assert held.id == triggered.id
    store.complete(held.id, held.fencing_token, now=m0 + 31 * MINUTE + 11 * SECOND)
    finish(store, m0 + 32 * MINUTE, "succeeded", lag=2 * SECOND)

    store.fold_minutes(now=m0 + 40 * MINUTE)
    lags = {m.minute: m.lag for m in store.run_minutes(m0 - MINUTE) if m.lag}
    assert sorted(lags) == [m0, m0 + 32 * MINUTE]  # only the scheduled first attempts
    assert [sum(lag.values()) for lag in lags.values()] == [1, 1]
    stats = store.run_stats(now=m0 + 40 * MINUTE)
    assert stats.recent_lag_ms == [2000.0]


def test_fold_samples_each_queue_depth_and_sums_tenants(store: Store, m0: datetime) -> None:
    for _ in range(3):
        queued(store, m0, tenant="acme", queue="mail")
    queued(store, m0, tenant="globex", queue="mail")
    queued(store, m0 + timedelta(hours=5), tenant="acme")  # not due: no depth
    store.fold_minutes(now=m0 + 2 * MINUTE + 30 * SECOND)
    [sample] = [m for m in store.run_minutes(m0) if m.depth]
    assert sample.minute == m0 + 2 * MINUTE
    assert sample.depth == 4
    [acme] = [m for m in store.run_minutes(m0, tenant="acme") if m.depth]
    assert acme.depth == 3
    assert not [m for m in store.run_minutes(m0, queue="default") if m.depth]


def test_fold_prunes_minutes_past_a_day(store: Store, m0: datetime) -> None:
    finish(store, m0, "succeeded")
    store.fold_minutes(now=m0 + 2 * MINUTE)
    assert store.run_minutes(m0 - MINUTE)
    store.fold_minutes(now=m0 + timedelta(hours=26))
    assert not [m for m in store.run_minutes(m0 - MINUTE) if m.minute <= m0 + MINUTE]


# -- queues ----------------------------------------------------------------------------------


def test_queue_stats_say_due_running_and_oldest(store: Store, m0: datetime) -> None:
    queued(store, m0, queue="mail")
    queued(store, m0 + MINUTE, queue="mail")
    queued(store, m0 + timedelta(hours=3), queue="mail")  # not due yet
    queued(store, m0, queue="reports")
    store.claim("w1", limit=1, queues=["reports"], now=m0 + 2 * MINUTE)
    stats = {q.queue: q for q in store.queue_stats(now=m0 + 2 * MINUTE)}
    assert (stats["mail"].due, stats["mail"].running) == (2, 0)
    assert stats["mail"].oldest_due_at == m0
    assert (stats["reports"].due, stats["reports"].running) == (0, 1)
    assert stats["reports"].oldest_due_at is None
    assert store.queue_stats(tenant="nobody", now=m0) == []


# -- bulk ------------------------------------------------------------------------------------


def test_bulk_retry_requeues_every_matching_dead_run(store: Store, m0: datetime) -> None:
    mail = [finish(store, m0 + i * SECOND, "dead", task="mail") for i in range(3)]
    other = finish(store, m0, "dead", task="other")
    done = finish(store, m0 + 5 * SECOND, "succeeded", task="mail")
    ids = store.retry_runs(max_count=3, task="mail", now=m0 + MINUTE)
    assert ids == sorted(r.id for r in mail)
    assert {store.get_run(i).state for i in ids} == {RunState.QUEUED}
    assert store.get_run(other.id).state is RunState.DEAD
    assert store.get_run(done.id).state is RunState.SUCCEEDED


def test_bulk_over_its_max_changes_nothing(store: Store, m0: datetime) -> None:
    dead = [finish(store, m0 + i * SECOND, "dead") for i in range(3)]
    waiting = [queued(store, m0 + i * SECOND) for i in range(3)]
    with pytest.raises(ValidationError, match="more than 2 runs match"):
        store.retry_runs(max_count=2, now=m0 + MINUTE)
    with pytest.raises(ValidationError, match="more than 2 runs match"):
        store.cancel_runs(max_count=2, now=m0 + MINUTE)
    assert {store.get_run(r.id).state for r in dead} == {RunState.DEAD}
    assert {store.get_run(r.id).state for r in waiting} == {RunState.QUEUED}


@pytest.mark.parametrize("bad", [0, -1, 10_001, True])
def test_bulk_refuses_a_max_out_of_range(store: Store, bad: int) -> None:
    with pytest.raises(ValidationError, match="max_count"):
        store.cancel_runs(max_count=bad)


def test_bulk_cancel_takes_waiting_runs_of_the_filter_only(store: Store, m0: datetime) -> None:
    running = queued(store, m0, queue="mail", tenant="acme")
    store.claim("w1", limit=1, queues=["mail"], now=m0)
    retrying = finish(store, m0 + SECOND, "failed", queue="mail", tenant="acme")
    a = queued(store, m0, queue="mail", tenant="acme")
    b = queued(store, m0 + 2 * MINUTE, queue="mail", tenant="acme")
    other_tenant = queued(store, m0, queue="mail", tenant="globex")
    other_queue = queued(store, m0, queue="reports", tenant="acme")
    ids = store.cancel_runs(max_count=10, tenant="acme", queue="mail", now=m0 + 3 * MINUTE)
    assert ids == sorted([a.id, b.id, retrying.id])
    assert {store.get_run(i).state for i in ids} == {RunState.CANCELLED}
    assert store.get_run(other_tenant.id).state is RunState.QUEUED
    assert store.get_run(other_queue.id).state is RunState.QUEUED
    assert store.get_run(running.id).state is RunState.RUNNING
    # A time range on the slot: since <= scheduled_for < until.
    c = queued(store, m0 + 10 * MINUTE, queue="mail", tenant="acme")
    d = queued(store, m0 + 20 * MINUTE, queue="mail", tenant="acme")
    assert store.cancel_runs(
        max_count=10, since=m0 + 5 * MINUTE, until=m0 + 15 * MINUTE, now=m0 + 30 * MINUTE
    ) == [c.id]
    assert store.get_run(d.id).state is RunState.QUEUED


def test_list_runs_filters_by_task_queue_and_time(store: Store, m0: datetime) -> None:
    a = queued(store, m0, task="mail", queue="q1")
    b = queued(store, m0 + MINUTE, task="mail", queue="q2")
    queued(store, m0 + 2 * MINUTE, task="other", queue="q1")
    assert [r.id for r in store.list_runs(task="mail").items] == [b.id, a.id]
    assert [r.id for r in store.list_runs(task="mail", queue="q1").items] == [a.id]
    got = store.list_runs(since=m0 + 30 * SECOND, until=m0 + 90 * SECOND).items
    assert [r.id for r in got] == [b.id]


def test_list_jobs_searches_names_and_tasks(store: Store, m0: datetime) -> None:
    report = store.submit(
        JobSpec(task="reports.build", name="Nightly Report", schedule=Once(at=m0)), now=m0
    ).job
    mail = store.submit(JobSpec(task="mail.send", schedule=Once(at=m0)), now=m0).job
    assert [j.id for j in store.list_jobs(search="nightly").items] == [report.id]
    assert [j.id for j in store.list_jobs(search="MAIL").items] == [mail.id]
    assert [j.id for j in store.list_jobs(search="%").items] == []
