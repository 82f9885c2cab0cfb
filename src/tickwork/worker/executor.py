"""The executor: runs handlers and turns what they do into outcomes.

- Sync handlers run on a pool of up to ``concurrency`` daemon threads, started as sync runs
  first need them (a worker of async tasks starts none); async handlers run as tasks on one
  event loop in its own thread. A thread per pool slot, not per run, and daemon threads,
  so a handler that never returns cannot keep the process alive at exit.
- A watchdog thread sleeps until the earliest deadline of a run with a timeout (no fixed
  tick), on the worker's clock, and times it out: the attempt fails with a timeout error,
  retried per the job's policy.
- Every attempt is *settled* exactly once, by whichever comes first: the handler's own
  outcome, its timeout, the worker abandoning it (lease lost or run cancelled) or releasing
  it (shutdown). Whatever comes later is dropped, never reported: that is how a late result
  can never overwrite what was decided.

Stopping a handler: an async handler's task is cancelled. A sync thread cannot be killed,
so its ``ctx.cancelled`` event is set (the shell built-in polls it and kills its process
group; a long Python handler should poll it too). A sync handler that ignores it keeps its
pool thread, and so one slot of the worker's concurrency, until it returns; the worker
logs that, and whatever the handler finally returns is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum
from typing import Any

from tickwork.clock import Clock
from tickwork.errors import InvalidArgs
from tickwork.job import ClaimedRun, result_problem
from tickwork.records import AttemptEnd
from tickwork.tasks.task import Context, Discard, Retry, Task, TaskFailed
from tickwork.worker.observe import CURRENT_RUN, Scope, Tracing, attempt_span, tracing_on
from tickwork.worker.outcome import Outcome

log = logging.getLogger("tickwork.worker")

LOOP_SHUTDOWN_TIMEOUT = 2.0
"""Seconds the event loop gives cancelled tasks to unwind when the worker stops."""


class AttemptState(StrEnum):
    RUNNING = "running"  # the handler runs; nothing decided yet
    FINISHED = "finished"  # the handler's outcome will be reported
    TIMED_OUT = "timed_out"  # a timeout failure will be reported; the handler is stopped
    ABANDONED = "abandoned"  # lease lost or run cancelled: nothing is reported
    RELEASED = "released"  # shutdown: the run is released to others


class Attempt:
    """One execution of one run by this worker, from claim until its outcome is written."""

    __slots__ = (
        "_entered",
        "_lock",
        "_task",
        "ctx",
        "deadline",
        "lease_until",
        "run",
        "state",
        "task",
    )

    def __init__(
        self,
        run: ClaimedRun,
        task: Task[..., Any],
        ctx: Context,
        deadline: float | None,
        lease_until: float | None = None,
    ) -> None:
        self.run = run
        self.task = task
        self.ctx = ctx
        self.deadline = deadline  # monotonic seconds, or None: no timeout
        # Monotonic seconds until which the lease surely holds (the worker's claim or last
        # heartbeat, less a margin), or None: not checked. A handler never starts after it.
        self.lease_until = lease_until
        self.state = AttemptState.RUNNING
        self._lock = threading.Lock()
        # Async handlers, on the loop's thread: the task, and whether its body was entered.
        self._task: asyncio.Task[None] | None = None
        self._entered = False

    @property
    def lease(self) -> tuple[int, int]:
        return (self.run.id, self.run.fencing_token)

    def settle(self, state: AttemptState) -> bool:
        """Move from RUNNING to ``state``; False when another decision came first."""
        with self._lock:
            if self.state is not AttemptState.RUNNING:
                return False
            self.state = state
            return True

    def __repr__(self) -> str:
        return f"<Attempt run={self.run.id} task={self.run.task!r} {self.state}>"


class Executor:
    """Runs attempts; calls ``on_outcome`` once per attempt it settles itself (finished or
    timed out), ``on_exit`` whenever a handler has actually returned (a slot is free), and
    ``on_late`` for an attempt whose lease may have lapsed before its handler could start
    (it must settle the attempt: the handler never starts)."""

    def __init__(
        self,
        concurrency: int,
        *,
        on_outcome: Callable[[Attempt, Outcome], None],
        on_exit: Callable[[Attempt], None],
        on_late: Callable[[Attempt], None],
        clock: Clock,
        tracing: Tracing | None = None,
    ) -> None:
        self.concurrency = concurrency
        self._tracing = tracing
        self._on_outcome = on_outcome
        self._on_exit = on_exit
        self._on_late = on_late
        self._clock = clock
        self._busy = 0
        self._sync_busy = 0  # sync attempts submitted whose pool thread has not let go
        self._busy_lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Attempt | None] = queue.SimpleQueue()
        self._pool: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._deadlines: list[tuple[float, int, Attempt]] = []
        self._deadline_lock = threading.Lock()
        self._deadlines_changed = threading.Event()  # the watchdog's wake-up
        self._seq = itertools.count()
        self._watchdog: threading.Thread | None = None
        self._stopping = False

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        loop_ready = threading.Event()
        self._loop_thread = threading.Thread(
            target=self._loop_main, args=(loop_ready,), name="tickwork-loop", daemon=True
        )
        self._loop_thread.start()
        loop_ready.wait()
        self._watchdog = threading.Thread(
            target=self._watchdog_main, name="tickwork-timeouts", daemon=True
        )
        self._watchdog.start()

    def stop(self, timeout: float = LOOP_SHUTDOWN_TIMEOUT) -> None:
        """Stop the threads. Handlers still running are not waited for (see the module doc)."""
        with self._deadline_lock:
            self._stopping = True
        self._deadlines_changed.set()
        with self._busy_lock:  # no pool thread starts after this
            for _ in self._pool:
                self._jobs.put(None)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        deadline = time.monotonic() + timeout
        for thread in [*self._pool, self._loop_thread, self._watchdog]:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def pool_size(self) -> int:
        """Pool threads started so far (for sync handlers; at most ``concurrency``)."""
        with self._busy_lock:
            return len(self._pool)

    @property
    def busy(self) -> int:
        """Handlers that have not returned yet (including stopped ones still unwinding)."""
        with self._busy_lock:
            return self._busy

    # -- running ---------------------------------------------------------------------------

    def submit_many(self, attempts: list[Attempt]) -> None:
        """Start ``attempts``; the async ones with a single wake-up of the event loop (one
        write to its self-pipe per claimed batch, not one per run)."""
        sync = sum(1 for a in attempts if not a.task.is_async)
        with self._busy_lock:
            self._busy += len(attempts)
            if sync:
                self._sync_busy += sync
                self._grow_pool()
        timed = [a for a in attempts if a.deadline is not None]
        if timed:
            with self._deadline_lock:
                if len(self._deadlines) > 2 * self.concurrency + 64:
                    # Runs far quicker than their timeouts would pile up here until their
                    # deadlines pass; drop the settled ones.
                    self._deadlines = [
                        e for e in self._deadlines if e[2].state is AttemptState.RUNNING
                    ]
                    heapq.heapify(self._deadlines)
                for attempt in timed:
                    assert attempt.deadline is not None
                    heapq.heappush(self._deadlines, (attempt.deadline, next(self._seq), attempt))
            self._deadlines_changed.set()
        on_loop = []
        for attempt in attempts:
            if attempt.task.is_async:
                on_loop.append(attempt)
            else:
                self._jobs.put(attempt)
        if not on_loop:
            return
        if threading.current_thread() is self._loop_thread:
            self._start_async_many(on_loop)
        else:
            self.call_on_loop(self._start_async_many, on_loop)

    def call_on_loop(self, fn: Callable[[Any], None], arg: Any) -> None:
        """Call ``fn(arg)`` soon on the event loop's thread."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(fn, arg)

    def interrupt(self, attempt: Attempt) -> None:
        """Ask the handler to stop: set ``ctx.cancelled``; cancel an async handler's task."""
        attempt.ctx.cancelled.set()
        loop = self._loop
        if attempt.task.is_async and loop is not None:
            with contextlib.suppress(RuntimeError):  # a closed loop: the task is gone already
                loop.call_soon_threadsafe(self._cancel_async, attempt)

    def _late(self, attempt: Attempt) -> bool:
        """True when ``attempt``'s lease may have lapsed before its handler could start
        (its worker stalled since the claim): then ``on_late`` decides, and it never
        starts. Someone may hold the run under a newer token already."""
        until = attempt.lease_until
        if until is None or self._clock.monotonic() < until:
            return False
        self._on_late(attempt)  # settles it (released), or another decision came first
        return True

    def _finish(self, attempt: Attempt, outcome: Outcome) -> None:
        if attempt.settle(AttemptState.FINISHED):
            self._on_outcome(attempt, outcome)
        else:
            log.debug("run %d: result dropped (attempt %s)", attempt.run.id, attempt.state)

    def _exited(self, attempt: Attempt) -> None:
        with self._busy_lock:
            self._busy -= 1
            if not attempt.task.is_async:
                self._sync_busy -= 1
        self._on_exit(attempt)

    # -- sync handlers: the pool -----------------------------------------------------------

    def _grow_pool(self) -> None:
        """Start pool threads until there is one per sync attempt in hand (at most
        ``concurrency``): a worker whose tasks are all async starts none. Holds _busy_lock."""
        if self._stopping:
            return
        while len(self._pool) < min(self._sync_busy, self.concurrency):
            thread = threading.Thread(
                target=self._pool_main, name=f"tickwork-pool-{len(self._pool)}", daemon=True
            )
            thread.start()
            self._pool.append(thread)

    def _pool_main(self) -> None:
        me = threading.current_thread()
        idle_name = me.name
        while (attempt := self._jobs.get()) is not None:
            me.name = f"tickwork-run-{attempt.run.id}"
            try:
                self._call_sync(attempt)
            finally:
                me.name = idle_name
                self._exited(attempt)

    def _call_sync(self, attempt: Attempt) -> None:
        if attempt.state is not AttemptState.RUNNING or self._late(attempt):
            return  # stopped before it started; settled by whoever stopped it
        self._finish(attempt, call(attempt, self._tracing))

    # -- async handlers: one event loop ----------------------------------------------------

    def _loop_main(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        ready.set()
        try:
            loop.run_forever()
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=LOOP_SHUTDOWN_TIMEOUT))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    def _start_async_many(self, attempts: list[Attempt]) -> None:
        assert self._loop is not None
        create_task = self._loop.create_task
        call = self._call_async
        for attempt in attempts:
            attempt._task = create_task(call(attempt), name=f"tickwork-run-{attempt.run.id}")

    async def _call_async(self, attempt: Attempt) -> None:
        # Every attempt whose task was created enters this body: a stop that comes first
        # does not cancel the task (_cancel_async), it settles the attempt, seen here.
        attempt._entered = True
        try:
            if attempt.state is not AttemptState.RUNNING or self._late(attempt):
                return  # stopped before it started; settled by whoever stopped it
            self._finish(attempt, await call_async(attempt, self._tracing))
        finally:
            self._exited(attempt)

    def _cancel_async(self, attempt: Attempt) -> None:
        # A task not yet entered is left alone: cancelled before its first step, it would
        # never run the body (nor its `finally`); it returns at once on entering instead.
        if attempt._task is not None and attempt._entered:
            attempt._task.cancel()

    # -- timeouts ----------------------------------------------------------------------------

    def _watchdog_main(self) -> None:
        while True:
            expired: list[Attempt] = []
            with self._deadline_lock:
                if self._stopping:
                    return
                # Cleared before the heap is read: a deadline pushed after it sets it again.
                self._deadlines_changed.clear()
                now = self._clock.monotonic()
                while self._deadlines and self._deadlines[0][0] <= now:
                    expired.append(heapq.heappop(self._deadlines)[2])
                earliest = self._deadlines[0][0] if self._deadlines else None
            if not expired:
                self._clock.wait(self._deadlines_changed, earliest)
                continue
            for attempt in expired:
                self._time_out(attempt)

    def _time_out(self, attempt: Attempt) -> None:
        if not attempt.settle(AttemptState.TIMED_OUT):
            return
        timeout = attempt.run.timeout.total_seconds() if attempt.run.timeout else 0.0
        self.interrupt(attempt)
        error = f"timed out after {timeout:g} s"
        self._on_outcome(attempt, Outcome(False, error=error, ended=AttemptEnd.TIMED_OUT))


