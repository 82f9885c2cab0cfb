"""The worker's fault injector (``--inject-faults``; the faults are described in
:mod:`tickwork.faults`).

Each claimed run draws once; its attempt's task is wrapped so that the fault happens
where it would in production, after the handler returned and before its outcome is
written: a crash, a stall past the lease (a zombie whose late outcome is refused), or a
failure. So each injected fault makes the handler run again (unless its run was already
completed in the handler's own transaction, ``ctx.transaction()``). Every fault is marked on its run
(``Store.mark_injected``) before it takes effect, so ``tickwork runs --injected`` can
list what it made execute twice.

A crash takes the whole process down, and with it every run whose handler this process
had started and not yet reported: those are marked too (``by_run``), and the crash first
stops new handlers from starting, so that no run enters a handler unmarked in the
moment before the exit.

The database's opt-in
    Only a worker whose database opted in injects anything: it refuses to start on one that
    has not (``FaultInjectionRefused``: a staging URL mistyped as production's fails loudly
    instead of waiting for a grant). Once running, it re-reads the opt-in every
    ``recheck`` (the worker's heartbeat interval, 3 s by default), in a thread of its own so
    that no lease waits on it: one cheap read, and only in a worker that injects. Within
    that long of ``tickwork db allow-fault-injection --revoke`` it injects nothing more;
    the decision is taken when a fault would happen, not when the run was claimed, so a
    run armed before the revoke returns its handler's outcome as it is. A grant (the
    database opted in again) makes it inject again as soon. Each change is logged once. A
    read that fails (an outage) leaves the last answer in force.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.errors import StoreUnavailable
from tickwork.faults import CRASH_AFTER_HANDLER, FAIL, STALL_PAST_LEASE, FaultRates
from tickwork.service import Service
from tickwork.store.base import FaultMark
from tickwork.store.roles import WorkerStore
from tickwork.tasks.task import Context, Task, TaskFailed
from tickwork.worker.executor import Attempt

log = logging.getLogger("tickwork.worker")

CRASH_EXIT_CODE = 70
"""How a worker that injected a crash exits (EX_SOFTWARE)."""
STALL_LEASES = 2.0
"""A stalled attempt holds its outcome back this many of its leases: long enough for the
lease to expire and a reaper to rescue the run."""
INJECTED_FAILURE = (
    "injected fault: fail (the handler returned; the worker failed the attempt on purpose, "
    "tickwork worker --inject-faults)"
)


class FaultInjector(Service):
    """Arms claimed attempts with faults drawn at ``rates``, while the database allows it.

    Its loop re-reads the database's opt-in every ``recheck`` (see the module docstring);
    :meth:`start` it once the opt-in was found granted."""

    name = "tickwork-faults"

    def __init__(
        self,
        rates: FaultRates,
        store: WorkerStore,
        *,
        worker: str,
        lease: timedelta,
        held: Callable[[], list[Attempt]],
        recheck: timedelta = timedelta(seconds=3),
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        exit: Callable[[int], object] = os._exit,
    ) -> None:
        super().__init__(clock)
        self.rates = rates
        self.store = store
        self.worker = worker
        self.stall_seconds = lease.total_seconds() * STALL_LEASES
        self.recheck = recheck.total_seconds()
        self.allowed = True
        """The database's opt-in as last read (a worker starts only once it is granted)."""
        self._held = held
        self._rng = rng or random.Random()
        self._exit = exit
        self._lock = threading.Lock()
        self._crashing = False
        self._entered: set[Attempt] = set()  # handlers started and perhaps not reported
        self._stalled: set[Attempt] = set()

    # -- the opt-in ------------------------------------------------------------------------

    def run(self) -> None:
        self.started.set()
        while not self.pause(self.stopping, self.recheck):
            self.read_opt_in()

    def read_opt_in(self) -> bool:
        """Read the database's opt-in now and act on a change (logged once); returns it."""
        try:
            allowed = self.store.fault_injection_allowed()
        except Exception as exc:  # the last answer holds; an outage is logged once elsewhere
            level = logging.DEBUG if isinstance(exc, StoreUnavailable) else logging.WARNING
            log.log(level, "could not read the database's fault injection opt-in: %s", exc)
            return self.allowed
        if allowed != self.allowed:
            self.allowed = allowed
            if allowed:
                log.warning(
                    "worker %s: fault injection is allowed again on %s: it INJECTS FAULTS "
                    "on purpose again: %s",
                    self.worker,
                    self.store.health.name,
                    self.rates.describe(),
                )
            else:
                log.warning(
                    "worker %s: fault injection was revoked on %s: it injects no more faults "
                    "(tickwork db allow-fault-injection grants it again)",
                    self.worker,
                    self.store.health.name,
                )
        return allowed

    # -- arming attempts -------------------------------------------------------------------

    def arm(self, attempt: Attempt) -> None:
        """Draw this attempt's fault, and wrap its task to inject it (and to note when
        its handler starts, which a crash of another run needs to know)."""
        fault = self.rates.pick(self._rng.random())
        attempt.task = self._wrap(attempt, attempt.task, fault)

    def stalled(self, attempt: Attempt) -> bool:
        """Whether ``attempt`` stalls on purpose: its lease is not to be extended."""
        return attempt in self._stalled

    # -- the wrapped handler ---------------------------------------------------------------

    def _wrap(self, attempt: Attempt, task: Task[..., Any], fault: str | None) -> Task[..., Any]:
        fn = task.fn
        if task.is_async:

            async def call_async(ctx: Context, **args: Any) -> Any:
                while not self._enter(attempt):
                    await asyncio.sleep(3600)  # a crash is under way: never start
                value = await fn(ctx, **args)
                if fault == STALL_PAST_LEASE and self._stall(attempt):
                    # A zombie does not know it was given up on: cancelled, it runs on.
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.sleep(self.stall_seconds)
                return self._returned(attempt, fault, value)

            return Task(task.name, call_async, task.defaults, validate=task.check_args)

        def call(ctx: Context, **args: Any) -> Any:
            while not self._enter(attempt):
                time.sleep(3600)  # a crash is under way: never start
            value = fn(ctx, **args)
            if fault == STALL_PAST_LEASE and self._stall(attempt):
                time.sleep(self.stall_seconds)
            return self._returned(attempt, fault, value)

        return Task(task.name, call, task.defaults, validate=task.check_args)

    def _enter(self, attempt: Attempt) -> bool:
        with self._lock:
            if self._crashing:
                return False
            if len(self._entered) > 4 * 1024:
                self._entered &= set(self._held())
            self._entered.add(attempt)
            return True

    def _stall(self, attempt: Attempt) -> bool:
        """Stop extending the lease of an attempt whose handler returned; False when its
        run is no longer held (its transaction completed it: nothing to stall), or when the
        database no longer allows faults."""
        if attempt.ctx.completed or not self.allowed:
            return False
        self._stalled.add(attempt)
        self._mark([FaultMark(attempt.run.id, attempt.run.fencing_token, STALL_PAST_LEASE)])
        log.warning(
            "run %d (%s): injected fault: stall-past-lease: the handler returned; no "
            "heartbeat and no outcome for %g s (a zombie)",
            attempt.run.id,
            attempt.run.task,
            self.stall_seconds,
        )
        return True

    def _returned(self, attempt: Attempt, fault: str | None, value: Any) -> Any:
        if not self.allowed:
            return value  # revoked since the run was armed: its handler's outcome stands
        run = attempt.run
        if fault == FAIL:
            self._mark([FaultMark(run.id, run.fencing_token, FAIL)])
            raise TaskFailed(INJECTED_FAILURE)
        if fault == CRASH_AFTER_HANDLER:
            self._crash(attempt)
        return value

    def _crash(self, attempt: Attempt) -> None:
        with self._lock:
            self._crashing = True  # from here on no handler starts
            lost = [a for a in self._held() if a in self._entered and a is not attempt]
        run = attempt.run
        self._mark(
            [FaultMark(run.id, run.fencing_token, CRASH_AFTER_HANDLER)]
            + [
                FaultMark(a.run.id, a.run.fencing_token, CRASH_AFTER_HANDLER, by_run=run.id)
                for a in lost
            ]
        )
        log.error(
            "run %d (%s): injected fault: crash-after-handler: the handler returned; exiting "
            "before its completion is written (%d other runs executing here are lost too)",
            run.id,
            run.task,
            len(lost),
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        self._exit(CRASH_EXIT_CODE)

    def _mark(self, marks: list[FaultMark]) -> None:
        try:
            self.store.mark_injected(marks, self.worker)
        except Exception as exc:  # the fault happens all the same; only its mark is lost
            log.error(
                "could not mark injected faults on runs %s: %s", [m.run_id for m in marks], exc
            )
