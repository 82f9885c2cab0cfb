"""Conformance: every store's fair share takes what store/limits.py's oracle takes.

:func:`claim_fairly` is the limited claim's picking, written once: SQLite calls it with
reads of its tables, PostgreSQL's ``claim_limited`` is it as one statement. The oracle
here is the same function over an in-memory model of the store (its runs, running runs,
token buckets and cursor), so each store is held to it on everything around the picking
too: room from counts and buckets, the walk, the reads, the cursor, the tokens spent.
Hypothesis draws tenants (weights, ``max_running``, rates), tasks' limits and due runs,
then a few claims of small batches, the clock moving between them; each claim must take
the oracle's picks. A batch comes back in claim order, so the order fair share takes runs
shows across claims: a batch of one is the next run in fair order, and the claims'
sequence carries the round-robin cursor from one to the next.

Each example reuses the test's one database: the tables are cleared and a store opened
afresh (its cursor back at the start). The CI profile's 60 examples take 20-45 s for both
stores on a loaded 2-core machine; ``FAIR_SHARE_EXAMPLES=300`` searches further.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickwork.job import JobSpec
from tickwork.records import TaskLimits, bucket_size
from tickwork.schedule import Once
from tickwork.store import open_store
from tickwork.store.limits import (
    TASK,
    TENANT,
    Bucket,
    Key,
    Run,
    claim_fairly,
    cursor,
    refill,
    walk,
    whole,
)

TENANTS = ("a", "b", "c", "d")
TASKS = ("t1", "t2")
LEASE = timedelta(minutes=10)
CLEARED = (
    "tickwork_attempts",
    "tickwork_slot_skips",
    "tickwork_runs",
    "tickwork_jobs",
    "tickwork_tenants",
    "tickwork_task_limits",
)

settings.register_profile(
    "fair_share",
    max_examples=int(os.environ.get("FAIR_SHARE_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Limits:
    max_running: int | None
    rate: float | None
    burst: int | None


limits = st.builds(
    Limits,
    max_running=st.none() | st.integers(1, 3),
    rate=st.none() | st.sampled_from([0.5, 1.0, 2.5]),
    burst=st.none() | st.integers(1, 3),
).map(lambda lim: lim if lim.rate is not None else Limits(lim.max_running, None, None))


@dataclass(frozen=True)
class Tenant:
    weight: float
    limits: Limits


tenants = st.dictionaries(
    st.sampled_from(TENANTS),
    st.builds(Tenant, weight=st.sampled_from([1.0, 1.0, 2.0, 3.0, 0.5]), limits=limits),
    min_size=1,
)
task_limits = st.dictionaries(st.sampled_from(TASKS), limits, max_size=2)
run = st.tuples(
    st.sampled_from(TENANTS),
    st.sampled_from(TASKS),
    st.integers(0, 1),  # priority
    st.sampled_from([-1, 0, 0, 0, 2]),  # due this many seconds from the start
)
claims = st.lists(st.tuples(st.integers(1, 4), st.sampled_from([0, 0, 1, 2])), min_size=1)


@dataclass
class Model:
    """What the oracle knows between claims: the runs still waiting, the running ones,
    the buckets, the cursor."""

    waiting: dict[int, tuple[str, str, int, datetime]]
    running: list[tuple[str, str]] = field(default_factory=list)
    buckets: dict[Key, Bucket] = field(default_factory=dict)
    after: str = ""

    def claim(
        self,
        limit: int,
        now: datetime,
        tenants: dict[str, Tenant],
        tasks: dict[str, Limits],
    ) -> list[int]:
        limited_tasks = [t for t, lim in tasks.items() if lim != Limits(None, None, None)]
        room: dict[Key, int] = {(TASK, t): limit for t in limited_tasks}
        for kind, named in ((TENANT, {t: v.limits for t, v in tenants.items()}), (TASK, tasks)):
            for name, lim in named.items():
                if lim.max_running is not None:
                    held = sum(1 for r in self.running if r[kind == TASK] == name)
                    room[kind, name] = lim.max_running - held
                bucket = bucket_size(lim.rate, lim.burst)
                if lim.rate is not None and bucket is not None:
                    tokens, at = self.buckets.get((kind, name), (None, None))
                    filled = refill(tokens, at, lim.rate, bucket, now)
                    self.buckets[kind, name] = (filled, max(now, at) if at else now)
                    room[kind, name] = min(room.get((kind, name), limit), whole(filled))
        due: list[Run] = sorted(
            (
                (i, tenant, task, (-priority, run_at, i))
                for i, (tenant, task, priority, run_at) in self.waiting.items()
                if run_at <= now
            ),
            key=lambda r: r[3],
        )

        def read(tenant: str, k: int, task: str | None) -> list[Run]:
            return [
                r
                for r in due
                if r[1] == tenant and (r[2] == task if task else r[2] not in limited_tasks)
            ][:k]

        order = walk([r[1] for r in due], self.after, limit)
        walked = [(t, tenants[t].weight if t in tenants else 1.0) for t in order]
        taken = claim_fairly(walked, room, read, limit=limit, limited_tasks=limited_tasks)
        self.after = cursor(order, taken, self.after)
        ids = [run_id for run_id, _, _ in taken]
        for i in ids:
            tenant, task, _, _ = self.waiting.pop(i)
            self.running.append((tenant, task))
            for key in ((TENANT, tenant), (TASK, task)):
                if key in self.buckets:
                    tokens, at = self.buckets[key]
                    self.buckets[key] = (tokens - 1, at)
        return ids


def clear(url: str) -> None:
    if url.startswith("sqlite"):
        with sqlite3.connect(Path(url.removeprefix("sqlite:///"))) as conn:
            for table in CLEARED:
                conn.execute(f"DELETE FROM {table}")
        return
    with psycopg.connect(url) as conn:
        conn.execute(f"TRUNCATE {', '.join(CLEARED)}")


@settings(settings.get_profile("fair_share"))
@given(
    tenants=tenants,
    tasks=task_limits,
    runs=st.lists(run, min_size=2, max_size=12),
    claims=claims.filter(lambda c: len(c) <= 5),
)
def test_each_claim_takes_what_the_oracle_takes_in_its_order(
    store_url: str,
    tenants: dict[str, Tenant],
    tasks: dict[str, Limits],
    runs: list[tuple[str, str, int, int]],
    claims: list[tuple[int, int]],
) -> None:
    clear(store_url)
    store = open_store(store_url)
    try:
        t0 = store.now().replace(microsecond=0)
        for tenant, v in tenants.items():
            lim = v.limits
            store.set_tenant_limits(
                tenant,
                max_running=lim.max_running,
                rate=lim.rate,
                burst=lim.burst,
                weight=v.weight,
                now=t0,
            )
        store.register_task_limits(
            {task: TaskLimits(lim.max_running, lim.rate, lim.burst) for task, lim in tasks.items()},
            now=t0,
        )
        model = Model({})
        for tenant, task, priority, delay in runs:
            at = t0 + timedelta(seconds=delay)
            spec = JobSpec(task=task, schedule=Once(at=at), tenant=tenant, priority=priority)
            [submitted] = store.submit_many([spec], now=at)
            assert submitted.run is not None
            model.waiting[submitted.run.id] = (tenant, task, priority, at)
        now = t0
        for n, (limit, wait) in enumerate(claims):
            now += timedelta(seconds=wait)
            want = model.claim(limit, now, tenants, tasks)
            got = store.claim("w", limit=limit, lease=LEASE, now=now)
            # A batch of one shows the order; a larger batch, what it took.
            assert sorted(r.id for r in got) == sorted(want), (n, want, got)
            if limit == 1:
                assert [r.id for r in got] == want, n
    finally:
        store.close()


def test_a_tenants_runs_of_a_limited_and_an_unlimited_task_stay_within_its_max_running(
    store_url: str,
) -> None:
    # Found by the property above: each task's runs were read up to the tenant's share
    # apart, and the tenant got one of each, two runs for a max_running of 1.
    store = open_store(store_url)
    try:
        t0 = store.now().replace(microsecond=0)
        store.set_tenant_limits("a", max_running=1, now=t0)
        store.register_task_limits({"t2": TaskLimits(max_running=5)}, now=t0)
        for task in ("t1", "t2"):
            store.submit_many([JobSpec(task=task, schedule=Once(at=t0), tenant="a")], now=t0)
        assert len(store.claim("w", limit=2, lease=LEASE, now=t0)) == 1
    finally:
        store.close()
