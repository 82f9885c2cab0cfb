"""A worker's concurrency when none is configured: large for async tasks (a slot is a
coroutine), small for sync ones (a slot is a thread, and CPU-bound handlers must not
thrash the cores); claims size themselves from the free slots."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timedelta
from typing import Any, cast

from worker_support import DEADLINE, CountingStore, finished, make_app, running

from tickwork.app import Context
from tickwork.config import ASYNC_CONCURRENCY, CLAIM_BATCH, SYNC_CONCURRENCY, Config
from tickwork.job import RunState
from tickwork.node import Node
from tickwork.store import Store
from tickwork.testing import wait_until
from tickwork.worker import Worker, default_concurrency


def test_a_worker_of_async_tasks_defaults_to_the_async_concurrency(store: Store) -> None:
    app = make_app(store)

    @app.task
    async def fetch(ctx: Context) -> None:
        return None

    try:
        assert app.config.concurrency is None
        assert app.worker().concurrency == ASYNC_CONCURRENCY
        assert app.worker(concurrency=7).concurrency == 7  # a configured one wins
    finally:
        app.close()


def test_one_sync_task_or_the_shell_makes_the_default_the_sync_concurrency(
    store: Store,
) -> None:
    app = make_app(store)

    @app.task
    async def fetch(ctx: Context) -> None:
        return None

    try:
        # http (sync, but waiting on the network) does not count; shell does once allowed.
        assert default_concurrency(app.registry) == ASYNC_CONCURRENCY
        assert default_concurrency(app.registry, allow_shell=True) == SYNC_CONCURRENCY

        @app.task
        def crunch(ctx: Context) -> None:
            return None

        assert app.worker().concurrency == SYNC_CONCURRENCY
    finally:
        app.close()


def test_a_worker_with_only_the_built_in_tasks_gets_the_sync_default(store: Store) -> None:
    app = make_app(store)
    try:
        assert app.worker().concurrency == SYNC_CONCURRENCY
    finally:
        app.close()


def test_concurrency_from_the_environment_is_an_integer() -> None:
    assert Config.from_env({"TICKWORK_CONCURRENCY": "32"}).concurrency == 32
    assert Config.from_env({}).concurrency is None


def test_async_runs_at_defaults_run_far_beyond_the_sync_limit_claimed_in_batches(
    store: Store,
) -> None:
    app = make_app(store)
    entered = 0
    lock = threading.Lock()
    release = asyncio.Event()
    loop_ref: list[asyncio.AbstractEventLoop] = []

    @app.task
    async def hold(ctx: Context) -> None:
        nonlocal entered
        with lock:
            entered += 1
        loop_ref[:] = [asyncio.get_running_loop()]
        await release.wait()

    total = CLAIM_BATCH + 20  # more than one claim batch, far more than the sync limit
    submitted = [app.submit(hold) for _ in range(total)]
    worker = app.worker()
    try:
        with running(worker):
            wait_until(lambda: entered == total, DEADLINE)
            assert len(worker.held) == total > SYNC_CONCURRENCY
            loop_ref[0].call_soon_threadsafe(release.set)
            for job in submitted:
                assert finished(store, job).state is RunState.SUCCEEDED
    finally:
        app.close()


def test_sync_runs_at_defaults_hold_no_more_than_the_sync_limit(store: Store) -> None:
    app = make_app(store)
    release = threading.Event()
    entered: list[int] = []

    @app.task
    def hold(ctx: Context) -> None:
        entered.append(ctx.run_id)
        release.wait(30)

    submitted = [app.submit(hold) for _ in range(SYNC_CONCURRENCY + 5)]
    worker = app.worker()
    try:
        with running(worker):
            wait_until(lambda: len(entered) == SYNC_CONCURRENCY, DEADLINE)
            assert len(worker.held) == SYNC_CONCURRENCY  # the rest stay queued for others
            assert worker.executor.pool_size == SYNC_CONCURRENCY
            release.set()
            for job in submitted:
                assert finished(store, job).state is RunState.SUCCEEDED
    finally:
        app.close()


class CallerStore(CountingStore):
    """The real store, noting which thread asks for the next due time."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.due_askers: list[str] = []

    def next_due_at(self) -> datetime | None:
        self.due_askers.append(threading.current_thread().name)
        return super().next_due_at()

    def __getattr__(self, name: str) -> Any:
        """A Node's other calls (its client's, its start's): not a worker's nor a
        scheduler's, uncounted."""
        return getattr(self._inner, name)


def test_beside_its_leading_scheduler_a_worker_does_not_poll_for_due_jobs(
    store: Store,
) -> None:
    """``tickwork run`` on SQLite: every trigger wakes the worker in-process, so the worker
    need not look for a job falling due (each look a write transaction on SQLite)."""
    app = make_app(store)

    @app.task
    async def tick(ctx: Context) -> None:
        return None

    watched = CallerStore(app.store)
    # A Node takes the whole Store (its client's calls): the rest goes by __getattr__.
    node = Node(app.config, app.registry, store=cast(Store, watched))
    try:
        node.start()
        assert node.scheduler is not None
        wait_until(lambda: node.scheduler is not None and node.scheduler.leading, DEADLINE)
        # Before its scheduler leads, a worker may look (a loaded machine starts the worker's
        # loop first); from then on it must not.
        wait_until(lambda: "trigger" in watched.due_askers, DEADLINE)
        watched.due_askers.clear()
        job = app.submit(tick, delay=timedelta(milliseconds=300))
        wait_until(lambda: store.list_runs(job_id=job.id).items, DEADLINE)  # triggered
        assert finished(store, job).state is RunState.SUCCEEDED
    finally:
        node.stop(timedelta(0))
        app.close()
    assert watched.due_askers  # the trigger loop asks
    assert Worker.name not in watched.due_askers
