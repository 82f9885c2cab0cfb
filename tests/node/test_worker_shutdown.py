"""Stopping a worker: running handlers finish within the grace, or are released without
spending an attempt; no new claims once stopping; completions are written in batches."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest
from worker_support import (
    DEADLINE,
    CountingStore,
    WrappedStore,
    finished,
    in_state,
    make_app,
    only_run,
    running,
)

from tickwork.app import App, Context
from tickwork.job import Job, RunState
from tickwork.records import Completion
from tickwork.store import Store
from tickwork.tasks.task import Task
from tickwork.testing import wait_until
from tickwork.worker import Worker
from tickwork.worker.reporter import SURPRISE_LIMIT


def slow_task(app: App) -> tuple[Task[..., str], threading.Event, threading.Event]:
    """A task ``slow`` on ``app`` that sets ``started``, waits for ``finish`` (10 s at
    most) and returns "done"."""
    started = threading.Event()
    finish = threading.Event()

    @app.task
    def slow(ctx: Context) -> str:
        started.set()
        finish.wait(10)
        return "done"

    return slow, started, finish


def test_a_graceful_stop_lets_a_running_handler_finish_within_the_grace(
    app: App, store: Store
) -> None:
    slow, started, finish = slow_task(app)
    job = app.submit(slow)
    worker = app.worker()
    worker.start()
    try:
        wait_until(started.is_set, DEADLINE)
        threading.Timer(0.2, finish.set).start()
        worker.stop_gracefully(timedelta(seconds=10))
    finally:
        worker.stop()

    run = only_run(store, job)
    assert run.state is RunState.SUCCEEDED
    assert run.result == {"value": "done"}


def test_a_handler_still_running_when_the_grace_ends_is_released_without_spending_an_attempt(
    app: App, store: Store
) -> None:
    started = threading.Event()
    stopped = threading.Event()

    @app.task
    def endless(ctx: Context) -> None:
        started.set()
        if ctx.cancelled.wait(10):
            stopped.set()

    job = app.submit(endless)
    worker = app.worker()
    worker.start()
    try:
        wait_until(started.is_set, DEADLINE)
        worker.stop_gracefully(timedelta(milliseconds=100))
    finally:
        worker.stop()

    assert stopped.is_set()
    run = only_run(store, job)
    assert run.state is RunState.QUEUED
    assert run.attempt == 1
    assert run.worker is None or run.lease_expires_at is None


def test_hurry_cuts_the_grace_short(app: App, store: Store) -> None:
    started = threading.Event()

    @app.task
    def endless(ctx: Context) -> None:
        started.set()
        ctx.cancelled.wait(30)

    job = app.submit(endless)
    worker = app.worker()
    worker.start()
    try:
        wait_until(started.is_set, DEADLINE)
        threading.Timer(0.1, worker.hurry).start()
        worker.stop_gracefully(timedelta(seconds=60))  # returns long before the grace
    finally:
        worker.stop()

    assert only_run(store, job).state is RunState.QUEUED


def test_a_stopping_worker_claims_nothing_new(app: App, store: Store) -> None:
    started = threading.Event()
    finish = threading.Event()

    @app.task
    def first(ctx: Context) -> None:
        started.set()
        finish.wait(10)

    @app.task
    def second(ctx: Context) -> None:
        pass

    job = app.submit(first)
    worker = app.worker()
    worker.start()
    try:
        wait_until(started.is_set, DEADLINE)
        stopper = threading.Thread(target=worker.stop_gracefully, args=(timedelta(seconds=10),))
        stopper.start()
        wait_until(lambda: not worker.running, DEADLINE)  # the claim loop has ended
        later = app.submit(second)
        finish.set()
        stopper.join(10)
        assert finished(store, job).state is RunState.SUCCEEDED
    finally:
        worker.stop()

    assert only_run(store, later).state is RunState.QUEUED


def test_stop_is_idempotent_and_safe_before_start(app: App) -> None:
    worker = app.worker()
    worker.stop()
    worker.stop()
    worker.stop_gracefully()


def test_completions_are_written_in_batches(store: Store) -> None:
    app = make_app(store, concurrency=50)
    gate = threading.Event()

    @app.task
    def quick(ctx: Context) -> int:
        gate.wait(10)
        return ctx.run_id

    jobs = [app.submit(quick) for _ in range(100)]
    counting = CountingStore(app.store)
    worker = Worker(counting, app.registry, app.config)
    worker.start()
    try:
        wait_until(lambda: len(worker.held) == 50, DEADLINE)
        gate.set()  # fifty results at once
        for job in jobs:
            in_state(store, job, RunState.SUCCEEDED)
    finally:
        worker.stop()
        app.close()

    # The claim loop writes completions with its claims; the reporter only after it stops.
    assert counting.calls["complete"] == 0
    batched = [
        args
        for args in counting.args.get("complete_many", []) + counting.args["complete_and_claim"]
        if args[0]
    ]
    assert len(batched) < len(jobs)
    # Each run's completion went in a batch. A call that fails (a loaded box: a timeout)
    # puts its completions back in line and they go again, so count runs, not entries.
    assert len({c.run_id for args in batched for c in args[0]}) == len(jobs)


def test_a_running_worker_shows_in_the_cluster_view_until_it_stops(app: App, store: Store) -> None:
    worker = app.worker()
    with running(worker):
        (node,) = wait_until(store.list_nodes, DEADLINE)
        assert (node.id, node.kind) == ("test-worker", "worker")
        assert node.info["concurrency"] == worker.concurrency

    assert store.list_nodes() == []


class FailsToComplete(WrappedStore):
    """A store whose first ``failures`` calls of ``complete_many`` raise an error that is
    not a StoreError (a bug, a driver's surprise)."""

    def __init__(self, inner: Store, failures: int) -> None:
        super().__init__(inner)
        self._left = failures
        self.calls = 0
        self.failed = threading.Event()

    def complete_many(
        self, completions: Sequence[Completion], *, now: datetime | None = None
    ) -> list[int]:
        self.calls += 1
        if self._left > 0:
            self._left -= 1
            self.failed.set()
            raise RuntimeError("a surprise")
        return self._inner.complete_many(completions, now=now)


def stop_while_running(app: App, store: FailsToComplete, caplog: pytest.LogCaptureFixture) -> Job:
    """Submit a slow run, and stop the worker gracefully while it runs: its completion is
    the reporter's to write (the claim loop has stopped), through ``store``."""
    caplog.set_level(logging.INFO, logger="tickwork")
    slow, started, finish = slow_task(app)
    job = app.submit(slow)
    worker = Worker(store, app.registry, app.config)
    worker.start()
    stopping = threading.Thread(target=worker.stop_gracefully, args=(timedelta(seconds=10),))
    try:
        wait_until(started.is_set, DEADLINE)
        stopping.start()
        wait_until(lambda: not worker.running, DEADLINE)
        finish.set()
        wait_until(store.failed.is_set, DEADLINE)
        stopping.join(DEADLINE)
    finally:
        finish.set()
        worker.stop()
    return job


def test_a_completion_whose_write_raised_an_unexpected_error_is_written_again(
    app: App, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    failing = FailsToComplete(app.store, failures=1)
    job = stop_while_running(app, failing, caplog)

    run = finished(store, job)
    assert run.state is RunState.SUCCEEDED
    assert run.result == {"value": "done"}
    assert "completing 1 runs failed, will retry" in caplog.text


def test_a_completion_that_always_raises_unexpectedly_is_dropped_not_retried_for_ever(
    app: App, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    failing = FailsToComplete(app.store, failures=1_000)
    job = stop_while_running(app, failing, caplog)

    # Tried SURPRISE_LIMIT times, then given up on: the stop is not held by it, and the
    # run is left to be rescued when its lease expires (then executed again).
    assert failing.calls == SURPRISE_LIMIT
    assert "is dropped" in caplog.text
    assert "stopping with outcomes unwritten" not in caplog.text
    assert only_run(store, job).state is RunState.RUNNING
