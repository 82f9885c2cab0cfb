"""Per-task timeouts: a run past its timeout fails with a timeout error and is retried per
its policy; the handler is stopped (async: cancelled; sync: ctx.cancelled is set) and a
late result is never reported."""

from __future__ import annotations

import asyncio
import threading

from worker_support import DEADLINE, finished, in_state, running

from tickwork.app import App, Context
from tickwork.job import RunState
from tickwork.store import Store
from tickwork.testing import wait_until


def test_a_sync_handler_past_its_timeout_fails_and_its_late_result_is_dropped(
    app: App, store: Store
) -> None:
    release = threading.Event()
    returned = threading.Event()

    @app.task(timeout=0.2, max_attempts=1)
    def stubborn(ctx: Context) -> str:
        release.wait(10)  # ignores ctx.cancelled on purpose
        returned.set()
        return "too late"

    job = app.submit(stubborn)
    worker = app.worker()
    with running(worker):
        run = finished(store, job)
        assert run.state is RunState.DEAD
        assert run.error == "timed out after 0.2 s"
        release.set()
        wait_until(returned.is_set, DEADLINE)
        wait_until(lambda: worker.executor.busy == 0, DEADLINE)

    after = store.get_run(run.id)
    assert after.state is RunState.DEAD
    assert after.result is None


def test_a_timed_out_sync_handler_sees_ctx_cancelled(app: App, store: Store) -> None:
    noticed = threading.Event()

    @app.task(timeout=0.2, max_attempts=1)
    def polite(ctx: Context) -> None:
        if ctx.cancelled.wait(10):
            noticed.set()

    job = app.submit(polite)
    with running(app.worker()):
        assert finished(store, job).state is RunState.DEAD
        wait_until(noticed.is_set, DEADLINE)


def test_a_timed_out_async_handler_is_cancelled(app: App, store: Store) -> None:
    cancelled = threading.Event()

    @app.task(timeout=0.2, max_attempts=1)
    async def sleeper(ctx: Context) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job = app.submit(sleeper)
    with running(app.worker()):
        run = finished(store, job)
        wait_until(cancelled.is_set, DEADLINE)

    assert run.state is RunState.DEAD
    assert run.error == "timed out after 0.2 s"


def test_a_timed_out_attempt_is_retried_per_its_policy(app: App, store: Store) -> None:
    @app.task(timeout=0.2, max_attempts=2, backoff=(0.01, 0.02))
    async def slow_then_fast(ctx: Context) -> int:
        if ctx.attempt == 1:
            await asyncio.sleep(10)
        return ctx.attempt

    job = app.submit(slow_then_fast)
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.SUCCEEDED
    assert run.result == {"value": 2}


def test_a_timeout_given_at_submit_overrides_the_tasks(app: App, store: Store) -> None:
    @app.task(timeout=60)
    async def sleeper(ctx: Context) -> None:
        await asyncio.sleep(10)

    job = app.submit(sleeper, timeout=0.2, max_attempts=1)
    with running(app.worker()):
        run = in_state(store, job, RunState.DEAD)

    assert run.error == "timed out after 0.2 s"
