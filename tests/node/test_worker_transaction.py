"""ctx.transaction() in a worker on a real store: the handler's writes and its run's
completion commit together; what the worker does with the handler's outcome after."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from tests import ledger
from worker_support import finished, running

from tickwork.app import App, Context
from tickwork.errors import InvalidTransition
from tickwork.job import ClaimedRun, RunState
from tickwork.store import Store


@pytest.fixture
def table(store: Store) -> ledger.Ledger:
    return ledger.Ledger(store.url)


def test_a_sync_handlers_transaction_writes_its_row_and_succeeds_the_run(
    app: App, store: Store, table: ledger.Ledger
) -> None:
    @app.task
    def pay(ctx: Context) -> None:
        with ctx.transaction() as conn:
            ledger.insert(conn, ctx.run_id, 1)

    job = app.submit(pay)
    with running(app.worker()):
        run = finished(store, job)
    assert run.state is RunState.SUCCEEDED
    assert run.attempt == 1
    assert table.rows() == [(run.id, 1)]


def test_an_async_handler_runs_its_transaction_in_a_thread(
    app: App, store: Store, table: ledger.Ledger
) -> None:
    @app.task
    async def pay(ctx: Context) -> None:
        def write() -> None:
            with ctx.transaction() as conn:
                ledger.insert(conn, ctx.run_id, 2)

        await asyncio.to_thread(write)

    job = app.submit(pay)
    with running(app.worker()):
        run = finished(store, job)
    assert run.state is RunState.SUCCEEDED
    assert table.rows() == [(run.id, 2)]


def test_a_handler_that_raises_in_its_transaction_writes_nothing_and_is_retried(
    app: App, store: Store, table: ledger.Ledger
) -> None:
    @app.task(max_attempts=2, backoff=(0.01, 0.01))
    def pay(ctx: Context) -> None:
        with ctx.transaction() as conn:
            ledger.insert(conn, ctx.run_id, ctx.attempt)
            if ctx.attempt == 1:
                raise RuntimeError("card declined")

    job = app.submit(pay)
    with running(app.worker()):
        run = finished(store, job)
    assert run.state is RunState.SUCCEEDED
    assert run.attempt == 2
    assert table.rows() == [(run.id, 2)]  # the first attempt's row was rolled back


def test_a_handler_that_raises_after_its_transaction_committed_stays_succeeded(
    app: App, store: Store, table: ledger.Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task(max_attempts=3)
    def pay(ctx: Context) -> dict[str, Any]:
        with ctx.transaction() as conn:
            ledger.insert(conn, ctx.run_id, 3)
        raise RuntimeError("after the commit")

    job = app.submit(pay)
    with caplog.at_level(logging.WARNING, "tickwork.worker"), running(app.worker()):
        run = finished(store, job)
    assert run.state is RunState.SUCCEEDED
    assert run.attempt == 1  # not retried: its effect landed
    assert table.rows() == [(run.id, 3)]
    assert "raised after its transaction committed" in caplog.text


def test_a_second_transaction_in_one_attempt_is_refused(
    app: App, store: Store, table: ledger.Ledger
) -> None:
    refused: list[str] = []

    @app.task
    def pay(ctx: Context) -> None:
        with ctx.transaction() as conn:
            ledger.insert(conn, ctx.run_id, 4)
        try:
            with ctx.transaction() as conn:
                ledger.insert(conn, ctx.run_id, 5)
        except InvalidTransition as exc:
            refused.append(str(exc))

    job = app.submit(pay)
    with running(app.worker()):
        run = finished(store, job)
    assert run.state is RunState.SUCCEEDED
    assert table.rows() == [(run.id, 4)]
    assert refused == [
        f"cannot commit again run {run.id}: it is succeeded (ctx.transaction() committed)"
    ]


def test_a_context_not_made_by_a_worker_has_no_transaction() -> None:
    now = datetime.now(UTC)
    run = ClaimedRun(7, 1, 3, "default", "pay", {}, now, 1, 3, None, "default")
    ctx = Context(run, lambda: now)  # a handler called directly, as in a unit test of it
    with pytest.raises(InvalidTransition, match="not held by a worker"), ctx.transaction():
        pass
