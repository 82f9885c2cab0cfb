"""A worker in process on a real store: sync and async handlers, their context, results,
retries with backoff, Retry and Discard, and runs a worker cannot execute."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from worker_support import DEADLINE, WrappedStore, finished, in_state, only_run, running

from tickwork.app import App, Context, Discard, Retry
from tickwork.job import ClaimedRun, JobSpec, RunState
from tickwork.records import Completion
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.testing import wait_until
from tickwork.worker import Worker


def test_a_sync_handler_gets_its_args_and_its_return_value_is_the_result(
    app: App, store: Store
) -> None:
    @app.task
    def add(ctx: Context, a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    job = app.submit(add, {"a": 2, "b": 3})
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.SUCCEEDED
    assert run.result == {"sum": 5}
    assert run.attempt == 1
    assert run.error is None


def test_a_value_that_is_not_a_dict_is_kept_under_value(app: App, store: Store) -> None:
    @app.task
    def answer(ctx: Context) -> int:
        return 42

    job = app.submit(answer)
    with running(app.worker()):
        assert finished(store, job).result == {"value": 42}


def test_an_async_handler_runs_on_the_event_loop(app: App, store: Store) -> None:
    @app.task
    async def double(ctx: Context, x: int) -> int:
        await asyncio.sleep(0.01)
        return 2 * x

    job = app.submit(double, {"x": 21})
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.SUCCEEDED
    assert run.result == {"value": 42}


def test_sync_and_async_handlers_run_concurrently_up_to_the_worker_capacity(
    app: App, store: Store
) -> None:
    gate = threading.Event()
    inside: list[int] = []
    lock = threading.Lock()

    @app.task
    def blocker(ctx: Context) -> None:
        with lock:
            inside.append(ctx.run_id)
        gate.wait(10)

    @app.task
    async def async_blocker(ctx: Context) -> None:
        with lock:
            inside.append(ctx.run_id)
        while not gate.is_set():
            await asyncio.sleep(0.01)

    jobs = [app.submit(blocker) for _ in range(3)] + [app.submit(async_blocker) for _ in range(3)]
    worker = app.worker(concurrency=4)
    with running(worker):
        wait_until(lambda: len(inside) == 4, DEADLINE)
        assert len(worker.held) == 4  # the other two wait: no capacity, no claim
        gate.set()
        runs = [finished(store, job) for job in jobs]

    assert {run.state for run in runs} == {RunState.SUCCEEDED}


def test_the_context_describes_the_attempt(app: App, store: Store) -> None:
    seen: list[Context] = []

    @app.task
    def look(ctx: Context) -> None:
        seen.append(ctx)

    job = app.submit(look, tenant="acme")
    with running(app.worker()):
        run = finished(store, job)

    (ctx,) = seen
    assert ctx.run_id == run.id
    assert ctx.job_id == job.id
    assert ctx.attempt == 1
    assert ctx.max_attempts == 3
    assert ctx.scheduled_for == run.scheduled_for
    assert ctx.fencing_token == run.fencing_token
    assert ctx.tenant == "acme"
    assert ctx.task == "look"
    assert not ctx.cancelled.is_set()


def test_ctx_now_is_the_stores_time(app: App, store: Store) -> None:
    seen: list[tuple[datetime, datetime, datetime]] = []

    @app.task
    def look(ctx: Context) -> None:
        before = store.now()
        now = ctx.now()
        seen.append((before, now, store.now()))

    job = app.submit(look)
    with running(app.worker()):
        finished(store, job)

    ((before, now, after),) = seen
    assert now.utcoffset() == timedelta(0)
    assert before <= now <= after


def test_a_failing_handler_is_retried_with_backoff_and_succeeds_on_its_third_attempt(
    app: App, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    attempts: list[int] = []

    @app.task(max_attempts=3, backoff=(0.05, 0.1))
    def flaky(ctx: Context) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ConnectionError(f"down on attempt {ctx.attempt}")
        return "up"

    job = app.submit(flaky)
    with running(app.worker()):
        run = finished(store, job)

    assert attempts == [1, 2, 3]
    assert run.state is RunState.SUCCEEDED
    assert run.attempt == 3
    assert "attempt 1/3 failed: ConnectionError: down on attempt 1" in caplog.text


def test_a_handler_that_always_fails_ends_dead_with_its_error(app: App, store: Store) -> None:
    @app.task(max_attempts=2, backoff=(0.01, 0.02))
    def broken(ctx: Context) -> None:
        raise ValueError("no such account")

    job = app.submit(broken)
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.DEAD
    assert run.attempt == 2
    assert run.error is not None
    assert run.error.startswith("ValueError: no such account")
    assert "Traceback" in run.error


def test_retry_sets_the_wait_before_the_next_attempt(app: App, store: Store) -> None:
    @app.task
    def later(ctx: Context) -> None:
        raise Retry(after=timedelta(hours=1), reason="rate limited")

    job = app.submit(later)
    with running(app.worker()):
        run = in_state(store, job, RunState.FAILED)
        now = store.now()

    assert run.attempt == 2
    assert run.error == "rate limited"
    assert run.run_at > now + timedelta(minutes=59)


def test_discard_ends_the_run_dead_whatever_attempts_are_left(app: App, store: Store) -> None:
    @app.task(max_attempts=5)
    def hopeless(ctx: Context) -> None:
        raise Discard("the account was deleted")

    job = app.submit(hopeless)
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.DEAD
    assert run.attempt == 1
    assert run.error == "discarded: the account was deleted"


def test_a_result_that_is_not_json_ends_the_run_dead(app: App, store: Store) -> None:
    @app.task
    def odd(ctx: Context) -> object:
        return object()

    job = app.submit(odd)
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.DEAD
    assert run.error is not None
    assert "not JSON" in run.error


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("returned", "said"),
    [
        pytest.param(lambda: nested(2000), "nested deeper", id="nested-2000"),
        pytest.param(lambda: {"text": "nul \x00 here"}, "NUL", id="nul"),
        pytest.param(lambda: {"blob": "x" * 2_000_000}, "bytes", id="2-mb"),
    ],
)
def test_a_result_no_store_can_hold_ends_its_run_dead_and_blocks_no_other_completion(
    app: App, store: Store, returned: Any, said: str
) -> None:
    # Completions are written in batches: one result the store refuses must not keep the
    # others (or the worker's later ones) from being written.
    @app.task
    def unstorable(ctx: Context) -> object:
        return returned()

    @app.task
    def plain(ctx: Context) -> dict[str, int]:
        return {"run": ctx.run_id}

    bad = app.submit(unstorable)
    good = [app.submit(plain) for _ in range(5)]
    with running(app.worker()):
        refused = finished(store, bad)
        done = [finished(store, job) for job in good]
        later = app.submit(plain)
        after = finished(store, later)

    assert refused.state is RunState.DEAD
    assert refused.error is not None
    assert said in refused.error
    assert refused.result is None
    assert [run.state for run in done] == [RunState.SUCCEEDED] * 5
    assert after.state is RunState.SUCCEEDED


def test_a_retry_or_failure_result_no_store_can_hold_is_dropped_not_written(
    app: App, store: Store
) -> None:
    @app.task(max_attempts=1)
    def failing(ctx: Context) -> None:
        raise Discard("gave up", result={"trace": "nul \x00 here"})

    job = app.submit(failing)
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.DEAD
    assert run.result is None
    assert run.error is not None
    assert "gave up" in run.error
    assert "result dropped" in run.error


def claims(worker: Worker, n: int) -> None:
    """Wait until ``worker`` has claimed ``n`` more times (woken for each, so that an idle
    worker's long wait between claims is not waited out)."""
    for _ in range(n):
        passes = worker.passes
        worker.wake()
        worker.wait_passes(passes + 1)


def test_a_run_of_a_task_this_worker_does_not_have_waits_for_one_that_has_it(
    app: App, store: Store
) -> None:
    spec = JobSpec(task="elsewhere", schedule=Once(delay=timedelta(0)))
    job = store.submit(spec).job
    lacking = app.worker()
    with running(lacking):
        claims(lacking, 3)
        waiting = only_run(store, job)
        assert (waiting.state, waiting.attempt, waiting.fencing_token) == (RunState.QUEUED, 1, 0)

    @app.task(name="elsewhere")
    def elsewhere(ctx: Context) -> None:
        pass

    with running(app.worker(node_id="has-it")):
        run = finished(store, job)
    assert (run.state, run.attempt, run.worker) == (RunState.SUCCEEDED, 1, "has-it")


def test_a_worker_without_allow_shell_leaves_a_shell_run_to_one_with_it(
    app: App, store: Store
) -> None:
    job = app.submit("shell", {"argv": ["true"]})
    lacking = app.worker(allow_shell=False)
    assert "shell" not in lacking.tasks
    with running(lacking):
        claims(lacking, 3)
        assert only_run(store, job).state is RunState.QUEUED
    with running(app.worker(allow_shell=True, node_id="shell-worker")):
        run = finished(store, job)
    assert (run.state, run.attempt, run.worker) == (RunState.SUCCEEDED, 1, "shell-worker")


class ClaimsEveryTask(WrappedStore):
    """A store whose claim ignores the tasks filter (as one of another implementation
    might): the worker's refusal is the last resort then."""

    def complete_and_claim(
        self,
        completions: Sequence[Completion],
        worker: str,
        *,
        tasks: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> tuple[list[int], list[ClaimedRun]]:
        return super().complete_and_claim(completions, worker, **kwargs)


def test_a_run_handed_over_without_the_filter_is_still_refused_saying_why(
    app: App, store: Store
) -> None:
    unknown = store.submit(JobSpec(task="elsewhere", schedule=Once(delay=timedelta(0)))).job
    shell = app.submit("shell", {"argv": ["true"]})
    worker = Worker(ClaimsEveryTask(store), app.registry, app.config)
    with running(worker):
        failed = in_state(store, unknown, RunState.FAILED, RunState.DEAD)
        dead = finished(store, shell)
    assert failed.error is not None
    assert "task 'elsewhere' is not registered on worker test-worker" in failed.error
    assert (dead.state, dead.attempt) == (RunState.DEAD, 1)
    assert dead.error is not None
    assert "does not run shell tasks" in dead.error
    assert "--allow-shell" in dead.error


def test_a_retry_is_claimed_once_it_falls_due_not_before(app: App, store: Store) -> None:
    due: list[Any] = []

    @app.task
    def twice(ctx: Context) -> None:
        if ctx.attempt == 1:
            raise Retry(after=0.3)

    job = app.submit(twice)
    with running(app.worker()):
        due.append(in_state(store, job, RunState.FAILED, RunState.SUCCEEDED).run_at)
        run = finished(store, job)

    assert run.state is RunState.SUCCEEDED
    assert run.attempt == 2
    assert run.started_at is not None
    assert run.started_at >= due[0]


def test_runs_of_other_queues_are_left_alone(app: App, store: Store) -> None:
    @app.task
    def noop(ctx: Context) -> None:
        pass

    mine = app.submit(noop, queue="mine")
    theirs = app.submit(noop, queue="theirs")
    with running(app.worker(queues=("mine",))):
        assert finished(store, mine).state is RunState.SUCCEEDED
        assert only_run(store, theirs).state is RunState.QUEUED


def test_pool_threads_start_as_sync_runs_need_them_and_no_more_than_concurrency(
    app: App, store: Store
) -> None:
    release = threading.Event()
    holding: list[str] = []

    @app.task
    async def quick(ctx: Context) -> None:
        return None

    @app.task
    def hold(ctx: Context) -> None:
        holding.append(threading.current_thread().name)
        release.wait(30)

    worker = app.worker(concurrency=4)
    quick_jobs = [app.submit(quick) for _ in range(5)]
    with running(worker):
        for job in quick_jobs:
            assert finished(store, job).state is RunState.SUCCEEDED
        assert worker.executor.pool_size == 0  # async tasks only: no thread was started

        hold_jobs = [app.submit(hold) for _ in range(2)]
        wait_until(lambda: len(holding) == 2, DEADLINE)
        assert worker.executor.pool_size == 2  # one per sync run in hand
        hold_jobs += [app.submit(hold) for _ in range(3)]
        wait_until(lambda: len(holding) == 4, DEADLINE)
        assert worker.executor.pool_size == 4  # the fifth waits: concurrency is 4
        assert len(set(holding)) == 4  # each on a thread of its own
        release.set()
        for job in hold_jobs:
            assert finished(store, job).state is RunState.SUCCEEDED
        assert worker.executor.pool_size == 4  # threads are kept, not started per run
