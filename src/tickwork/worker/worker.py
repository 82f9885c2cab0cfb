"""The :class:`Worker` service and its constants: the claim loop, and what it does with
each run it claims. How it works (claims, outages, leases, outcomes, stopping) is told in
:mod:`tickwork.worker`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.config import Config
from tickwork.errors import FaultInjectionRefused, StoreUnavailable
from tickwork.job import ClaimedRun
from tickwork.service import Backoff, Service
from tickwork.skew import SkewWatch
from tickwork.store.base import (
    CHANNEL_RUNS,
    LISTEN_NOTIFY,
    LeaseStatus,
    Listener,
)
from tickwork.store.roles import WorkerStore
from tickwork.tasks.builtins import HTTP, http_task
from tickwork.tasks.egress import EgressPolicy
from tickwork.tasks.registry import Registry
from tickwork.tasks.task import Context, Task
from tickwork.worker.capability import (
    claimable_tasks,
    default_concurrency,
    never_run,
    task_limits,
    why_refused,
)
from tickwork.worker.executor import Attempt, AttemptState, Executor
from tickwork.worker.faults import FaultInjector
from tickwork.worker.heartbeat import Heartbeat
from tickwork.worker.observe import Tracing
from tickwork.worker.outcome import Outcome
from tickwork.worker.reporter import Reporter

log = logging.getLogger("tickwork.worker")

IDLE_RECHECK = timedelta(seconds=5)
"""With LISTEN/NOTIFY, an idle worker still re-checks this often: rescues and other
workers' retries are not notified."""
LISTEN_WAIT = 0.02
"""Seconds the listener thread blocks per wait: it notices a stop this fast, and a stopping
worker waits for it. (A wait is a select on the LISTEN socket, not a query: fifty a second
cost a few milliseconds of CPU.)"""
DUE_CATCHUP = 1.0
DUE_POLL = 0.01
"""Without LISTEN/NOTIFY, for DUE_CATCHUP seconds after a job falls due the worker looks
for its run every DUE_POLL seconds instead of every poll interval: runs start within
milliseconds of their slot across processes on SQLite too."""
CLAIM_RETRY = (0.05, 1.0)
"""Seconds: first and longest wait before claiming again after the store failed (each
jittered, see :class:`~tickwork.service.Backoff`)."""
ARRIVAL_TIMEOUT = 5.0
"""Seconds a stopping worker waits for its last claimed runs to be held."""
REPORT_DRAIN_TIMEOUT = 10.0
"""Seconds a stopping worker waits for its last outcomes to be written."""
START_MARGIN = (0.1, 1.0)
"""A handler starts only while at least this share of its lease (at most this many
seconds) surely remains, counted from when the claim or the last heartbeat that kept the
lease was sent: less, and it could still be starting when the lease lapses."""


def start_margin(lease: timedelta) -> float:
    """Seconds of lease a handler needs left to start (:data:`START_MARGIN`)."""
    share, cap = START_MARGIN
    return min(share * lease.total_seconds(), cap)


@dataclass(frozen=True, slots=True)
class _Pass:
    """What one pass of a claim loop did."""

    wanted: int = 0
    claimed: int = 0
    no_room: bool = False  # nothing to claim room for, nothing to write
    failed: bool = False  # the store failed


