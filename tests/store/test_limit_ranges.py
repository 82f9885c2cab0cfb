"""Conformance: every limit has a range the claim's arithmetic handles on both stores. A
value outside it is refused at input (ValidationError naming the field) and by the schema
(a CHECK, for SQL written by hand); a value at either end of it still lets the claim run.

The ranges (docs/tenant-limits.md): ``max_running`` and ``burst`` 1 to 1,000,000; ``rate``
0.00001 to 1,000,000 runs a second; ``weight`` 0.001 to 1,000. A weight of 1e-310 used to
pass "above 0" and overflow the PostgreSQL claim's ``rank / weight``, so that while only
such tenants had runs waiting every claim failed; a rate as small underflowed its bucket's
refill the same way.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwork.errors import ValidationError
from tickwork.job import JobSpec
from tickwork.records import (
    MAX_RUNNING_CEILING,
    RATE_CEILING,
    RATE_FLOOR,
    WEIGHT_CEILING,
    WEIGHT_FLOOR,
)
from tickwork.schedule import Once
from tickwork.store import Store, open_store
from tickwork.store.base import TaskLimits, TenantLimits

LEASE = timedelta(seconds=10)


def due(store: Store, at: datetime, tenant: str, n: int, task: str = "tests.run") -> None:
    specs = [JobSpec(task=task, schedule=Once(at=at), tenant=tenant) for _ in range(n)]
    store.submit_many(specs, now=at)


def test_the_ranges_are_the_documented_ones() -> None:
    assert (RATE_FLOOR, RATE_CEILING) == (0.00001, 1_000_000.0)
    assert (WEIGHT_FLOOR, WEIGHT_CEILING) == (0.001, 1_000.0)
    assert MAX_RUNNING_CEILING == 1_000_000


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("weight", 1e-310),  # above 0, and the PostgreSQL claim's rank / weight overflowed
        ("weight", 0.0009),
        ("weight", 1000.5),
        ("rate", 1e-310),  # its refill, rate * elapsed, underflowed
        ("rate", 0.000009),
        ("rate", 1_000_001.0),
        ("burst", MAX_RUNNING_CEILING + 1),
        ("max_running", MAX_RUNNING_CEILING + 1),
    ],
)
def test_a_limit_out_of_its_range_is_refused_and_changes_nothing(
    store: Store, field: str, bad: Any
) -> None:
    store.set_tenant_limits("acme", max_running=3, rate=5.0, burst=5, weight=2.0)
    with pytest.raises(ValidationError, match=field) as refused:
        store.set_tenant_limits("acme", **{field: bad})
    assert refused.value.field == field
    assert store.tenant_limits("acme") == TenantLimits("acme", 3, 5.0, 5, 2.0)


@pytest.mark.parametrize("bad", [1e-310, 0.000009, 1_000_001.0])
def test_a_task_rate_out_of_its_range_is_refused_and_writes_nothing(
    store: Store, bad: float
) -> None:
    with pytest.raises(ValidationError, match="rate"):
        store.register_task_limits({"tests.run": TaskLimits(rate=bad)})
    assert store.task_limits() == {}


def test_a_claim_runs_with_every_limit_at_the_ends_of_its_range(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("least", max_running=1, rate=RATE_FLOOR, burst=1, weight=WEIGHT_FLOOR)
    store.set_tenant_limits(
        "most",
        max_running=MAX_RUNNING_CEILING,
        rate=RATE_CEILING,
        burst=MAX_RUNNING_CEILING,
        weight=WEIGHT_CEILING,
    )
    store.register_task_limits(
        {
            "tests.slow": TaskLimits(max_running=1, rate=RATE_FLOOR, burst=1),
            "tests.fast": TaskLimits(MAX_RUNNING_CEILING, RATE_CEILING, MAX_RUNNING_CEILING),
        }
    )
    due(store, t0, "least", 5, task="tests.fast")
    due(store, t0, "most", 5, task="tests.slow")
    due(store, t0, "most", 50, task="tests.fast")
    first = Counter((r.tenant, r.task) for r in store.claim("w", limit=20, lease=LEASE, now=t0))
    # least: one run (its max_running, and its bucket's one token); most: one of tests.slow
    # (its max_running) and the rest of the batch.
    assert first == {
        ("least", "tests.fast"): 1,
        ("most", "tests.slow"): 1,
        ("most", "tests.fast"): 18,
    }
    # A second later the slowest rate has refilled 0.00001 of a token: nothing more of it,
    # and the claim (its refill, rate * 1 s, and its shares) still runs.
    later = t0 + timedelta(seconds=1)
    again = Counter((r.tenant, r.task) for r in store.claim("w", limit=40, lease=LEASE, now=later))
    assert again == {("most", "tests.fast"): 32}


def test_a_claim_runs_while_only_tenants_of_the_least_weight_have_runs(
    store: Store, t0: datetime
) -> None:
    for tenant in ("a", "b", "c"):
        store.set_tenant_limits(tenant, weight=WEIGHT_FLOOR)
        due(store, t0, tenant, 4)
    claimed = store.claim("w", limit=9, lease=LEASE, now=t0)
    assert Counter(r.tenant for r in claimed) == {"a": 3, "b": 3, "c": 3}


def test_a_claim_shares_by_the_widest_ratio_of_weights(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("light", weight=WEIGHT_FLOOR)
    store.set_tenant_limits("heavy", weight=WEIGHT_CEILING)
    due(store, t0, "light", 50)
    due(store, t0, "heavy", 50)
    # Each tenant the walk reaches gets at least one run; weights decide the rest.
    claimed = store.claim("w", limit=20, lease=LEASE, now=t0)
    assert Counter(r.tenant for r in claimed) == {"light": 1, "heavy": 19}


# -- the schema's own checks: SQL written by hand, past the store's ------------------------

OUT_OF_RANGE = [
    ("tickwork_tenants", "tenant", "weight", 1e-310),
    ("tickwork_tenants", "tenant", "weight", 1001.0),
    ("tickwork_tenants", "tenant", "rate", 1e-310),
    ("tickwork_tenants", "tenant", "rate", float("inf")),
    ("tickwork_tenants", "tenant", "rate", 2e6),
    ("tickwork_task_limits", "task", "rate", 1e-310),
    ("tickwork_task_limits", "task", "rate", float("inf")),
    ("tickwork_tenants", "tenant", "max_running", 1_000_001),
    ("tickwork_tenants", "tenant", "burst", 1_000_001),
    ("tickwork_task_limits", "task", "max_running", 1_000_001),
]


def _insert(table: str, key: str, column: str) -> str:
    extra = ", rate" if column == "burst" else ""
    values = ", 1.0" if column == "burst" else ""
    return (
        f"INSERT INTO {table} ({key}, {column}{extra}, updated_at) VALUES ('x', %(bad)s{values}, 0)"
    )


@pytest.mark.parametrize(("table", "key", "column", "bad"), OUT_OF_RANGE)
def test_the_sqlite_schema_refuses_a_limit_out_of_range(
    tmp_path: Path, table: str, key: str, column: str, bad: float
) -> None:
    path = tmp_path / "tickwork.db"
    open_store(f"sqlite:///{path}", migrate=True).close()
    with sqlite3.connect(path) as conn:
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            conn.execute(_insert(table, key, column).replace("%(bad)s", "?"), (bad,))
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)


@pytest.mark.parametrize(("table", "key", "column", "bad"), OUT_OF_RANGE)
def test_the_postgres_schema_refuses_a_limit_out_of_range(
    pg_database: str, table: str, key: str, column: str, bad: float
) -> None:
    statement = _insert(table, key, column).replace(", 0)", ", now())")
    with psycopg.connect(pg_database, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(statement, {"bad": bad})
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
