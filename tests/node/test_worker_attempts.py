"""What a worker in process writes into a run's history: a raised exception's line and
whole traceback, a timeout, a release at shutdown, and a cancel while running; each with
the worker's node id and the token its claim issued."""

from __future__ import annotations

import threading
from datetime import timedelta

from worker_support import DEADLINE, finished, in_state, only_run, running

from tickwork.app import App, Context
from tickwork.job import RunState
from tickwork.records import AttemptEnd
from tickwork.store import Store
from tickwork.testing import wait_until


def test_a_raised_exception_keeps_its_line_and_whole_traceback_on_each_attempt(
    app: App, store: Store
) -> None:
    @app.task(max_attempts=2, backoff=(0.01, 0.02))
    def charge(ctx: Context, card: str) -> None:
        raise ValueError(f"card {card} declined on attempt {ctx.attempt}")

    job = app.submit(charge, {"card": "4242"})
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.DEAD
    first, second = store.run_attempts(run.id).attempts
    assert [a.ended for a in (first, second)] == [AttemptEnd.FAILED, AttemptEnd.FAILED]
    assert first.error == "ValueError: card 4242 declined on attempt 1"
    assert second.error == "ValueError: card 4242 declined on attempt 2"
    assert first.traceback is not None
    assert first.traceback.startswith("Traceback (most recent call last):")
    assert "in charge" in first.traceback
    assert first.traceback.endswith("ValueError: card 4242 declined on attempt 1")
    assert {a.worker for a in (first, second)} == {"test-worker"}
    assert first.fencing_token < second.fencing_token == run.fencing_token
    # The run's own error is still the last one, with the end of its traceback.
    assert run.error is not None
    assert run.error.startswith("ValueError: card 4242 declined on attempt 2\n\nTraceback")


def test_a_timeout_ends_the_attempt_as_timed_out(app: App, store: Store) -> None:
    @app.task(timeout=0.2, max_attempts=1)
    def stuck(ctx: Context) -> None:
        ctx.cancelled.wait(10)

    job = app.submit(stuck)
    with running(app.worker()):
        run = finished(store, job)

    [attempt] = store.run_attempts(run.id).attempts
    assert (attempt.ended, attempt.error, attempt.traceback) == (
        AttemptEnd.TIMED_OUT,
        "timed out after 0.2 s",
        None,
    )
    assert attempt.started_at is not None
    assert attempt.ended_at is not None
    assert attempt.ended_at - attempt.started_at >= timedelta(seconds=0.2)


def test_a_run_released_at_shutdown_shows_a_released_attempt(app: App, store: Store) -> None:
    started = threading.Event()

    @app.task
    def endless(ctx: Context) -> None:
        started.set()
        ctx.cancelled.wait(10)

    job = app.submit(endless)
    worker = app.worker()
    worker.start()
    try:
        wait_until(started.is_set, DEADLINE)
        worker.stop_gracefully(timedelta(milliseconds=100))
    finally:
        worker.stop()

    run = only_run(store, job)
    assert run.state is RunState.QUEUED
    [attempt] = store.run_attempts(run.id).attempts
    assert (attempt.attempt, attempt.worker, attempt.ended) == (
        1,
        "test-worker",
        AttemptEnd.RELEASED,
    )


def test_a_run_cancelled_while_running_shows_a_cancelled_attempt(app: App, store: Store) -> None:
    started = threading.Event()

    @app.task
    def endless(ctx: Context) -> None:
        started.set()
        ctx.cancelled.wait(10)

    job = app.submit(endless)
    with running(app.worker()):
        wait_until(started.is_set, DEADLINE)
        held = in_state(store, job, RunState.RUNNING)
        app.client.cancel_run(held.id)
        run = finished(store, job)

    assert run.state is RunState.CANCELLED
    [attempt] = store.run_attempts(run.id).attempts
    assert (attempt.ended, attempt.worker, attempt.fencing_token) == (
        AttemptEnd.CANCELLED,
        "test-worker",
        held.fencing_token,
    )