class Worker(Service):
    name = "tickwork-worker"

    def __init__(
        self,
        store: WorkerStore,
        registry: Registry,
        config: Config | None = None,
        clock: Clock = SYSTEM_CLOCK,
        *,
        egress: EgressPolicy | None = None,
        hears_triggers: Callable[[], bool] | None = None,
    ) -> None:
        """``egress`` decides where ``http`` runs may connect; by default the policy of
        ``config.http_allow`` on the system's resolver. ``hears_triggers`` says whether
        every trigger now wakes this worker even without LISTEN/NOTIFY (``tickwork run``:
        the scheduler beside it leads, and its triggers signal in-process); then a job
        falling due is not polled for."""
        super().__init__(clock)
        self.store = store
        self.registry = registry
        self.config = config or Config()
        self.node_id = self.config.node_id
        self.concurrency = self.config.concurrency or default_concurrency(
            registry, allow_shell=self.config.allow_shell
        )
        self.egress = egress or EgressPolicy.from_entries(self.config.http_allow)
        self.tasks = claimable_tasks(self.registry, allow_shell=self.config.allow_shell)
        """The tasks this worker claims runs of (the claim's filter): ``http`` always,
        ``shell`` only with ``allow_shell``, and its app's tasks."""
        self.skew = SkewWatch.on(self.node_id, clock, store.now)
        self._http = http_task(self.egress)
        self._hears_triggers = hears_triggers or _never
        self._held: dict[int, Attempt] = {}
        self._held_lock = threading.Lock()
        self._wakeup = threading.Event()
        self._retry_now = threading.Event()  # a stop, or the store's comeback
        self._hurry = threading.Event()
        self._arriving = 0  # runs claimed and not yet held (handed to the loop's thread)
        self._arrival = threading.Condition()
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._registered = False
        self._limits_written = False
        self._listener: Listener | None = None
        self._listen_thread: threading.Thread | None = None
        self.executor = Executor(
            self.concurrency,
            on_outcome=self._on_outcome,
            on_exit=self._on_exit,
            clock=clock,
            tracing=Tracing(store.get_job, clock),
            on_late=self._late,
        )
        # Seconds after sending a claim or a heartbeat that its lease surely holds for.
        self._lease_holds = self.config.run_lease.total_seconds() - start_margin(
            self.config.run_lease
        )
        self.heartbeat = Heartbeat(
            store,
            leases=self._leases,
            on_status=self._on_status,
            interval=self.config.run_heartbeat,
            lease=self.config.run_lease,
            clock=clock,
            node_id=self.node_id,
            info=self._node_info,
        )
        self.reporter = Reporter(store, on_reported=self._on_reported, clock=clock)
        self.faults: FaultInjector | None = None
        if self.config.inject_faults is not None:
            self.faults = FaultInjector(
                self.config.inject_faults,
                store,
                worker=self.node_id,
                lease=self.config.run_lease,
                held=self._held_attempts,
                recheck=self.config.run_heartbeat,
                clock=clock,
            )

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start every thread; returns once the claim loop is running."""
        if self.running:
            return
        if self.faults is not None and not self.store.fault_injection_allowed():
            raise FaultInjectionRefused(self.store.health.name)
        self._register()
        if self.faults is not None:
            self.faults.start()  # re-reads the opt-in: a revoke stops the injecting
        self.executor.start()
        self.reporter.start()
        self.heartbeat.start()
        self._listener = self.store.listener([CHANNEL_RUNS])
        self._listen_thread = threading.Thread(
            target=self._listen_main, name="tickwork-worker-listen", daemon=True
        )
        self._listen_thread.start()
        super().start()
        log.info(
            "worker %s started: concurrency %d, queues %s, tasks %s%s; http-allow %s",
            self.node_id,
            self.concurrency,
            ",".join(self.config.queues) if self.config.queues else "(all)",
            ", ".join(self.registry.names()),
            "" if self.config.allow_shell else " (shell disabled)",
            self.egress.describe(),
        )
        if self.faults is not None:
            log.warning(
                "worker %s INJECTS FAULTS on purpose: %s (tickwork runs --injected lists "
                "the runs they made execute again)",
                self.node_id,
                self.faults.rates.describe(),
            )

    def stop(self, timeout: float | None = None) -> None:
        """Stop now: release running runs at once (no grace). Idempotent."""
        self.stop_gracefully(timedelta(0))

    def stop_gracefully(self, grace: timedelta | float | None = None) -> None:
        """Stop claiming, let running handlers finish within ``grace`` (default
        ``config.shutdown_grace``), release the rest, write every outcome, stop. Idempotent."""
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        if grace is None:
            grace = self.config.shutdown_grace
        seconds = grace.total_seconds() if isinstance(grace, timedelta) else float(grace)
        super().stop()  # the claim loop: no new claims from here on
        with self._arrival:  # the last claimed runs are held before anything is judged
            self._arrival.wait_for(lambda: self._arriving == 0, ARRIVAL_TIMEOUT)
        deadline = self.clock.monotonic() + seconds
        running = self._running()
        if running and seconds > 0:
            log.info("stopping: waiting up to %g s for %d running runs", seconds, len(running))
        while running and not self._hurry.is_set():
            left = deadline - self.clock.monotonic()
            if left <= 0:
                break
            self.clock.wait(self._hurry, self.clock.monotonic() + min(left, 0.05))
            running = self._running()
        for attempt in self._running():
            if attempt.ctx.completed:
                continue  # its transaction completed the run: nothing to hand back
            if attempt.settle(AttemptState.RELEASED):
                self.executor.interrupt(attempt)
                self.reporter.release(attempt)
                log.info(
                    "run %d (%s) released: the shutdown grace is over",
                    attempt.run.id,
                    attempt.run.task,
                )
        if not self.reporter.drain(REPORT_DRAIN_TIMEOUT):
            log.error("stopping with outcomes unwritten; their runs will be rescued")
        self.reporter.stop()
        self.heartbeat.stop()
        if self.faults is not None:
            self.faults.stop()
        self.executor.stop()
        if self._listen_thread is not None:
            self._listen_thread.join(LISTEN_WAIT * 50)
        if self._listener is not None:
            self._listener.close()
        if self._registered:
            try:
                self.store.deregister_node(self.node_id)
            except Exception as exc:
                log.debug("could not deregister node %s: %s", self.node_id, exc)
        log.info("worker %s stopped", self.node_id)

    def _node_info(self) -> dict[str, Any]:
        """What the cluster view shows of this worker; sent with every node heartbeat."""
        return {
            "concurrency": self.concurrency,
            "queues": list(self.config.queues) if self.config.queues else None,
            "tasks": self.registry.names(),
            "allow_shell": self.config.allow_shell,
            "http_allow": [str(entry) for entry in self.egress.allow],
            "beat": self.config.run_heartbeat.total_seconds(),
            "store": self.store.health.snapshot(),
            **self.skew.info(),
        }

    def _register(self) -> None:
        """Show this worker in the cluster view; a failure here stops nothing."""
        try:
            self.store.register_node(
                self.node_id,
                "worker",
                socket.gethostname(),
                os.getpid(),
                self._node_info(),
                now=self.clock.store_now(),
            )
            self._registered = True
        except Exception as exc:
            log.warning("could not register node %s: %s", self.node_id, exc)

    def hurry(self) -> None:
        """Cut a graceful stop's grace short (a second Ctrl-C): release what still runs."""
        self._hurry.set()

    def wake(self) -> None:
        self._wakeup.set()
        self._retry_now.set()

    @property
    def listening(self) -> bool:
        """Whether this worker hears notifications now (False while it re-listens after
        losing its LISTEN connection, when it polls every ``poll_interval`` instead)."""
        listener = self._listener
        return listener is not None and listener.listening

    @property
    def held(self) -> list[int]:
        """Ids of the runs whose leases this worker holds."""
        with self._held_lock:
            return sorted(self._held)

    # -- the claim loop --------------------------------------------------------------------

    def run(self) -> None:
        self.started.set()
        self.reporter.claimer(True)
        try:
            with self.store.health.sets_on_comeback(self._retry_now):
                self._claim_loop()
        finally:
            self.reporter.claimer(False)  # outcomes from here on: the reporter writes them

    def _claim_loop(self) -> None:
        retry = Backoff(*CLAIM_RETRY)
        while not self.stopping.is_set():
            self._wakeup.clear()
            self._retry_now.clear()
            done = self._claim_once()
            if done.failed:
                # Not woken by handlers finishing: only a stop, or another call of this
                # process answered (the store's comeback: the completions go out at once).
                if not self.stopping.is_set():  # (a stop's wake-up may predate the clear)
                    self.pause(self._retry_now, retry.next())
                continue
            retry.reset()
            if done.no_room:
                # Woken when a handler returns or an outcome is written.
                self.pause(self._wakeup, None)
            elif done.claimed < done.wanted and not self._wakeup.is_set():
                self.pause(self._wakeup, self._idle_seconds())
            else:
                self.end_pass()  # more to claim: straight on

    def _claim_once(self) -> _Pass:
        """Write the completions waiting and claim as many runs as there is room for, in
        one store call. A failed call puts the completions back in line."""
        taken = self.reporter.take_completions()
        # A run occupies a slot from its claim until its outcome is written (or its handler
        # returns, if later): a store slower than the handlers holds back claims instead of
        # piling up unwritten outcomes.
        occupied = (
            max(self.executor.busy, len(self._held)) + self._arriving - len(taken.completions)
        )
        want = max(0, min(self.concurrency - occupied, self.config.claim_batch))
        if want == 0 and not taken.completions:
            return _Pass(no_room=True)
        try:
            if not self._limits_written:
                # Before the first claim: a task's limit must hold from this worker's
                # first run of it, so a failure here is retried like a failed claim.
                self.store.register_task_limits(task_limits(self.registry))
                self._limits_written = True
            sent = self.clock.monotonic()  # the lease surely began no earlier than this
            rejected, runs = self.store.complete_and_claim(
                taken.completions,
                self.node_id,
                limit=want,
                lease=self.config.run_lease,
                queues=self.config.queues,
                tasks=self.tasks,
                now=self.clock.store_now(),
            )
        except StoreUnavailable as exc:
            self.reporter.completions_unwritten(taken)
            log.debug("claim failed (retrying): %s", exc)  # the outage is logged once
            return _Pass(failed=True)
        except Exception as exc:
            self.reporter.completions_unwritten(taken)
            log.warning("claim failed (retrying): %s", exc)
            return _Pass(failed=True)
        self.reporter.completions_written(taken, rejected)
        if runs:
            # The event loop's thread turns the runs into attempts and starts them, so this
            # thread's next round trip can begin meanwhile (benchmarks/README.md, "Figures
            # behind code comments").
            with self._arrival:
                self._arriving += len(runs)
            self.executor.call_on_loop(self._start_runs, (runs, sent + self._lease_holds))
        return _Pass(wanted=want, claimed=len(runs))

    def _start_runs(self, claimed: tuple[list[ClaimedRun], float]) -> None:
        """On the event loop's thread: hold and start claimed runs (whose leases surely
        hold until the monotonic time given)."""
        runs, lease_until = claimed
        try:
            self.executor.submit_many(self._attempts(runs, lease_until))
        except Exception:
            log.exception("could not start %d claimed runs; they are rescued", len(runs))
        finally:
            with self._arrival:
                self._arriving -= len(runs)
                self._arrival.notify_all()

    def _idle_seconds(self) -> float:
        """How long to sleep when there was nothing (more) to claim."""
        poll = self.config.poll_interval.total_seconds()
        listener = self._listener
        notified = LISTEN_NOTIFY in self.store.capabilities and (
            listener is not None and listener.listening
        )
        cap = max(IDLE_RECHECK.total_seconds(), poll) if notified else poll
        try:
            # The store's time by this node's clock and skew, not a round trip: this only
            # sets a timer, and a claim loop busy asking the time is late for the next run.
            now = self.clock.store_now() or self.skew.earliest_store_now() or self.store.now()
            next_run = self.store.next_claimable_at(queues=self.config.queues, tasks=self.tasks)
            # Without notifications, a job's next trigger is the best hint of when a run
            # will appear: be awake then rather than up to a poll interval later.
            next_job = None if notified or self._hears_triggers() else self.store.next_due_at()
        except StoreUnavailable as exc:
            log.debug("could not ask the store when to claim next: %s", exc)
            return poll
        except Exception as exc:
            log.warning("could not ask the store when to claim next: %s", exc)
            return cap
        delays = [(t - now).total_seconds() for t in (next_run, next_job) if t is not None]
        if next_job is not None and -DUE_CATCHUP <= (next_job - now).total_seconds() <= 0:
            return min(DUE_POLL, poll)  # due now: its run is being triggered
        ahead = [d for d in delays if d > 0]
        if not ahead:
            # Due but not claimed: taken by another worker meanwhile, or not claimable
            # (a paused job); or nothing at all. Look again after a poll interval.
            return poll if delays else cap
        return min(*ahead, cap)

    def _listen_main(self) -> None:
        """Wake the claim loop on notifications (the listener re-listens by itself after a
        loss, and wakes us then too: runs may have come meanwhile)."""
        assert self._listener is not None
        while not self.stopping.is_set():
            try:
                if self._listener.wait(LISTEN_WAIT):
                    self._wakeup.set()
            except Exception:
                log.exception("listening for runs failed; polling until it listens again")
                self.clock.wait(
                    self.stopping,
                    self.clock.monotonic() + self.config.poll_interval.total_seconds(),
                )

    def _attempts(self, runs: list[ClaimedRun], lease_until: float) -> list[Attempt]:
        """Claimed runs as attempts to execute, now held; a run refused here (see
        :func:`~tickwork.worker.capability.why_refused`) is held too, but its outcome is
        reported at once instead."""
        made: list[Attempt] = []
        refused: list[tuple[Attempt, Outcome]] = []
        monotonic = self.clock.monotonic
        now, transaction = self.skew.store_now, self.store.complete_in_transaction
        for run in runs:
            task, refusal = self.task_for(run)
            timeout = run.timeout
            deadline = monotonic() + timeout.total_seconds() if timeout is not None else None
            attempt = Attempt(run, task, Context(run, now, transaction), deadline, lease_until)
            if self.faults is not None and refusal is None:
                self.faults.arm(attempt)
            made.append(attempt)
            if refusal is not None:
                refused.append((attempt, refusal))
        stale: list[Attempt] = []
        held = self._held
        with self._held_lock:
            for attempt in made:
                if (old := held.get(attempt.run.id)) is not None:
                    stale.append(old)
                held[attempt.run.id] = attempt
        for old in stale:
            # This worker stalled past its lease and then claimed the same run again: the
            # new claim proves the old lease was taken over.
            self._abandon(old, LeaseStatus.LOST)
        if log.isEnabledFor(logging.DEBUG):
            for run in runs:
                log.debug(
                    "run %d (%s) claimed, attempt %d/%d",
                    run.id,
                    run.task,
                    run.attempt,
                    run.max_attempts,
                )
        for attempt, refusal in refused:
            attempt.settle(AttemptState.FINISHED)
            self._on_outcome(attempt, refusal)
        return [a for a in made if a.state is AttemptState.RUNNING]  # not the refused

    def task_for(self, run: ClaimedRun) -> tuple[Task[..., Any], Outcome | None]:
        """The task this worker runs ``run`` with, and the outcome it reports instead of
        running it when it refuses (an unknown task, shell without ``--allow-shell``: a
        last resort, since its claim takes only runs of :attr:`tasks`)."""
        # http is a built-in (no app can replace it): this worker's own, under its egress
        # policy.
        task = self._http if run.task == HTTP else self.registry.find(run.task)
        allow_shell = self.config.allow_shell
        refusal = why_refused(run, task, self.registry, self.node_id, allow_shell=allow_shell)
        if task is None or refusal is not None:
            return Task(run.task, never_run), refusal
        return task, None

    # -- callbacks from the executor, heartbeat and reporter threads -----------------------

    def _on_outcome(self, attempt: Attempt, outcome: Outcome) -> None:
        run = attempt.run
        if attempt.ctx.completed:
            # ctx.transaction() committed the completion: there is nothing left to write.
            if outcome.succeeded:
                log.info("run %d (%s) succeeded (in its transaction)", run.id, run.task)
            else:
                log.warning(
                    "run %d (%s) raised after its transaction committed; it stays "
                    "succeeded (its effect landed): %s",
                    run.id,
                    run.task,
                    (outcome.error or "").partition("\n")[0],
                )
            self._on_reported([attempt], False)
            return
        if outcome.succeeded:
            self.reporter.complete(attempt, outcome.result)  # logged once the store took it
            return
        first_line = (outcome.error or "").partition("\n")[0]
        last = outcome.discard or run.attempt >= run.max_attempts
        log.warning(
            "run %d (%s) attempt %d/%d failed%s: %s",
            run.id,
            run.task,
            run.attempt,
            run.max_attempts,
            " (dead)" if last else "",
            first_line,
        )
        self.reporter.fail(attempt, outcome)

    def _on_exit(self, attempt: Attempt) -> None:
        if not self._wakeup.is_set():  # a lock and a notify spared per run when busy
            self._wakeup.set()

    def _on_reported(self, attempts: list[Attempt], completed: bool) -> None:
        held = self._held
        with self._held_lock:
            for attempt in attempts:
                if held.get(attempt.run.id) is attempt:
                    del held[attempt.run.id]
        if not completed:
            # A slot is free, and a retry or a released run may be claimable before we
            # thought. (A completion needs no wake-up: the claim loop wrote it and counted
            # its slot free already; after the loop has stopped, nothing claims.)
            self._wakeup.set()

    def _leases(self) -> list[tuple[int, int]]:
        # A run its handler's transaction completed is no longer running: not beaten.
        with self._held_lock:
            held = [a for a in self._held.values() if not a.ctx.completed]
        faults = self.faults
        return [a.lease for a in held if faults is None or not faults.stalled(a)]

    def _held_attempts(self) -> list[Attempt]:
        with self._held_lock:
            return list(self._held.values())

    def _on_status(self, statuses: dict[tuple[int, int], LeaseStatus], sent: float) -> None:
        until = sent + self._lease_holds
        for lease, status in statuses.items():
            with self._held_lock:
                attempt = self._held.get(lease[0])
            if attempt is None or attempt.lease != lease or attempt.ctx.completed:
                continue
            if status is LeaseStatus.HELD:
                if attempt.lease_until is not None and attempt.lease_until < until:
                    attempt.lease_until = until
            else:
                self._abandon(attempt, status)

    def _late(self, attempt: Attempt) -> None:
        """A handler about to start after its lease may have lapsed (this worker stalled
        since the claim): not started; the run is released, fenced by its token, so it is
        claimable at once unless someone holds it under a newer token already."""
        if not attempt.settle(AttemptState.RELEASED):
            return
        run = attempt.run
        log.warning(
            "run %d (%s): not started: its lease may have lapsed since the claim (this "
            "worker stalled); released",
            run.id,
            run.task,
        )
        self.reporter.release(attempt)

    def _abandon(self, attempt: Attempt, status: LeaseStatus) -> None:
        """Stop a handler whose lease is gone; report nothing for it."""
        if not attempt.settle(AttemptState.ABANDONED):
            return  # already decided; a pending write will be rejected and logged
        self.executor.interrupt(attempt)
        run = attempt.run
        with self._held_lock:
            if self._held.get(run.id) is attempt:
                del self._held[run.id]
        if status is LeaseStatus.CANCELLED:
            log.warning(
                "run %d (%s): cancelled; handler stopped, nothing reported", run.id, run.task
            )
        else:
            log.warning(
                "run %d (%s): lease rejected: it was taken over (fencing token %d is stale); "
                "handler stopped, nothing reported",
                run.id,
                run.task,
                run.fencing_token,
            )
        self._wakeup.set()

    def _running(self) -> list[Attempt]:
        with self._held_lock:
            return [a for a in self._held.values() if a.state is AttemptState.RUNNING]


def _never() -> bool:
    return False
