"""A one-off job due now starts without a scheduler: its run is written with the job, in
the same transaction, and workers are woken (NOTIFY on PostgreSQL). With real processes:
a worker alone runs it; a cancelled one never runs; with a scheduler running too, no slot
gets a second run (the unique slot key), through single and bulk submits alike."""

from __future__ import annotations

from typing import Any

import pytest
from worker_fault_app import app as fault_app
from worker_procs import DEADLINE, Cluster

from tickwork.client import Client
from tickwork.job import JobState, RunState
from tickwork.store import Store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow


def succeeded(store: Store) -> int:
    """Runs succeeded so far."""
    return store.run_stats().by_state.get(RunState.SUCCEEDED.value, 0)


def test_a_worker_alone_runs_jobs_due_now(store: Store, cluster: Cluster) -> None:
    cluster.worker("alone", "--concurrency", "10")
    client = Client(store, fault_app.registry)
    one = client.submit("work", args={"tag": "one"})
    many = client.submit_many({"task": "work", "args": {"tag": f"b{i}"}} for i in range(20))

    wait_until(lambda: succeeded(store) == 21, DEADLINE)
    assert store.leader() is None  # no scheduler ever led: nothing triggered these
    assert one.job.state is JobState.QUEUED  # as submitted: its run waits
    assert client.get_job(one.job.id).state is JobState.SUCCEEDED
    runs = [s.run for s in [one, *many]]
    assert all(r is not None for r in runs)
    started = [e["run"] for e in cluster.events("start")]
    assert sorted(started) == sorted(r.id for r in runs if r is not None)


def test_a_job_cancelled_before_a_worker_came_never_runs(store: Store, cluster: Cluster) -> None:
    client = Client(store, fault_app.registry)
    doomed = client.submit_many([{"task": "work", "args": {"tag": "doomed"}}])[0]
    assert doomed.run is not None
    client.cancel_job(doomed.job.id)
    assert client.get_run(doomed.run.id).state is RunState.CANCELLED

    cluster.worker("late", "--concurrency", "10")
    sentinel = client.submit("work", args={"tag": "sentinel"})
    wait_until(lambda: succeeded(store) == 1, DEADLINE)
    assert [e["tag"] for e in cluster.events("start")] == ["sentinel"]
    assert sentinel.run is not None
    assert client.get_run(sentinel.run.id).state is RunState.SUCCEEDED
    assert client.get_run(doomed.run.id).state is RunState.CANCELLED


def test_with_a_scheduler_running_too_each_job_runs_once(store: Store, cluster: Cluster) -> None:
    cluster.scheduler()
    cluster.worker("w1", "--concurrency", "20")
    cluster.worker("w2", "--concurrency", "20")
    client = Client(store, fault_app.registry)
    wait_until(lambda: store.leader() is not None, DEADLINE)
    jobs: list[dict[str, Any]] = [{"task": "work", "args": {"tag": f"now{i}"}} for i in range(60)]
    # Due a moment later: the scheduler triggers these, beside the ones due now.
    jobs += [{"task": "work", "args": {"tag": f"soon{i}"}, "delay": 0.3} for i in range(20)]
    submitted = client.submit_many(jobs)
    submitted += [client.submit("work", args={"tag": f"single{i}"}) for i in range(10)]

    wait_until(lambda: succeeded(store) == 90, DEADLINE * 2)
    runs = client.list_runs(limit=1000).items
    assert len(runs) == 90
    assert sorted(r.job_id for r in runs) == sorted(s.job.id for s in submitted)
    starts = cluster.events("start")
    assert len(starts) == 90
    assert len({e["run"] for e in starts}) == 90
    assert all(client.get_job(s.job.id).state is JobState.SUCCEEDED for s in submitted)
