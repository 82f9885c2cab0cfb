"""app.submit(..., conn=...) with a worker running on PostgreSQL: a rolled-back submit never
runs; a committed one runs once, its worker woken by the commit's notification."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

import psycopg
import pytest
from worker_support import DEADLINE, running

from tickwork.app import App, Context
from tickwork.job import Run, RunState
from tickwork.store import Store
from tickwork.testing import wait_until
from tickwork.worker.worker import IDLE_RECHECK

WAKE_LIMIT = timedelta(seconds=2)
"""From the commit to the run's start: generous for a loaded box, and well under the
IDLE_RECHECK (5 s) a worker that missed the notification would take."""


@pytest.fixture
def backend() -> str:
    """The shared ``store`` fixture, on PostgreSQL only: the commit's notification wakes
    the worker."""
    return "postgres"


def test_a_committed_submit_runs_once_started_within_moments_of_the_commit(
    app: App, store: Store
) -> None:
    assert WAKE_LIMIT < IDLE_RECHECK
    executed: list[int] = []
    lock = threading.Lock()

    @app.task
    def receipt(ctx: Context, order: int) -> None:
        with lock:
            executed.append(ctx.run_id)

    with running(app.worker()):
        time.sleep(0.5)  # the worker is idle, waiting on its notification
        with psycopg.connect(store.url) as conn:
            conn.execute("CREATE TEMP TABLE orders (id int)")
            conn.execute("INSERT INTO orders VALUES (42)")
            job = app.submit(receipt, {"order": 42}, conn=conn)
            time.sleep(0.5)
            assert not executed  # invisible to the worker until the commit
            row = conn.execute("SELECT clock_timestamp()").fetchone()
            assert row is not None
            committed_at: datetime = row[0]
        (run,) = wait_until(
            lambda: store.list_runs(job_id=job.id).items if executed else None, DEADLINE
        )
        done = wait_until(lambda: _succeeded(store, run.id), DEADLINE)
        time.sleep(0.3)
    assert executed == [run.id]
    assert done.started_at is not None
    assert done.started_at - committed_at < WAKE_LIMIT


def test_a_rolled_back_submit_never_runs(app: App, store: Store) -> None:
    executed: list[int] = []

    @app.task
    def receipt(ctx: Context) -> None:
        executed.append(ctx.run_id)

    with running(app.worker()):
        conn = psycopg.connect(store.url)
        try:
            app.submit(receipt, conn=conn)
            conn.rollback()
        finally:
            conn.close()
        time.sleep(1.0)
    assert executed == []
    assert store.list_jobs().items == []
    assert store.list_runs().items == []


def _succeeded(store: Store, run_id: int) -> Run | None:
    run = store.get_run(run_id)
    return run if run.state is RunState.SUCCEEDED else None
