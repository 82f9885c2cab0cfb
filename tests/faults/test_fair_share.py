"""Fair share across real worker processes on PostgreSQL: tenant A has 100,000 due runs;
tenant B then submits 100. B's runs start promptly (p99 lag, by the store's clock, from
their slot to their start) while A drains, and A goes on draining meanwhile."""

from __future__ import annotations

import statistics
from datetime import timedelta

import pytest
from test_tenant_rates import runs_of
from worker_procs import Cluster

from tickwork.job import JobSpec
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow

BACKLOG = 100_000
LIGHT = 100
P99_LAG = 1.0
"""Seconds: five times the issue's 200 ms, so a loaded machine does not fail it; the
figure measured is printed (pytest -s) and given in benchmarks/README.md."""


def specs(tenant: str, n: int) -> list[JobSpec]:
    spec = JobSpec(task="work", schedule=Once(delay=timedelta(0)), tenant=tenant)
    return [spec] * n


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_light_tenant_starts_promptly_while_a_heavy_backlog_drains(
    store: Store, cluster: Cluster
) -> None:
    for _ in range(BACKLOG // 5000):
        store.submit_many(specs("heavy", 5000))
    for i in range(2):
        cluster.worker(f"w{i}", "--concurrency", "50")

    def succeeded(tenant: str) -> int:
        status = store.list_tenants(tenant=tenant)[0]
        return BACKLOG - status.due - status.running if tenant == "heavy" else 0

    wait_until(lambda: succeeded("heavy") >= 2000, 60.0)
    before = succeeded("heavy")
    store.submit_many(specs("light", LIGHT))
    wait_until(lambda: all(r.started_at for r in runs_of(store, "light")), 30.0)
    after = succeeded("heavy")
    light = runs_of(store, "light")
    lags = sorted((r.started_at - r.scheduled_for).total_seconds() for r in light)  # type: ignore[operator]
    p99 = lags[int(0.99 * (len(lags) - 1))]
    print(f"light tenant lag: p50 {statistics.median(lags) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    assert p99 < P99_LAG, lags
    assert after > before  # the heavy tenant's runs went on starting meanwhile
    assert store.list_tenants(tenant="heavy")[0].due > 0  # ... and B did not wait for them all