def call(attempt: Attempt, tracing: Tracing | None = None) -> Outcome:
    """Call a sync handler in this thread with its run as the log context, inside its span
    when the application uses OpenTelemetry: what it did, as an outcome. The one way a sync
    handler is called, by a worker's pool and by :class:`tickwork.testing.TickworkTestKit`.
    (No context manager on the way without a span: a busy worker calls this tens of
    thousands of times a second.)"""
    token = CURRENT_RUN.set(attempt.run)
    try:
        if tracing is None or not tracing_on():
            return _invoke(attempt)
        with attempt_span(attempt.run, tracing, tracing.parent(attempt.run.job_id)) as span:
            outcome = _invoke(attempt, span)
            span.ended(outcome)
            return outcome
    finally:
        CURRENT_RUN.reset(token)


async def call_async(attempt: Attempt, tracing: Tracing | None = None) -> Outcome:
    """:func:`call` for an async handler, awaited in its own asyncio task (whose context
    the log context is set in)."""
    run = attempt.run
    CURRENT_RUN.set(run)  # this task's own context: nothing to reset
    if tracing is None or not tracing_on():
        return await _invoke_async(attempt)
    if tracing.cached(run.job_id):
        parent = tracing.parent(run.job_id)
    else:  # a store read: not on the event loop
        parent = await asyncio.to_thread(tracing.parent, run.job_id)
    with attempt_span(run, tracing, parent) as span:
        outcome = await _invoke_async(attempt, span)
        span.ended(outcome)
        return outcome


