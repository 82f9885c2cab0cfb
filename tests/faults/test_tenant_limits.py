"""A tenant's max_running holds across real worker processes: three ``tickwork worker``
processes of concurrency 50 share one store; a tenant limited to 5 never has more than 5
executions at once, while an unlimited tenant's runs spread over the free slots."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from worker_procs import Cluster

from tickwork.job import JobSpec, RunState
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow

LIMITED = 300
UNLIMITED = 1700  # 2,000 runs in all, as the issue counts them
HANDLER_SECONDS = 0.05
DRAIN_DEADLINE = 90.0


def submit(store: Store, tenant: str, n: int) -> None:
    args = {"seconds": HANDLER_SECONDS, "tag": tenant}
    specs = [
        JobSpec(task="work", schedule=Once(delay=timedelta(0)), tenant=tenant, args=args)
        for _ in range(n)
    ]
    for start in range(0, n, 500):
        store.submit_many(specs[start : start + 500])


def max_overlap(events: list[dict[str, Any]], tag: str) -> int:
    """The most executions of ``tag`` between their start and end lines at one moment."""
    points = sorted(
        (e["mono"], 1 if e["event"] == "start" else -1) for e in events if e["tag"] == tag
    )  # at one instant an end sorts before a start: touching is not overlapping
    most = now = 0
    for _, step in points:
        now += step
        most = max(most, now)
    return most


def test_a_limited_tenant_never_runs_more_than_max_running_across_workers(
    store: Store, cluster: Cluster
) -> None:
    store.set_tenant_limits("acme", max_running=5)
    workers = [cluster.worker(f"w{i}", "--concurrency", "50") for i in range(3)]
    submit(store, "acme", LIMITED)
    submit(store, "bulk", UNLIMITED)

    def drained() -> bool:
        counts = store.run_stats().by_state
        return counts[RunState.SUCCEEDED.value] == LIMITED + UNLIMITED

    wait_until(drained, DRAIN_DEADLINE)
    for worker in workers:
        assert worker.proc.poll() is None, worker.log()
    events = cluster.executions()
    assert len([e for e in events if e["event"] == "end"]) == LIMITED + UNLIMITED
    assert max_overlap(events, "acme") == 5
    assert max_overlap(events, "bulk") >= 30
