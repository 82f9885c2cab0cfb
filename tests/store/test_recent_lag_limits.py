"""Conformance: the overview's recent start lag leaves out runs of a tenant with a limit,
which a limit may hold back on purpose (their wait is not lag), as the due backlog does."""

from __future__ import annotations

from datetime import datetime, timedelta

from tickwork.job import JobSpec
from tickwork.schedule import Once
from tickwork.store import Store


def started(store: Store, at: datetime, lag: timedelta, tenant: str) -> None:
    run = store.submit(JobSpec(task="t", schedule=Once(at=at), tenant=tenant), now=at).run
    assert run is not None
    (held,) = store.claim("w1", limit=1, now=at + lag)
    assert held.id == run.id


def test_recent_lag_leaves_out_the_runs_of_a_limited_tenant(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", max_running=1, now=t0)
    started(store, t0, timedelta(seconds=2), "default")
    started(store, t0 + timedelta(seconds=5), timedelta(seconds=30), "acme")

    stats = store.run_stats(now=t0 + timedelta(minutes=1))

    assert stats.recent_lag_ms == [2000.0]
    assert store.run_stats(tenant="acme", now=t0 + timedelta(minutes=1)).recent_lag_ms == []