def _invoke(attempt: Attempt, span: Scope | None = None) -> Outcome:
    try:
        attempt.task.check_args(attempt.run.args)
        value = attempt.task.fn(attempt.ctx, **attempt.run.args)
    except BaseException as exc:  # a handler's SystemExit must not kill a pool thread
        if span is not None:
            span.raised(exc)
        return failure(exc)
    return success(value)


async def _invoke_async(attempt: Attempt, span: Scope | None = None) -> Outcome:
    try:
        attempt.task.check_args(attempt.run.args)
        value = await attempt.task.fn(attempt.ctx, **attempt.run.args)
    except asyncio.CancelledError as exc:
        # Cancelled from inside the handler, not by its worker: an ordinary failure. When
        # the worker cancelled it, the attempt is settled already and this outcome is
        # dropped.
        if span is not None:
            span.raised(exc)
        return Outcome(False, error="the handler's task was cancelled")
    except BaseException as exc:
        if span is not None:
            span.raised(exc)
        return failure(exc)
    return success(value)


NOTHING_RETURNED = Outcome(True)


def success(value: object) -> Outcome:
    """A handler returned ``value``: a dict is the result, another JSON value is wrapped. A
    result no store can hold ends the run dead (its side effects happened: retrying would
    repeat them), and is never written: one refused completion would hold back its batch."""
    if value is None:
        return NOTHING_RETURNED
    result = value if isinstance(value, dict) else {"value": value}
    problem = result_problem(result)
    if problem is not None:
        return Outcome(
            False,
            error=f"the handler's result cannot be stored: {problem}; its side effects "
            "happened, so the run is not retried",
            discard=True,
        )
    return Outcome(True, result=result)


