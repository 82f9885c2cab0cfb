"""``@app.task(max_running=1)`` is a cluster-wide mutex: with real worker processes, no
two executions of the task overlap, not even when the worker running one is SIGKILLed
(its run counts until its lease expires and the reaper rescues it)."""

from __future__ import annotations

import signal
import time
from datetime import timedelta

import pytest
from worker_procs import DEADLINE, Cluster

from tickwork.job import JobSpec, RunState
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow

RUNS = 12
SECONDS = 0.3


def test_no_two_executions_of_a_mutex_task_overlap_through_a_worker_kill(
    store: Store, cluster: Cluster
) -> None:
    cluster.scheduler()
    workers = {w.pid: w for w in (cluster.worker(n, "--concurrency", "10") for n in "ab")}
    spec = JobSpec(task="mutex", schedule=Once(delay=timedelta(0)), args={"seconds": SECONDS})
    store.submit_many([spec] * RUNS)

    def executing() -> int | None:
        """The pid running a mutex execution after two have ended, if any."""
        ends = {e["run"] for e in cluster.events("end")}
        if len(ends) < 2:
            return None
        cut = [e["pid"] for e in cluster.events("start") if e["run"] not in ends]
        return cut[0] if cut else None

    victim = wait_until(executing, DEADLINE)
    workers[victim].signal(signal.SIGKILL)
    killed_at = time.monotonic()
    workers[victim].wait()
    cluster.worker("c", "--concurrency", "10")

    def all_succeeded() -> bool:
        return store.run_stats().by_state[RunState.SUCCEEDED.value] == RUNS

    wait_until(all_succeeded, DEADLINE * 2)
    events = sorted(cluster.executions(), key=lambda e: e["mono"])
    ends = {(e["run"], e["token"]) for e in events if e["event"] == "end"}
    open_at: float | None = None
    for e in events:
        if e["event"] == "start":
            assert open_at is None, f"two executions of the mutex at once: {e}"
            open_at = e["mono"]
            if (e["run"], e["token"]) not in ends:  # the execution SIGKILL cut short
                open_at = None
                later = [x["mono"] for x in events if x["event"] == "start" and x is not e]
                after = [m for m in later if m > e["mono"]]
                # Its run held the mutex until its lease (2 s, beaten every 0.4 s) ran out.
                assert not after or min(after) >= killed_at + 1.5
        else:
            open_at = None
    assert len(ends) == RUNS
