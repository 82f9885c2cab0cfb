"""The reporter: writes a worker's outcomes to the store. Every worker runs one.

It writes as soon as there is something to write, with no timer: successes go out in one
``Store.complete_many`` call (up to COMPLETE_BATCH), failures one ``fail`` each, releases
one ``release`` each. Outcomes that arrive while a write is in flight wait for the next
one, so under load completions batch themselves and when idle a result is written at once
(a few milliseconds of lag, never a flush interval).

While the worker's claim loop runs, successes are its to write (:meth:`claimer`): it
takes them (:meth:`take_completions`) into its next ``Store.complete_and_claim``, so a busy
worker pays one round trip and one commit per batch, not two. The reporter writes them
again once the claim loop has stopped.

A write the store rejects for a stale fencing token (the lease was taken over: another
worker may have run the same slot) is logged as *rejected* and dropped; the run's fate is
the new holder's. A write that fails because the database is unavailable is retried with
capped, jittered backoff (at most about 1 s), and at once when any other call of this
process is answered first (the store's *comeback*, :mod:`tickwork.store.health`), so
outcomes are written within a round trip of the database answering again; the runs stay in
the heartbeat meanwhile (whose first beat after the outage extends their leases too), and
each is written with the fencing token of its claim, so one whose lease was taken over
during the outage is refused and logged as such. The claim loop retries its
``complete_and_claim`` the same way, with the completions it holds in that one statement.

A write that fails with an error that is not the store's (a bug) is tried SURPRISE_LIMIT
times, then dropped and logged: its run is rescued and runs again, and the reporter goes
on with the others.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.errors import FencingError, StoreError, StoreUnavailable
from tickwork.service import Backoff, Service
from tickwork.store.base import Completion
from tickwork.store.roles import WorkerStore
from tickwork.worker.executor import NOTHING_RETURNED, Attempt
from tickwork.worker.outcome import Outcome

log = logging.getLogger("tickwork.worker")

COMPLETE_BATCH = 500
"""Runs completed per ``complete_many`` call at most."""
SURPRISE_LIMIT = 3
"""Times the reporter tries completions whose write failed with an error that is not the
store's (a bug, a driver's surprise) before it drops them: their runs are rescued when
their leases expire and run again. A store error (an outage) is retried for as long as it
lasts."""
RETRY_BACKOFF = (0.05, 1.0)
"""Seconds: first and longest wait before writing again after the store failed (jittered,
see :class:`~tickwork.service.Backoff`)."""


class _Report(NamedTuple):
    attempt: Attempt
    kind: str  # "complete" | "fail" | "release"
    outcome: Outcome | None = None


@dataclass(frozen=True, slots=True)
class Taken:
    """Completions the claim loop took to write: what to send, and what they report."""

    reports: list[_Report]
    completions: list[Completion]


class Reporter(Service):
    name = "tickwork-reporter"

    def __init__(
        self,
        store: WorkerStore,
        *,
        on_reported: Callable[[list[Attempt], bool], None],
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self._on_reported = on_reported
        self._pending: list[_Report] = []  # failures and releases
        self._completions: list[_Report] = []
        self._writing = 0  # reports taken off the lists and not yet written
        self._cond = threading.Condition()
        self._claimer_active = False  # the claim loop writes the completions
        self._surprises: dict[int, int] = {}  # run id -> unexpected failures (this thread)
        self._retry_now = threading.Event()  # a stop, or the store's comeback

    # -- producers (any thread) ------------------------------------------------------------

    def complete(self, attempt: Attempt, result: dict[str, Any] | None) -> None:
        with self._cond:
            outcome = NOTHING_RETURNED if result is None else Outcome(True, result=result)
            self._completions.append(_Report(attempt, "complete", outcome))
            if not self._claimer_active:
                self._cond.notify_all()

    def fail(self, attempt: Attempt, outcome: Outcome) -> None:
        self._put(_Report(attempt, "fail", outcome))

    def release(self, attempt: Attempt) -> None:
        self._put(_Report(attempt, "release"))

    def _put(self, report: _Report) -> None:
        with self._cond:
            self._pending.append(report)
            self._cond.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait until everything handed in so far is written; False on timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: not self._pending and not self._completions and not self._writing,
                timeout,
            )

    def wake(self) -> None:
        self._retry_now.set()
        with self._cond:
            self._cond.notify_all()

    # -- the claim loop's share ------------------------------------------------------------

    def claimer(self, active: bool) -> None:
        """Hand the completions to the claim loop (True) or take them back (False)."""
        with self._cond:
            self._claimer_active = active
            self._cond.notify_all()

    def take_completions(self, limit: int = COMPLETE_BATCH) -> Taken:
        """Up to ``limit`` pending successes, now in flight: settle them with
        :meth:`completions_written` or :meth:`completions_unwritten`."""
        with self._cond:
            taken, self._completions = self._completions[:limit], self._completions[limit:]
            self._writing += len(taken)
        return Taken(taken, [_completion(r) for r in taken])

    def completions_written(self, taken: Taken, rejected: Sequence[int]) -> None:
        """The store applied ``taken`` but for ``rejected`` (fenced out)."""
        self._written(taken.reports, set(rejected))
        with self._cond:
            self._writing -= len(taken.reports)
            self._cond.notify_all()

    def completions_unwritten(self, taken: Taken) -> None:
        """The store failed: ``taken`` go back to the front of the line."""
        with self._cond:
            self._completions[:0] = taken.reports
            self._writing -= len(taken.reports)
            self._cond.notify_all()

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        self.started.set()
        with self.store.health.sets_on_comeback(self._retry_now):
            self._loop()

    def _loop(self) -> None:
        retry = Backoff(*RETRY_BACKOFF)
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._work() or self.stopping.is_set())
                if not self._work():
                    return
                batch, self._pending = self._pending, []
                if not self._claimer_active:
                    batch += self._completions
                    self._completions = []
                self._writing += len(batch)
            self._retry_now.clear()  # before the write: a comeback while it fails counts
            left = self._write(batch)
            with self._cond:
                self._writing -= len(batch)
                for r in left:
                    (self._completions if r.kind == "complete" else self._pending).append(r)
                self._cond.notify_all()
            if left:
                if not self.stopping.is_set():  # (a stop's wake-up may predate the clear)
                    self.pause(self._retry_now, retry.next())
                if self.stopping.is_set():
                    log.error(
                        "stopping with %d outcomes unwritten (the store is unavailable); "
                        "their runs are rescued when their leases expire",
                        len(left),
                    )
                    return
            else:
                retry.reset()
                self.end_pass()

    def _work(self) -> bool:
        return bool(self._pending or (self._completions and not self._claimer_active))

    def _write(self, batch: list[_Report]) -> list[_Report]:
        """Write ``batch``; return the reports to try again (the store was unavailable)."""
        completions = [r for r in batch if r.kind == "complete"]
        others = [r for r in batch if r.kind != "complete"]
        left: list[_Report] = []
        for start in range(0, len(completions), COMPLETE_BATCH):
            chunk = completions[start : start + COMPLETE_BATCH]
            try:
                rejected = set(
                    self.store.complete_many(
                        [_completion(r) for r in chunk], now=self.clock.store_now()
                    )
                )
            except StoreError as exc:
                _retrying(exc, "completing %d runs failed, will retry: %s", len(chunk), exc)
                left.extend(chunk)
                continue
            except Exception:
                # Not the store's kind of failure (a bug, a driver's surprise): this thread
                # must not die of it with the outcomes in hand; try again, a few times.
                log.exception("completing %d runs failed, will retry", len(chunk))
                left.extend(self._surprised(chunk))
                continue
            if self._surprises:
                for r in chunk:
                    self._surprises.pop(r.attempt.run.id, None)
            self._written(chunk, rejected)
        for r in others:
            if not self._write_one(r):
                left.append(r)
        return left

    def _surprised(self, chunk: list[_Report]) -> list[_Report]:
        """Count an unexpected failure against each report of ``chunk``; return those to
        try again, and drop those that reached SURPRISE_LIMIT."""
        again: list[_Report] = []
        dropped: list[Attempt] = []
        for r in chunk:
            run = r.attempt.run
            count = self._surprises.get(run.id, 0) + 1
            if count < SURPRISE_LIMIT:
                self._surprises[run.id] = count
                again.append(r)
                continue
            self._surprises.pop(run.id, None)
            dropped.append(r.attempt)
            log.error(
                "run %d (%s): its completion failed %d times (not a store error) and is "
                "dropped; the run is rescued when its lease expires",
                run.id,
                run.task,
                count,
            )
        if dropped:
            self._on_reported(dropped, True)
        return again

    def _written(self, chunk: list[_Report], rejected: set[int]) -> None:
        succeeded = log.isEnabledFor(logging.INFO)  # asked once a batch, not once a run
        for r in chunk:
            run = r.attempt.run
            if run.id in rejected:
                log.warning(
                    "run %d: completion rejected: the lease was taken over (fencing token "
                    "%d is stale); this result is not recorded",
                    run.id,
                    run.fencing_token,
                )
            elif succeeded:
                log.info("run %d (%s) succeeded", run.id, run.task)
        self._on_reported([r.attempt for r in chunk], True)

    def _write_one(self, r: _Report) -> bool:
        run = r.attempt.run
        try:
            if r.kind == "release":
                self.store.release(run.id, run.fencing_token, now=self.clock.store_now())
            else:
                assert r.outcome is not None
                self.store.fail(
                    run.id,
                    run.fencing_token,
                    r.outcome.error or "failed",
                    traceback=r.outcome.traceback,
                    ended=r.outcome.ended,
                    retry_after=r.outcome.retry_after,
                    discard=r.outcome.discard,
                    result=r.outcome.result,
                    now=self.clock.store_now(),
                )
        except FencingError:
            log.warning(
                "run %d: %s rejected: the lease was taken over (fencing token %d is stale)",
                run.id,
                r.kind,
                run.fencing_token,
            )
        except StoreError as exc:
            _retrying(exc, "run %d: %s failed, will retry: %s", run.id, r.kind, exc)
            return False
        except Exception:
            log.exception("run %d: %s failed and is dropped", run.id, r.kind)
        self._on_reported([r.attempt], False)
        return True


def _retrying(exc: StoreError, message: str, *args: Any) -> None:
    """Log a write to retry: DEBUG for an outage (the store's health logs it once),
    WARNING for any other store error."""
    level = logging.DEBUG if isinstance(exc, StoreUnavailable) else logging.WARNING
    log.log(level, message, *args)


def _completion(r: _Report) -> Completion:
    run = r.attempt.run
    return Completion(run.id, run.fencing_token, r.outcome.result if r.outcome else None)