def failure(exc: BaseException) -> Outcome:
    """What a handler's exception means for the attempt. A result it carries that no store
    can hold is dropped, and the error says so."""
    if isinstance(exc, Retry):
        outcome = Outcome(False, result=exc.result, error=exc.reason, retry_after=exc.after)
    elif isinstance(exc, Discard):
        outcome = Outcome(False, result=exc.result, error=f"discarded: {exc.reason}", discard=True)
    elif isinstance(exc, InvalidArgs):
        return Outcome(False, error=f"{exc} (not retried: the args cannot change)", discard=True)
    elif isinstance(exc, TaskFailed):
        outcome = Outcome(False, result=exc.result, error=str(exc))
    else:
        return Outcome(False, error=exception_line(exc), traceback=traceback_of(exc))
    problem = result_problem(outcome.result) if outcome.result is not None else None
    if problem is None:
        return outcome
    return replace(outcome, result=None, error=f"{outcome.error} (result dropped: {problem})")


def exception_line(exc: BaseException) -> str:
    """``Type: message`` (with its notes), as a traceback's last line says it."""
    return "".join(traceback.format_exception_only(exc)).strip()


def traceback_of(exc: BaseException) -> str:
    """The whole traceback, chained exceptions first, as Python prints it (the store cuts
    it to ATTEMPT_TRACEBACK_LIMIT; the run's error keeps its end)."""
    return "".join(traceback.format_exception(exc)).strip()
