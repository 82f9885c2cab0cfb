"""The testing kit (:class:`TickworkTestKit`): your tasks and schedules run inline, on a
:class:`~tickwork.testing.FakeClock`; :mod:`tickwork.testing` says how.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeVar

from tickwork.app import App
from tickwork.clock import utc
from tickwork.config import TRIGGER_BATCH
from tickwork.errors import LeaseLost, UnknownTask
from tickwork.job import DEFAULT_QUEUE, DEFAULT_TENANT, ClaimedRun, Job, Run, RunState, check_args
from tickwork.records import Completion, Page, run_error
from tickwork.retry import DEFAULT_MAX_ATTEMPTS
from tickwork.schedule import Once
from tickwork.tasks.builtins import HTTP
from tickwork.tasks.task import Context, Task
from tickwork.testing.clock import FakeClock
from tickwork.worker.executor import Attempt, call, call_async
from tickwork.worker.observe import Tracing
from tickwork.worker.outcome import Outcome

KIT_NODE = "tickwork-testkit"
"""The node id the kit claims runs and leads the scheduler as."""
KIT_LEADER_LEASE = timedelta(days=366)
"""The kit's leader lease (renewed at every trigger): long, so no advance outlives it."""
LOST = "lost"
"""An :class:`Executed` outcome: the run was taken from the kit while its handler ran."""
DRAIN_LIMIT = 1000
"""Attempts one :meth:`TickworkTestKit.drain` runs at most before it fails the test: past
that, something resubmits itself for ever."""


@dataclass(frozen=True, slots=True)
class Executed:
    """One attempt the kit ran: the run, what became of it, and when (the fake time).

    ``outcome``: ``succeeded``; ``failed`` (it will be retried: ``retry_at`` says when);
    ``dead`` (its last attempt failed, or it was discarded); ``lost`` (the run was taken
    from the kit while its handler ran, by a cancel: nothing was written, as a worker whose
    lease was lost writes nothing, and a ``ctx.transaction()`` block was rolled back).

    A handler whose ``ctx.transaction()`` committed succeeded whatever it did afterwards:
    ``result`` is then None (as the worker records it) and ``error`` what it raised after
    its block, if anything."""

    run_id: int
    job_id: int
    task: str
    args: dict[str, Any]
    attempt: int
    scheduled_for: datetime
    at: datetime
    outcome: str
    result: dict[str, Any] | None
    error: str | None
    retry_at: datetime | None
    retry_after: timedelta | None = None
    """A ``Retry(after=...)``'s wait (None: the job's backoff decides, or no retry)."""

    @property
    def succeeded(self) -> bool:
        return self.outcome == "succeeded"


@dataclass(frozen=True, slots=True)
class Submission:
    """One slot of work your code asked for: a run (``run_id``, its ``state``), or a
    one-off job whose time has not come (``run_id`` None, ``state`` ``scheduled``).
    ``at`` is the slot: when it is (or was) due."""

    task: str
    args: dict[str, Any]
    at: datetime
    job_id: int
    run_id: int | None
    state: str


