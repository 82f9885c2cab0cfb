"""A tenant's rate holds across real worker processes, measured by the store's clock (each
run's ``started_at``): after its burst, a tenant limited to 20/s starts 18 to 22 runs a
second however many workers claim, a change of the rate while runs flow takes effect
without a restart, and a worker's SIGKILL (its runs rescued and run again) never lets the
tenant start more than its bucket allows."""

from __future__ import annotations

import signal
from datetime import datetime, timedelta

import pytest
from worker_procs import Cluster

from tickwork.job import JobSpec, Run, RunState
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow

RATE = 20.0
WINDOW = 10.0
"""Seconds the rate is measured over, after the burst."""


def submit(store: Store, tenant: str, n: int, seconds: float = 0.0) -> None:
    args = {"seconds": seconds, "tag": tenant}
    spec = JobSpec(task="work", schedule=Once(delay=timedelta(0)), tenant=tenant, args=args)
    for start in range(0, n, 500):
        store.submit_many([spec] * min(500, n - start))


def runs_of(store: Store, tenant: str) -> list[Run]:
    found: list[Run] = []
    after = None
    while True:
        page = store.list_runs(tenant=tenant, after=after, limit=1000)
        found += page.items
        if page.next_cursor is None:
            return found
        after = page.next_cursor


def starts(store: Store, tenant: str) -> list[datetime]:
    """When the store started each of the tenant's runs, in order."""
    return sorted(r.started_at for r in runs_of(store, tenant) if r.started_at is not None)


def started(store: Store, tenant: str) -> int:
    return len(starts(store, tenant))


def test_a_rate_of_20_per_second_starts_18_to_22_a_second_after_the_burst(
    store: Store, cluster: Cluster
) -> None:
    store.set_tenant_limits("acme", rate=RATE)  # the bucket: one second's worth, 20
    submit(store, "acme", 300)
    submit(store, "bulk", 300)
    for i in range(3):
        cluster.worker(f"w{i}", "--concurrency", "20")
    wait_until(lambda: started(store, "acme") >= 20 + RATE * WINDOW + 20, 60.0)
    times = starts(store, "acme")
    burst_end = times[19]
    window = [t for t in times[20:] if t <= burst_end + timedelta(seconds=WINDOW)]
    assert 18 * WINDOW <= len(window) <= 22 * WINDOW, len(window)
    # The rate never held the unlimited tenant back: it drained long before acme.
    assert store.list_tenants(tenant="bulk")[0].due == 0


def test_a_rate_changed_while_runs_flow_applies_without_a_restart(
    store: Store, cluster: Cluster
) -> None:
    store.set_tenant_limits("acme", rate=5.0, burst=1)
    submit(store, "acme", 400)
    workers = [cluster.worker(f"w{i}", "--concurrency", "20") for i in range(2)]
    wait_until(lambda: started(store, "acme") >= 10, 30.0)
    store.set_tenant_limits("acme", rate=50.0)
    changed = store.now()
    wait_until(lambda: started(store, "acme") >= 150, 30.0)
    times = starts(store, "acme")
    slow = [t for t in times if t <= changed]
    fast = [t for t in times if changed + timedelta(seconds=2) < t <= times[-1]]
    span = (times[-1] - (changed + timedelta(seconds=2))).total_seconds()
    assert len(slow) <= 1 + 5 * (slow[-1] - slow[0]).total_seconds() + 1
    assert len(fast) >= 2 * 5.0 * span, (len(fast), span)  # twice the old rate at least
    for worker in workers:
        assert worker.proc.poll() is None, worker.log()


def test_a_workers_sigkill_never_lets_the_rate_be_exceeded(store: Store, cluster: Cluster) -> None:
    store.set_tenant_limits("acme", rate=RATE)
    submit(store, "acme", 150, seconds=1.0)
    victim = cluster.worker("victim", "--concurrency", "30")
    cluster.worker("survivor", "--concurrency", "30")
    cluster.scheduler()  # its reaper rescues the victim's runs once their lease expires
    wait_until(lambda: len(cluster.events("start", pid=victim.pid)) >= 5, 30.0)
    victim.signal(signal.SIGKILL)
    victim.wait()
    wait_until(lambda: store.run_stats().by_state[RunState.SUCCEEDED.value] == 150, 60.0)
    # The last start of each run, by the store's clock: within the bucket exactly.
    assert_within_rate([t.timestamp() for t in starts(store, "acme")], slack=0.0)
    # Every execution, the killed ones too, by the monotonic clock of this host, allowing
    # half a second of jitter between a claim and its handler's first line.
    marks = sorted(e["mono"] for e in cluster.executions() if e["event"] == "start")
    assert len(marks) > 150  # the victim's runs ran again
    assert_within_rate(marks, slack=0.5)


def assert_within_rate(marks: list[float], *, slack: float) -> None:
    """No window of w seconds of ``marks`` holds more than the bucket (20) and w + slack
    seconds' worth of starts."""
    marks = sorted(marks)
    for i, first in enumerate(marks):
        for j in range(i, len(marks)):
            width = marks[j] - first
            assert j - i + 1 <= 20 + RATE * (width + slack) + 1e-6, (i, j, width)
