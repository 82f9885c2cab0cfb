"""Graceful stop with real OS processes: SIGTERM during a long run finishes it within the
grace, or releases it (no attempt spent) when the grace is shorter; either way no run is
executed to the end twice, and the worker exits 0."""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from worker_procs import DEADLINE, Cluster

from tickwork.job import JobSpec, Run, RunState
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow


def submit_work(store: Store, seconds: float) -> Run:
    submitted = store.submit(
        JobSpec(task="work", schedule=Once(delay=timedelta(0)), args={"seconds": seconds})
    )
    assert submitted.run is not None
    return submitted.run


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_stop_signal_lets_the_running_handler_finish_within_the_grace(
    store: Store, cluster: Cluster, sig: signal.Signals
) -> None:
    run = submit_work(store, seconds=1.5)
    worker = cluster.worker("w", "--shutdown-grace", "20s")
    wait_until(lambda: cluster.events("start", pid=worker.pid), DEADLINE)

    worker.signal(sig)
    code = worker.wait()

    assert code == 0, worker.log()
    final = store.get_run(run.id)
    assert final.state is RunState.SUCCEEDED
    assert final.attempt == 1
    assert [e["pid"] for e in cluster.events("end")] == [worker.pid]


def test_a_handler_outlasting_the_grace_is_released_and_run_once_by_another_worker(
    store: Store, cluster: Cluster
) -> None:
    run = submit_work(store, seconds=3.0)
    first = cluster.worker("first", "--shutdown-grace", "0.3s")
    wait_until(lambda: cluster.events("start", pid=first.pid), DEADLINE)

    first.signal(signal.SIGTERM)
    code = first.wait()

    assert code == 0, first.log()
    released = store.get_run(run.id)
    assert released.state is RunState.QUEUED  # back at once: no lease to wait out
    assert released.attempt == 1  # no attempt spent
    assert "released" in first.log()

    second = cluster.worker("second")
    final = wait_until(
        lambda: r if (r := store.get_run(run.id)).state is RunState.SUCCEEDED else None, DEADLINE
    )
    assert final.attempt == 1
    assert final.worker == "second"
    ends = cluster.events("end")
    assert [e["pid"] for e in ends] == [second.pid]  # the first execution was cut, not doubled
    second.signal(signal.SIGTERM)
    assert second.wait() == 0