class TickworkTestKit:
    """Run an :class:`~tickwork.App`'s jobs inline, on a fake clock, in a test.

    ::

        clock = FakeClock(datetime(2030, 3, 30, 12, tzinfo=UTC))
        kit = TickworkTestKit(app, clock)        # app.submit/app.schedule now go by clock
        app.schedule(report, cron="0 2 * * *", tz="Europe/Berlin")
        kit.advance(days=1)                       # fires the slots in between
        kit.assert_submitted(report, at=datetime(2030, 3, 31, 1, tzinfo=UTC))
        [done] = kit.drain()                      # claim, execute, complete: here, now
        assert done.succeeded

    The app's store is used as it is: give each test its own (the ``tickwork_app`` fixture
    of the pytest plugin does). The kit leads the store's scheduler (a real scheduler on
    the same store would contend with it) and claims as the worker ``tickwork-testkit``,
    with the app's config (``allow_shell``, ``http_allow``). Handlers run in the calling
    thread (async ones on the kit's own event loop, so from an async test
    ``await kit.adrain()``); a run's ``timeout`` is not enforced. A handler's
    ``ctx.transaction()`` commits its writes with the run's completion, as on a worker.
    :meth:`perform` calls one handler without submitting anything.
    """

    def __init__(self, app: App, clock: FakeClock | None = None) -> None:
        if clock is None:
            clock = app.clock if isinstance(app.clock, FakeClock) else FakeClock()
        self.app = app
        self.clock = clock
        app.clock = clock
        self.executed: list[Executed] = []
        """Every attempt this kit ran, oldest first."""
        self._worker = app.worker(node_id=KIT_NODE)  # never started: it picks the tasks
        self._tracing = Tracing(app.store.get_job, clock)
        self._loop: asyncio.AbstractEventLoop | None = None

    def close(self) -> None:
        """Close the kit's event loop (not the app)."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    def now(self) -> datetime:
        return self.clock.now()

    # -- time ------------------------------------------------------------------------------

    def trigger(self) -> list[Run]:
        """One trigger pass now, as the scheduler leader makes it: due slots become queued
        runs, per each job's misfire and overlap policies. Returns the runs queued."""
        store = self.app.store
        now = self.clock.now()
        lease = store.acquire_leadership(KIT_NODE, KIT_LEADER_LEASE, now=now)
        if lease is None:
            raise AssertionError(
                "another scheduler leads this store: the test kit must be its only scheduler"
            )
        runs: list[Run] = []
        while True:
            result = store.trigger(lease.epoch, limit=TRIGGER_BATCH, now=now)
            runs += result.runs
            if not result.batch_full:
                return runs

    def advance(
        self,
        delta: timedelta | float | None = None,
        /,
        *,
        days: float = 0,
        hours: float = 0,
        minutes: float = 0,
        seconds: float = 0,
        drain: bool = False,
        outage: bool = False,
    ) -> list[Run]:
        """Move time forward by ``delta`` (a timedelta or seconds) plus the units given, with
        the scheduler up: the clock stops at every slot in between and triggers it on time.
        Returns the runs queued meanwhile.

        ``drain=True``: with a worker up too: what falls due (retries included) runs at its
        time, before the clock moves on. ``outage=True``: with the scheduler *down* until
        the end: one trigger pass then, so the slots missed are handled per each job's
        misfire policy (``skip``, ``once``, ``all`` within the grace) and the skipped ones
        land in the slot ledger.
        """
        step = delta.total_seconds() if isinstance(delta, timedelta) else float(delta or 0)
        step += days * 86_400 + hours * 3600 + minutes * 60 + seconds
        if step < 0:
            raise ValueError(f"time does not go backwards ({step:g} s)")
        target = self.clock.now() + timedelta(seconds=step)
        store = self.app.store
        runs: list[Run] = []
        if outage:
            self.clock.set(target)
            runs += self.trigger()
            if drain:
                self._run_due()
            return runs
        while True:
            due = [store.next_due_at()]
            if drain:
                due.append(store.next_claimable_at())
            times = [t for t in due if t is not None and t <= target]
            if not times:
                break
            if min(times) > self.clock.now():
                self.clock.set(min(times))
            queued = self.trigger()
            ran = self._run_due() if drain else []
            runs += queued
            after = [store.next_due_at()]
            if drain:
                after.append(store.next_claimable_at())
            if not queued and not ran and after == due:
                break  # due, yet nothing moves (a run at a tenant's limit): go to the end
        self.clock.set(target)
        runs += self.trigger()
        if drain:
            self._run_due()
        return runs

    # -- running ---------------------------------------------------------------------------

    def drain(self, *, retries: bool = True, limit: int = DRAIN_LIMIT) -> list[Executed]:
        """Run everything due now, inline: trigger, then claim, execute and complete (or
        fail) each run, until nothing is due. With ``retries``, a run this drain failed is
        retried by moving the clock to its retry time, until it succeeds or is dead (other
        work falling due meanwhile runs too). Returns the attempts run, in order."""
        done: list[Executed] = []
        while True:
            done += self._run_due(limit - len(done))
            if not retries:
                return done
            waiting = [
                r.run_at
                for r in (self.app.store.get_run(e.run_id) for e in done if e.retry_at)
                if r.state is RunState.FAILED
            ]
            if not waiting:
                return done
            self.clock.set(max(min(waiting), self.clock.now()))

    def _run_due(self, limit: int = DRAIN_LIMIT) -> list[Executed]:
        """Trigger, then run the claimable runs one by one (a handler may submit more)."""
        store = self.app.store
        config = self._worker.config
        ran: list[Executed] = []
        self.trigger()
        while True:
            claimed = store.claim(KIT_NODE, limit=1, lease=config.run_lease, now=self.clock.now())
            if not claimed:
                return ran
            if len(ran) >= limit:
                raise AssertionError(
                    f"drain ran {len(ran)} attempts and more are due: does a task submit "
                    "itself for ever? (pass limit= to allow more)"
                )
            ran.append(self._execute(claimed[0]))

    def _execute(self, run: Run) -> Executed:
        store = self.app.store
        claimed = ClaimedRun.of(run)
        at = self.clock.now()
        task, refusal = self._worker.task_for(claimed)
        attempt = Attempt(claimed, task, Context(claimed, self.clock.now, self._complete), None)
        outcome = refusal or self._call(attempt)
        retry_at = None
        if attempt.ctx.completed:
            # ctx.transaction() committed the completion with the handler's writes: as a
            # worker does, write nothing more; what the handler returned or raised after
            # its block is not recorded (its effect landed: the run stays succeeded).
            state, outcome = (
                "succeeded",
                Outcome(True, error=outcome.error, traceback=outcome.traceback),
            )
        elif outcome.succeeded:
            completion = Completion(run.id, run.fencing_token, outcome.result)
            rejected = store.complete_many([completion], now=self.clock.now())
            state = LOST if rejected else "succeeded"
        else:
            try:
                after = store.fail(
                    run.id,
                    run.fencing_token,
                    outcome.error or "failed",
                    traceback=outcome.traceback,
                    ended=outcome.ended,
                    retry_after=outcome.retry_after,
                    discard=outcome.discard,
                    result=outcome.result,
                    now=self.clock.now(),
                )
            except LeaseLost:
                state = LOST  # taken over meanwhile (a cancel): a worker drops it too
            else:
                state = "dead" if after.state is RunState.DEAD else "failed"
                retry_at = after.run_at if state == "failed" else None
        executed = Executed(
            run.id,
            run.job_id,
            run.task,
            run.args,
            run.attempt,
            run.scheduled_for,
            at,
            state,
            outcome.result,
            _error(outcome),
            retry_at,
            outcome.retry_after,
        )
        self.executed.append(executed)
        return executed

    def _complete(self, run_id: int, fencing_token: int) -> AbstractContextManager[Any]:
        """A handler's ``ctx.transaction()``: the kit holds the run as a worker does, so
        the handler's writes and the completion commit together, at the kit's time."""
        return self.app.store.complete_in_transaction(run_id, fencing_token, now=self.clock.now())

    def _own_transaction(self, run_id: int, fencing_token: int) -> AbstractContextManager[Any]:
        """A performed handler's ``ctx.transaction()``: no run to complete, the handler's
        writes commit alone."""
        return self.app.store.transaction()

    def perform(
        self,
        task: str | Task[..., Any],
        args: Mapping[str, Any] | None = None,
        *,
        attempt: int = 1,
        max_attempts: int | None = None,
        run_id: int = 0,
        job_id: int = 0,
        scheduled_for: datetime | None = None,
        tenant: str = DEFAULT_TENANT,
        queue: str | None = None,
        timeout: timedelta | None = None,
    ) -> Executed:
        """Call one task's handler once, here and now, with ``args`` and a context made of
        the rest, as a worker would call it (the same call, log fields and span), without
        submitting anything: Oban's ``perform_job``, for a unit test of one handler.

        ``args`` go through JSON first, as a stored job's do (a tuple arrives as a list);
        args that are not JSON, or do not fit the handler's signature, raise
        :class:`~tickwork.errors.InvalidArgs`, and a task the app does not have
        :class:`~tickwork.errors.UnknownTask`, as a submit would. The context's defaults:
        the first ``attempt`` of the task's ``max_attempts`` (else 3), ``scheduled_for``
        now, the default tenant, the task's queue, ``run_id`` and ``job_id`` 0 (no stored
        run has those). ``ctx.transaction()`` is a transaction on the app's store that
        commits the handler's writes when its block ends (there is no run to complete).

        Returns the attempt as an :class:`Executed` (``at``: now): ``succeeded``;
        ``failed`` (another attempt would follow: ``retry_after`` is a ``Retry``'s wait,
        ``retry_at`` is None since nothing was scheduled); or ``dead`` (a ``Discard``, or
        the last attempt failed). Not added to :attr:`executed`, and nothing is written
        to the store but what the handler writes itself.
        """
        name = task.name if isinstance(task, Task) else task
        found = self._worker.registry.find(name)
        if found is None and name != HTTP:
            raise UnknownTask(name)
        defaults = found.defaults if found is not None else None
        given = dict(args or {})
        check_args(given)
        if found is not None:
            found.check_args(given)
        at = self.clock.now()
        run = ClaimedRun(
            run_id,
            0,
            job_id,
            tenant,
            name,
            json.loads(json.dumps(given)),
            scheduled_for if scheduled_for is not None else at,
            attempt,
            max_attempts or (defaults and defaults.max_attempts) or DEFAULT_MAX_ATTEMPTS,
            timeout if timeout is not None else (defaults and defaults.timeout) or None,
            queue or (defaults and defaults.queue) or DEFAULT_QUEUE,
        )
        handler, refusal = self._worker.task_for(run)
        call_ = Attempt(run, handler, Context(run, self.clock.now, self._own_transaction), None)
        outcome = refusal or self._call(call_)
        if outcome.succeeded:
            state = "succeeded"
        elif outcome.discard or run.attempt >= run.max_attempts:
            state = "dead"
        else:
            state = "failed"
        return Executed(
            run.id,
            run.job_id,
            run.task,
            run.args,
            run.attempt,
            run.scheduled_for,
            at,
            state,
            outcome.result,
            _error(outcome),
            None,
            outcome.retry_after,
        )

    async def adrain(self, *, retries: bool = True, limit: int = DRAIN_LIMIT) -> list[Executed]:
        """:meth:`drain` for an ``async def`` test: ``done = await kit.adrain()``. The
        drain runs in a thread (it runs async handlers on the kit's own event loop, which
        cannot run inside the test's)."""
        return await asyncio.to_thread(partial(self.drain, retries=retries, limit=limit))

    async def aperform(
        self, task: str | Task[..., Any], args: Mapping[str, Any] | None = None, **context: Any
    ) -> Executed:
        """:meth:`perform` for an ``async def`` test: ``await kit.aperform(task, args)``."""
        return await asyncio.to_thread(partial(self.perform, task, args, **context))

    def _call(self, attempt: Attempt) -> Outcome:
        if not attempt.task.is_async:
            return call(attempt, self._tracing)
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(call_async(attempt, self._tracing))

    # -- what was submitted ----------------------------------------------------------------

    def submitted(
        self,
        task: str | Task[..., Any],
        *,
        args: Mapping[str, Any] | None = None,
        at: datetime | None = None,
        within: timedelta = timedelta(0),
    ) -> list[Submission]:
        """The slots of ``task`` submitted so far (see :class:`Submission`), earliest
        first; only those whose args contain ``args`` (a subset: the keys given, equal)
        and whose slot is ``at`` (give or take ``within``), when given."""
        name = task.name if isinstance(task, Task) else task
        found: list[Submission] = []
        client = self.app.client
        for job in _every(partial(client.list_jobs, task=name)):
            runs = list(_every(partial(client.list_runs, job_id=job.id)))
            found += [
                Submission(name, r.args, r.scheduled_for, job.id, r.id, r.state.value) for r in runs
            ]
            if not runs and _pending_once(job):
                assert job.next_run_at is not None
                found.append(Submission(name, job.args, job.next_run_at, job.id, None, "scheduled"))
        found.sort(key=lambda s: (s.at, s.run_id or 0))
        return [s for s in found if _matches(s, args, at, within)]

    def assert_submitted(
        self,
        task: str | Task[..., Any],
        *,
        args: Mapping[str, Any] | None = None,
        at: datetime | None = None,
        within: timedelta = timedelta(0),
        count: int | None = None,
    ) -> list[Submission]:
        """Fail unless ``task`` was submitted with ``args`` (a subset) for ``at`` (see
        :meth:`submitted`); ``count`` times exactly, when given. Returns the matches."""
        matches = self.submitted(task, args=args, at=at, within=within)
        if matches and (count is None or len(matches) == count):
            return matches
        wanted = _describe(task, args, at)
        everything = self.submitted(task)
        raise AssertionError(
            f"expected {wanted} submitted{'' if count is None else f' {count} times'}, "
            f"found {len(matches)}; {_listing(task, everything)}"
        )

    def assert_not_submitted(
        self,
        task: str | Task[..., Any],
        *,
        args: Mapping[str, Any] | None = None,
        at: datetime | None = None,
        within: timedelta = timedelta(0),
    ) -> None:
        """Fail if ``task`` was submitted with ``args`` (a subset) for ``at``."""
        matches = self.submitted(task, args=args, at=at, within=within)
        if matches:
            raise AssertionError(
                f"expected no {_describe(task, args, at)} submitted; {_listing(task, matches)}"
            )


