"""PostgreSQL: a claim reads no more rows for a backlog of another task's runs.

A worker that lacks a task (started without ``--app``, an old worker in a rolling deploy,
shell without ``--allow-shell``) claims beside thousands of that task's runs, due and first
in claim order. Every statement its claim sends (and its idle worker's
``next_claimable_at``) is run under ``EXPLAIN ANALYZE`` in a transaction rolled back, and
the rows its plan nodes read (returned, and removed by a filter) are counted: they stay in
the tens, not the backlog's thousands. SQLite's statements name their index (``INDEXED
BY``), so their plan is fixed by the text itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tickwork.job import JobSpec
from tickwork.schedule import Once
from tickwork.store import Store, open_store
from tickwork.store.postgres.driver import Q
from tickwork.store.queries import for_claimer

BACKLOG = 6000
"""Due runs of the task no claimer here has."""
READ_AT_MOST = 600
"""Rows a statement's plan may read: a tenth of the backlog, well above what it needs."""
MINE = ["http", "send_report"]


@pytest.fixture
def pg_store(pg_database: str) -> Iterator[Store]:
    store = open_store(pg_database)
    try:
        yield store
    finally:
        store.close()


def fill(store: Store, tenants: int, *, others: int = BACKLOG, own: int = 20) -> None:
    """``others`` due runs of send_mail (five minutes overdue), and ``own`` of send_report
    per tenant, dealt round ``tenants`` tenants."""
    now = store.now()
    old = Once(at=now - timedelta(minutes=5))
    for t in range(tenants):
        tenant = f"t{t:03}"
        mail = JobSpec(task="send_mail", schedule=old, tenant=tenant)
        store.submit_many([mail] * max(1, others // tenants), now=now)
        report = JobSpec(task="send_report", schedule=Once(at=now), tenant=tenant)
        store.submit_many([report] * own, now=now)


SCANS = {"Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan"}


def rows_read(plan: dict[str, Any]) -> int:
    """Rows the scans of ``plan`` read from tickwork_runs (returned or filtered out), over
    all their loops."""
    own = 0
    if plan["Node Type"] in SCANS and plan.get("Relation Name") == "tickwork_runs":
        rows = plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)
        own = rows * plan.get("Actual Loops", 1)
    return own + sum(rows_read(child) for child in plan.get("Plans", []))


def explained(url: str, names: list[str], params: dict[str, Any]) -> dict[str, int]:
    """Each statement of ``names`` run in turn under EXPLAIN ANALYZE, in one transaction
    rolled back: the rows its plan read."""
    read = {}
    with psycopg.connect(url) as conn:
        conn.execute("ANALYZE tickwork_runs")
        for name in names:
            # As the store sends it: the one-statement claims without the tasks line,
            # which their gate makes needless (queries.sql, complete_then_claim).
            plain = name in ("claim", "complete_then_claim")
            query = for_claimer(Q[name], None, None if plain else params["tasks"])
            row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query, params).fetchone()
            assert row is not None
            (found,) = row
            read[name] = rows_read(found[0]["Plan"])
        conn.rollback()
    return read


PARAMS = {
    "worker": "w",
    "now": None,
    "limit": 10,
    "lease": timedelta(seconds=30),
    "queues": None,
    "tasks": MINE,
    "after": "",
    "ids": [],
    "tokens": [],
    "results": [],
}


@pytest.mark.parametrize(
    ("tenants", "others", "own"), [(1, BACKLOG, 20), (50, BACKLOG, 20), (50, 1, 120)]
)
def test_the_limited_claim_reads_past_no_backlog_of_another_task(
    pg_store: Store, pg_database: str, tenants: int, others: int, own: int
) -> None:
    fill(pg_store, tenants, others=others, own=own)
    read = explained(pg_database, ["hold_limits", "claim_limited"], PARAMS)
    assert max(read.values()) < READ_AT_MOST, read
    # And it claims: a full batch of this worker's runs.
    claimed = pg_store.claim("w", limit=10, tasks=MINE)
    assert [r.task for r in claimed] == ["send_report"] * 10


@pytest.mark.parametrize(("others", "own"), [(BACKLOG, 20), (1, BACKLOG)])
def test_the_one_statement_claim_reads_past_no_backlog_of_another_task(
    pg_store: Store, pg_database: str, others: int, own: int
) -> None:
    # And reads its own tasks' runs in claim order, stopping at the batch, however many.
    fill(pg_store, 1, others=others, own=own)
    statements = ["claim", "complete_then_claim", "complete_then_claim_own"]
    read = explained(pg_database, statements, PARAMS)
    assert max(read.values()) < 50, read  # a batch of 10, and a probe or two each


def test_an_idle_workers_next_claimable_at_reads_only_its_own_tasks_runs(
    pg_store: Store, pg_database: str
) -> None:
    fill(pg_store, 1)
    read = explained(pg_database, ["next_claimable_at"], PARAMS)
    assert read["next_claimable_at"] < READ_AT_MOST, read


def test_with_a_tenants_limit_the_claim_reads_past_no_backlog_either(
    pg_store: Store, pg_database: str
) -> None:
    pg_store.set_tenant_limits("t000", max_running=1000)
    pg_store.register_task_limits({})
    fill(pg_store, 1)
    read = explained(pg_database, ["hold_limits", "claim_limited"], PARAMS)
    assert max(read.values()) < READ_AT_MOST, read


def gate_buffers(url: str, tasks: list[str] | None) -> int:
    """Buffers the claim's gate (tickwork_claim_gate, a PL/pgSQL function: EXPLAIN shows
    none of its plan, but counts the buffers its query touches) reads, run twice so that
    its second call runs the session's cached plan."""
    with psycopg.connect(url) as conn:
        conn.execute("ANALYZE tickwork_runs")
        query = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM tickwork_claim_gate(%s)"
        found: Any = None
        for _ in range(2):
            row = conn.execute(query, [tasks]).fetchone()
            assert row is not None
            found = row[0]
        plan = found[0]["Plan"]
        conn.rollback()
    return int(plan["Shared Hit Blocks"] + plan["Shared Read Blocks"])


@pytest.mark.parametrize("tasks", [MINE, None])
def test_the_claims_gate_reads_a_probe_or_two_beside_a_backlog(
    pg_store: Store, pg_database: str, tasks: list[str] | None
) -> None:
    # The backlog's index entries alone fill dozens of pages: a gate that read them would
    # touch that many; its probes touch a few each (root, inner page, leaf, heap).
    fill(pg_store, 1, others=BACKLOG)
    with psycopg.connect(pg_database) as conn:
        row = conn.execute(
            "SELECT pg_relation_size('tickwork_runs_task') / current_setting('block_size')::int"
        ).fetchone()
    assert row is not None
    assert row[0] > 40
    assert gate_buffers(pg_database, tasks) < 25
