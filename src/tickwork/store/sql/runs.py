"""Run transitions, written once for every dialect: fail (retry or dead), release, rescue,
the operator's cancel and retry, prune, and the run reads.

The hot ones (claim, complete, heartbeat) stay in each dialect's module.

Every transition here that ends a running attempt other than by success (fail, release,
rescue, cancel_run) first writes the attempt's row in the run's history
(``tickwork_attempts``), fenced as the transition is and in its transaction; claim and
complete write nothing there (the attempt that runs now, or succeeded, is the run row's
own: :meth:`RunTransitions.run_attempts`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, Unpack

from tickwork.errors import InvalidTransition, LeaseLost, RunNotFound, ValidationError
from tickwork.job import Run, RunState
from tickwork.records import (
    ATTEMPT_ERROR_LIMIT,
    ATTEMPT_TRACEBACK_LIMIT,
    ATTEMPTS_KEPT,
    AttemptEnd,
    AttemptRecord,
    RunAttempts,
    cut,
    page_of,
    run_error,
    storable,
)
from tickwork.retry import RetryPolicy
from tickwork.store import rows
from tickwork.store.base import (
    CHANNEL_RUNS,
    DEFAULT_PAGE,
    DEFAULT_PRUNE_BATCH,
    DEFAULT_RESCUE_BATCH,
    KEEP_LEADER_TERMS,
    MAX_BULK,
    Page,
    QueueStatus,
    RescueResult,
    RunFilter,
    RunStats,
    TaskBacklog,
    bulk_limit,
    page_limit,
)
from tickwork.store.driver import Row, Tx
from tickwork.store.queries import for_claimer
from tickwork.store.sql.core import SqlCore
from tickwork.store.sql.minutes import floor_minute
from tickwork.store.sql.totals import Tally

log = logging.getLogger("tickwork.store")


class RunTransitions(SqlCore):
    def fail(
        self,
        run_id: int,
        fencing_token: int,
        error: str,
        *,
        traceback: str | None = None,
        ended: AttemptEnd = AttemptEnd.FAILED,
        retry_after: timedelta | None = None,
        discard: bool = False,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Run:
        if ended not in FAIL_ENDS:
            raise ValidationError(
                f"fail ends an attempt as one of {', '.join(FAIL_ENDS)}, not {ended!r}",
                field="ended",
            )
        ended = AttemptEnd(ended)
        error = storable(error)
        traceback = storable(traceback) if traceback is not None else None
        params: dict[str, Any] = {
            "id": run_id,
            "token": fencing_token,
            "error": run_error(error, traceback),
            "result": self.codec.json(result),
        }
        with self.driver.write() as tx:
            t = tx.now(now)
            params["now"] = self.codec.time(t)
            held = tx.one(self.q["held_run_for_fail"], params)
            if held is None:
                raise LeaseLost(run_id, fencing_token)
            self._end_attempt(
                tx,
                run_id,
                fencing_token,
                params["now"],
                ended,
                error=cut(error, ATTEMPT_ERROR_LIMIT),
                traceback=cut(traceback, ATTEMPT_TRACEBACK_LIMIT) if traceback else None,
            )
            policy = RetryPolicy(held["max_attempts"], held["backoff_base"], held["backoff_cap"])
            if discard or policy.exhausted(held["attempt"]):
                row = tx.one(self.q["fail_dead"], params)
            else:
                wait = retry_after if retry_after is not None else policy.backoff(held["attempt"])
                params["wait"] = self.codec.duration(wait)
                row = tx.one(self.q["fail_retry"], params)
                # The rollup's and the totals' failed attempts (a retried run has no finish
                # time to fold); the totals after the minute, as the fold writes them.
                minute = {"tenant": held["tenant"], "queue": held["queue"]}
                minute["minute"] = self.codec.time(floor_minute(t))
                tx.count(self.q["count_failed"], minute)
                tally = Tally()
                tally.failed(held, t, self.codec.from_time)
                tally.write(tx, self.q)
            assert row is not None
        return rows.run(row, self.codec)

    def release(self, run_id: int, fencing_token: int, *, now: datetime | None = None) -> Run:
        at = self.driver.at(now)
        with self.driver.write() as tx:
            self._end_attempt(tx, run_id, fencing_token, at, AttemptEnd.RELEASED)
            row = tx.one(self.q["release"], {"id": run_id, "token": fencing_token, "now": at})
            assert row is not None  # the attempt ended above: the run is held, and locked
            tx.notify(CHANNEL_RUNS)
        return rows.run(row, self.codec)

    def rescue(
        self, *, limit: int = DEFAULT_RESCUE_BATCH, now: datetime | None = None
    ) -> RescueResult:
        at = self.driver.at(now)
        with self.driver.write() as tx:
            ended = tx.all(self.q["end_rescued_attempts"], {"now": at, "limit": limit})
            if not ended:
                return RescueResult()
            ids = self.codec.array([r["run_id"] for r in ended])
            found = tx.all(self.q["rescue"], {"ids": ids, "now": at})
            trim_attempts(tx, self.q, ended)
            requeued = sorted(r["id"] for r in found if r["state"] == RunState.QUEUED)
            if requeued:
                tx.notify(CHANNEL_RUNS)
        return RescueResult(
            requeued=requeued, dead=sorted(r["id"] for r in found if r["state"] == RunState.DEAD)
        )

    def _end_attempt(
        self,
        tx: Tx,
        run_id: int,
        token: int,
        at: Any,
        ended: AttemptEnd,
        *,
        error: str | None = None,
        traceback: str | None = None,
    ) -> None:
        """End the attempt that holds ``run_id`` under ``token`` in the run's history (its
        row locked from here to the commit); LeaseLost when no attempt holds it so."""
        params = {
            "id": run_id,
            "token": token,
            "now": at,
            "ended": ended.value,
            "error": error,
            "traceback": traceback,
        }
        row = tx.one(self.q["end_attempt"], params)
        if row is None:
            raise LeaseLost(run_id, token)
        trim_attempts(tx, self.q, [row])

    def run_attempts(self, run_id: int, *, tenant: str | None = None) -> RunAttempts:
        with self.driver.snapshot() as tx:
            row = tx.one(self.q["get_run"], {"id": run_id, "tenant": tenant})
            if row is None:
                raise RunNotFound(run_id)
            found = tx.all(self.q["run_attempts"], {"id": run_id})
        kept = [rows.attempt(r, self.codec) for r in found]
        run = rows.run(row, self.codec)
        # The attempt that runs now, or the one that succeeded, is the run row's own.
        if run.state is RunState.RUNNING or (
            run.state is RunState.SUCCEEDED and run.started_at is not None
        ):
            done = run.state is RunState.SUCCEEDED
            kept.append(
                AttemptRecord(
                    run.attempt,
                    run.fencing_token,
                    run.worker,
                    run.started_at,
                    run.finished_at if done else None,
                    AttemptEnd.SUCCEEDED if done else None,
                )
            )
        dropped = found[0]["n"] - 1 if found else 0
        return RunAttempts(run, kept, dropped)

    def next_claimable_at(
        self, *, queues: Sequence[str] | None = None, tasks: Sequence[str] | None = None
    ) -> datetime | None:
        if (queues is not None and not queues) or (tasks is not None and not tasks):
            return None
        query = for_claimer(self.q["next_claimable_at"], queues, tasks)
        params = {"queues": self.codec.array(queues), "tasks": self.codec.array(tasks)}
        with self.driver.read() as tx:
            row = tx.one(query, params)
        return self.codec.from_time(row["at"]) if row is not None else None

    def get_run(self, run_id: int, *, tenant: str | None = None) -> Run:
        with self.driver.read() as tx:
            row = tx.one(self.q["get_run"], {"id": run_id, "tenant": tenant})
        if row is None:
            raise RunNotFound(run_id)
        return rows.run(row, self.codec)

    def list_runs(
        self,
        *,
        tenant: str | None = None,
        job_id: int | None = None,
        state: RunState | None = None,
        after: int | None = None,
        limit: int = DEFAULT_PAGE,
        task: str | None = None,
        queue: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        error: str | None = None,
    ) -> Page[Run]:
        limit = page_limit(limit)
        params = {"state": state, "after": after, "limit": limit + 1}  # +1: a next page?
        params.update(
            self._run_filter(
                tenant=tenant,
                job_id=job_id,
                task=task,
                queue=queue,
                since=since,
                until=until,
                error=error,
            )
        )
        with self.driver.read() as tx:
            found = tx.all(self.q["list_runs"], params)
        return page_of([rows.run(r, self.codec) for r in found], limit, attrgetter("id"))

    def _run_filter(
        self,
        *,
        tenant: str | None = None,
        job_id: int | None = None,
        task: str | None = None,
        queue: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        error: str | None = None,
    ) -> dict[str, Any]:
        time = self.codec.time
        return {
            "tenant": tenant,
            "job_id": job_id,
            "task": task,
            "queue": queue,
            "since": time(since) if since is not None else None,
            "until": time(until) if until is not None else None,
            "error": error.lower() if error else None,
        }

    def retry_runs(
        self,
        *,
        max_count: int,
        now: datetime | None = None,
        **where: Unpack[RunFilter[datetime]],
    ) -> list[int]:
        params = self._run_filter(**where)
        return self._bulk("bulk_retry", "retry", max_count, params, now, CHANNEL_RUNS)

    def cancel_runs(
        self,
        *,
        max_count: int,
        now: datetime | None = None,
        **where: Unpack[RunFilter[datetime]],
    ) -> list[int]:
        params = self._run_filter(**where)
        return self._bulk("bulk_cancel", "cancel", max_count, params, now)

    def _bulk(
        self,
        query: str,
        action: str,
        max_count: int,
        params: dict[str, Any],
        now: datetime | None,
        *channels: str,
    ) -> list[int]:
        """One bulk command, all or nothing: the update takes one run more than allowed,
        and when it got it, raising rolls the whole transaction back."""
        bulk_limit(max_count)
        with self.driver.write() as tx:
            params.update(now=self.codec.time(tx.now(now)), limit=max_count + 1)
            changed = sorted(r["id"] for r in tx.all(self.q[query], params))
            if len(changed) > max_count:
                raise ValidationError(
                    f"more than {max_count} runs match; nothing was changed: narrow the "
                    f"filter or raise max_count (at most {MAX_BULK})",
                    field="max_count",
                )
            if changed:
                tx.notify(*channels)
        log.info("%s runs=%d (bulk)", action, len(changed))
        return changed

    def queue_stats(
        self, *, tenant: str | None = None, now: datetime | None = None
    ) -> list[QueueStatus]:
        with self.driver.snapshot() as tx:
            t = self.codec.time(tx.now(now))
            found = tx.all(self.q["queue_stats"], {"tenant": tenant, "now": t})
        return [
            QueueStatus(
                r["queue"], int(r["due"]), int(r["running"]), self.codec.from_time(r["oldest"])
            )
            for r in found
        ]

    def due_tasks(
        self, *, tenant: str | None = None, now: datetime | None = None
    ) -> list[TaskBacklog]:
        with self.driver.snapshot() as tx:
            t = self.codec.time(tx.now(now))
            found = tx.all(self.q["due_tasks"], {"tenant": tenant, "now": t})
        return [
            TaskBacklog(r["queue"], r["task"], int(r["due"]), self.codec.from_time(r["oldest"]))
            for r in found
        ]

    def cancel_run(
        self, run_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Run:
        return self._run_command(run_id, tenant, now, "cancel_run", "cancel", ends=True)

    def retry_run(
        self, run_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Run:
        return self._run_command(run_id, tenant, now, "retry_run", "retry", CHANNEL_RUNS)

    def _run_command(
        self,
        run_id: int,
        tenant: str | None,
        now: datetime | None,
        query: str,
        action: str,
        *channels: str,
        ends: bool = False,
    ) -> Run:
        """An operator's command on one run; ``ends``: it ends a running run's attempt
        (a cancel), whose history records it."""
        with self.driver.write() as tx:
            t = self.codec.time(tx.now(now))
            current = tx.one(self.q["get_run_for_update"], {"id": run_id, "tenant": tenant})
            if current is None:
                raise RunNotFound(run_id)
            if ends and current["state"] == RunState.RUNNING:
                token = current["fencing_token"]
                self._end_attempt(tx, run_id, token, t, AttemptEnd.CANCELLED, error=CANCELLED)
            row = tx.one(self.q[query], {"id": run_id, "now": t})
            if row is None:
                raise InvalidTransition("run", run_id, current["state"], action)
            tx.notify(*channels)
        return rows.run(row, self.codec)

    def prune(
        self, retention: timedelta, *, limit: int = DEFAULT_PRUNE_BATCH, now: datetime | None = None
    ) -> int:
        time, from_time = self.codec.time, self.codec.from_time
        with self.driver.write() as tx:
            cutoff = tx.now(now) - retention
            # Runs no fold has read yet (a retention shorter than the fold's delay, or no
            # leader folding) go into the totals first, and the mark past them, so that the
            # totals never miss a run and never count one twice (the mark's lock orders
            # this against a fold). Their minutes are not charted.
            mark = tx.one(self.q["rollup_mark"], {})
            assert mark is not None
            if cutoff > from_time(mark["folded_to"]):
                tally = Tally()
                span = {"start": mark["folded_to"], "to": time(cutoff)}
                for r in tx.all(self.q["finished_between"], span):
                    tally.finished(r, from_time)
                tx.count(self.q["set_rollup_mark"], {"to": time(cutoff)})
                tally.write(tx, self.q)
            params = {"cutoff": time(cutoff), "limit": limit}
            deleted = [r["id"] for r in tx.all(self.q["prune_runs"], params)]
            if deleted:
                tx.count(self.q["prune_attempts"], {"ids": self.codec.array(deleted)})
            tx.count(self.q["prune_slot_skips"], {"cutoff": time(cutoff)})
            terms = {"cutoff": time(cutoff), "keep": KEEP_LEADER_TERMS}
            tx.count(self.q["prune_leader_terms"], terms)
        return len(deleted)

    def run_stats(
        self, *, tenant: str | None = None, lag_sample: int = 1000, now: datetime | None = None
    ) -> RunStats:
        with self.driver.snapshot() as tx:
            t = tx.now(now)
            counts = {state.value: 0 for state in RunState}
            for r in tx.all(self.q["run_counts"], {"tenant": tenant}):
                counts[r["state"]] = r["n"]
            backlog = tx.one(self.q["due_backlog"], {"tenant": tenant, "now": self.codec.time(t)})
            assert backlog is not None
            lags = tx.all(self.q["recent_lag"], {"tenant": tenant, "limit": lag_sample})
        lag_ms = [float(r["lag_ms"]) for r in lags]
        from_time = self.codec.from_time
        return RunStats(
            counts,
            backlog["n"],
            from_time(backlog["oldest"]),
            lag_ms,
            t,
            int(backlog["limited_n"]),
            from_time(backlog["open_oldest"]),
        )


CANCELLED = "cancelled"
"""The error of a run an operator cancelled, and of its attempt when it was running."""
REPLACED = "replaced by a newer slot"
"""The error of a run (and of its attempt, when it was running) that overlap 'replace'
cancelled."""
FAIL_ENDS = (AttemptEnd.FAILED, AttemptEnd.TIMED_OUT, AttemptEnd.INJECTED_FAULT)
"""How :meth:`~tickwork.store.Store.fail` may say an attempt ended."""


def trim_attempts(tx: Tx, q: Mapping[str, str], ended: Sequence[Row]) -> None:
    """Drop the oldest ended attempts of each run in ``ended`` (rows of ``run_id`` and the
    ``n`` just written) past ATTEMPTS_KEPT."""
    for params in past_kept(ended):
        tx.count(q["trim_attempts"], params)


def past_kept(ended: Sequence[Row]) -> list[dict[str, int]]:
    """``trim_attempts``' parameters for the runs in ``ended`` whose history now holds more
    than ATTEMPTS_KEPT ended attempts: none until a run has ended twenty of them."""
    return [
        {"id": r["run_id"], "through": r["n"] - ATTEMPTS_KEPT}
        for r in ended
        if r["n"] > ATTEMPTS_KEPT
    ]