T_ = TypeVar("T_")


def _every(page: Callable[..., Page[T_]]) -> Iterator[T_]:
    after: int | None = None
    while True:
        found = page(after=after)
        yield from found.items
        if found.next_cursor is None:
            return
        after = found.next_cursor


def _pending_once(job: Job) -> bool:
    return isinstance(job.schedule, Once) and job.next_run_at is not None


def _matches(
    s: Submission, args: Mapping[str, Any] | None, at: datetime | None, within: timedelta
) -> bool:
    if args is not None and any(k not in s.args or s.args[k] != v for k, v in args.items()):
        return False
    return at is None or abs(s.at - utc(at)) <= within


def _error(outcome: Outcome) -> str | None:
    """An outcome's error as the run records it (with the end of its traceback)."""
    return run_error(outcome.error, outcome.traceback) if outcome.error is not None else None


def _describe(
    task: str | Task[..., Any], args: Mapping[str, Any] | None, at: datetime | None
) -> str:
    name = task.name if isinstance(task, Task) else task
    parts = [repr(name)]
    if args is not None:
        parts.append(f"args ⊇ {dict(args)!r}")
    if at is not None:
        parts.append(f"at {utc(at).isoformat()}")
    return " ".join(parts)


def _listing(task: str | Task[..., Any], found: list[Submission]) -> str:
    name = task.name if isinstance(task, Task) else task
    if not found:
        return f"nothing of {name!r} was submitted"
    lines = [f"  {s.at.isoformat()} args={s.args!r} ({s.state})" for s in found[:20]]
    more = f"\n  ... and {len(found) - 20} more" if len(found) > 20 else ""
    return f"{name!r} was submitted {len(found)} times:\n" + "\n".join(lines) + more
