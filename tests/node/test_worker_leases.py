"""Leases in process: heartbeats keep a long run's lease; a cancelled run or a lost lease
stops the handler and nothing is reported; a late completion is rejected by its token."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

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
from tickwork.config import Config
from tickwork.job import ClaimedRun, RunState
from tickwork.records import Completion
from tickwork.store import Store
from tickwork.testing import wait_until
from tickwork.worker import Worker


def far_future(store: Store) -> Any:
    """A store time at which every lease taken now has expired."""
    return store.now() + timedelta(hours=1)


def test_heartbeats_keep_a_run_longer_than_its_lease_from_being_rescued(
    app: App, store: Store
) -> None:
    done = threading.Event()

    @app.task
    def long(ctx: Context) -> int:
        done.wait(10)
        return ctx.attempt

    job = app.submit(long)
    worker = app.worker(run_lease=timedelta(milliseconds=600))
    with running(worker):
        run = in_state(store, job, RunState.RUNNING)
        beats = worker.heartbeat.passes
        # Fifteen heartbeats (every 100 ms): more than two leases of real time, which the
        # store's clock must see pass for a lease to lapse.
        while worker.heartbeat.passes < beats + 15:
            assert store.rescue().requeued == []  # what the leader's reaper does
            worker.heartbeat.wait_passes(worker.heartbeat.passes + 1)
        assert store.get_run(run.id).lease_expires_at is not None
        done.set()
        run = finished(store, job)

    assert run.state is RunState.SUCCEEDED
    assert run.attempt == 1


def test_one_heartbeat_call_extends_every_lease(app: App, store: Store) -> None:
    gate = threading.Event()

    @app.task
    def wait(ctx: Context) -> None:
        gate.wait(10)

    jobs = [app.submit(wait) for _ in range(5)]
    counting = CountingStore(app.store)
    worker = Worker(counting, app.registry, app.config)
    with running(worker):
        wait_until(lambda: len(worker.held) == 5, DEADLINE)
        wait_until(
            lambda: any(len(a[0]) == 5 for a in counting.args.get("heartbeat_many", [])), DEADLINE
        )
        gate.set()
        for job in jobs:
            finished(store, job)

    assert counting.calls["heartbeat"] == 0
    assert all(len(args[0]) <= 5 for args in counting.args["heartbeat_many"])


def test_a_cancelled_run_stops_its_sync_handler_and_reports_nothing(
    app: App, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    noticed = threading.Event()

    @app.task
    def polling(ctx: Context) -> str:
        if ctx.cancelled.wait(10):
            noticed.set()
        return "finished anyway"

    job = app.submit(polling)
    with running(app.worker()):
        run = in_state(store, job, RunState.RUNNING)
        store.cancel_run(run.id)
        wait_until(noticed.is_set, DEADLINE)
        wait_until(lambda: "cancelled; handler stopped" in caplog.text, DEADLINE)

    after = store.get_run(run.id)
    assert after.state is RunState.CANCELLED
    assert after.result is None


def test_a_cancelled_run_cancels_its_async_handler(app: App, store: Store) -> None:
    cancelled = threading.Event()

    @app.task
    async def sleeper(ctx: Context) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job = app.submit(sleeper)
    worker = app.worker()
    with running(worker):
        run = in_state(store, job, RunState.RUNNING)
        store.cancel_run(run.id)
        wait_until(cancelled.is_set, DEADLINE)
        wait_until(lambda: worker.held == [], DEADLINE)

    assert store.get_run(run.id).state is RunState.CANCELLED


def test_a_lease_lost_while_stalled_stops_the_handler_and_the_next_attempt_decides(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    app = make_app(store, run_lease=timedelta(milliseconds=500))
    first_stopped = threading.Event()

    @app.task
    def stalls_once(ctx: Context) -> int:
        if ctx.attempt == 1 and ctx.cancelled.wait(10):
            first_stopped.set()
            return -1  # never reported: the lease is gone
        return ctx.attempt

    job = app.submit(stalls_once)
    worker = app.worker()
    try:
        with running(worker):
            run = in_state(store, job, RunState.RUNNING)
            worker.heartbeat.stop()  # a stall: the lease runs out
            wait_until(lambda: store.rescue().requeued == [run.id], DEADLINE)
            final = finished(store, job)  # attempt 2, claimed by this same worker
            wait_until(first_stopped.is_set, DEADLINE)
    finally:
        app.close()

    assert final.state is RunState.SUCCEEDED
    assert final.result == {"value": 2}
    assert "lease rejected: it was taken over" in caplog.text


def test_a_heartbeat_that_finds_the_lease_lost_stops_the_handler(
    app: App, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    stopped = threading.Event()

    @app.task
    def long(ctx: Context) -> str:
        if ctx.cancelled.wait(10):
            stopped.set()
        return "never reported"

    job = app.submit(long)
    worker = app.worker()
    with running(worker):
        run = in_state(store, job, RunState.RUNNING)
        assert store.rescue(now=far_future(store)).requeued == [run.id]
        wait_until(stopped.is_set, DEADLINE)
        wait_until(lambda: worker.held == [], DEADLINE)

    after = store.get_run(run.id)
    assert after.state is RunState.QUEUED
    assert after.attempt == 2
    assert after.result is None
    assert "lease rejected: it was taken over (fencing token 1 is stale)" in caplog.text


def test_a_completion_after_the_lease_was_taken_over_is_rejected_and_logged(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    # A heartbeat too rare to notice the loss first: the completion itself is fenced out.
    app = make_app(store, run_lease=timedelta(seconds=30), run_heartbeat=timedelta(seconds=20))
    gate = threading.Event()

    @app.task
    def zombie(ctx: Context) -> str:
        gate.wait(10)
        return f"attempt {ctx.attempt}"

    job = app.submit(zombie)
    try:
        with running(app.worker()):
            run = in_state(store, job, RunState.RUNNING)
            later = far_future(store)
            store.rescue(now=later)
            (taken,) = store.claim("other-worker", limit=1, lease=timedelta(hours=2), now=later)
            assert taken.id == run.id
            gate.set()
            wait_until(lambda: "completion rejected" in caplog.text, DEADLINE)
        store.complete(taken.id, taken.fencing_token, result={"by": "other-worker"})
    finally:
        app.close()

    final = only_run(store, job)
    assert final.state is RunState.SUCCEEDED
    assert final.result == {"by": "other-worker"}


def test_claims_never_exceed_free_capacity(store: Store) -> None:
    app = make_app(store, concurrency=2, claim_batch=100)
    gate = threading.Event()

    @app.task
    def hold(ctx: Context) -> None:
        gate.wait(10)

    for _ in range(5):
        app.submit(hold)
    counting = CountingStore(app.store)
    config: Config = app.config
    worker = Worker(counting, app.registry, config)
    try:
        with running(worker):
            wait_until(lambda: len(worker.held) == 2, DEADLINE)
            # Three passes of the claim loop with no room: a wrong worker over-claims in one.
            for _ in range(3):
                done = worker.passes
                worker.wake()
                worker.wait_passes(done + 1)
            assert len(worker.held) == 2
            assert len(store.list_runs(state=RunState.RUNNING).items) == 2
            gate.set()
            wait_until(lambda: len(store.list_runs(state=RunState.SUCCEEDED).items) == 5, DEADLINE)
    finally:
        app.close()


class StalledAfterClaim(WrappedStore):
    """A store whose first claim that takes runs returns them only after ``stall`` seconds
    and the test's go-ahead: the worker stalled (SIGSTOP, a long GC pause) between the
    claim's commit and its handlers' start."""

    def __init__(self, inner: Store, stall: float) -> None:
        super().__init__(inner)
        self._stall = stall
        self.claimed = threading.Event()
        self.resume = threading.Event()

    def complete_and_claim(
        self, completions: Sequence[Completion], worker: str, **kwargs: Any
    ) -> tuple[list[int], list[ClaimedRun]]:
        rejected, runs = super().complete_and_claim(completions, worker, **kwargs)
        if runs and not self.claimed.is_set():
            began = time.monotonic()
            self.claimed.set()
            self.resume.wait(DEADLINE)
            time.sleep(max(0.0, began + self._stall - time.monotonic()))
        return rejected, runs


def stalled_worker(app: App, stall: float) -> tuple[Worker, StalledAfterClaim]:
    config = replace(
        app.config, run_lease=timedelta(seconds=1), run_heartbeat=timedelta(milliseconds=100)
    )
    store = StalledAfterClaim(app.store, stall)
    return Worker(store, app.registry, config), store


def test_a_run_whose_lease_was_taken_over_while_its_worker_stalled_before_the_start_never_starts(
    app: App, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    starts: list[int] = []

    @app.task
    def record(ctx: Context) -> None:
        starts.append(ctx.fencing_token)

    job = app.submit(record)
    worker, stalled = stalled_worker(app, stall=1.5)  # past the 1 s lease
    with running(worker):
        assert stalled.claimed.wait(DEADLINE)
        run = only_run(store, job)
        later = far_future(store)
        assert store.rescue(now=later).requeued == [run.id]
        (taken,) = store.claim("other-worker", limit=1, lease=timedelta(hours=2), now=later)
        stalled.resume.set()
        wait_until(lambda: starts or "its lease may have lapsed" in caplog.text, DEADLINE)
        wait_until(lambda: worker.held == [], DEADLINE)

    assert starts == []  # the stale claim never ran: no overlap with the new holder
    assert taken.fencing_token > run.fencing_token
    after = store.get_run(run.id)
    assert after.state is RunState.RUNNING
    assert after.fencing_token == taken.fencing_token
    assert after.worker == "other-worker"


def test_a_run_claimed_before_a_stall_longer_than_its_lease_is_released_and_run_once(
    app: App, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    starts: list[tuple[int, int]] = []

    @app.task
    def record(ctx: Context) -> None:
        starts.append((ctx.attempt, ctx.fencing_token))

    job = app.submit(record)
    worker, stalled = stalled_worker(app, stall=1.5)
    with running(worker):
        assert stalled.claimed.wait(DEADLINE)
        claimed = only_run(store, job)
        stalled.resume.set()  # no reaper here: nobody takes the run over meanwhile
        final = finished(store, job)

    assert "its lease may have lapsed" in caplog.text
    # Not started under the old claim; handed back without spending an attempt, claimed
    # again and run once.
    assert starts == [(1, final.fencing_token)]
    assert final.fencing_token > claimed.fencing_token
    assert final.state is RunState.SUCCEEDED
    assert final.attempt == 1
