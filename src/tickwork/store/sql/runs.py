"""Run transitions, written once for every dialect: fail (retry or dead), release, rescue,
the operator's cancel and retry, prune, and the run reads.

The hot ones (claim, complete, heartbeat) stay in each dialect's module."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, Unpack

from tickwork.errors import InvalidTransition, LeaseLost, RunNotFound, ValidationError
from tickwork.job import Run, RunState
from tickwork.records import page_of
from tickwork.retry import RetryPolicy
from tickwork.store import rows
from tickwork.store.base import (
    CHANNEL_RUNS,
    DEFAULT_PAGE,
    DEFAULT_PRUNE_BATCH,
    DEFAULT_RESCUE_BATCH,
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
        retry_after: timedelta | None = None,
        discard: bool = False,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Run:
        params: dict[str, Any] = {
            "id": run_id,
            "token": fencing_token,
            "error": error,
            "result": self.codec.json(result),
        }
        with self.driver.write() as tx:
            t = tx.now(now)
            params["now"] = self.codec.time(t)
            held = tx.one(self.q["held_run_for_fail"], params)
            if held is None:
                raise LeaseLost(run_id, fencing_token)
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
        params = {"id": run_id, "token": fencing_token, "now": self.driver.at(now)}
        with self.driver.write() as tx:
            row = tx.one(self.q["release"], params)
            if row is None:
                raise LeaseLost(run_id, fencing_token)
            tx.notify(CHANNEL_RUNS)
        return rows.run(row, self.codec)

    def rescue(
        self, *, limit: int = DEFAULT_RESCUE_BATCH, now: datetime | None = None
    ) -> RescueResult:
        with self.driver.write() as tx:
            found = tx.all(self.q["rescue"], {"now": self.driver.at(now), "limit": limit})
            requeued = sorted(r["id"] for r in found if r["state"] == RunState.QUEUED)
            if requeued:
                tx.notify(CHANNEL_RUNS)
        return RescueResult(
            requeued=requeued, dead=sorted(r["id"] for r in found if r["state"] == RunState.DEAD)
        )

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
    ) -> Page[Run]:
        limit = page_limit(limit)
        params = {"state": state, "after": after, "limit": limit + 1}  # +1: a next page?
        params.update(
            self._run_filter(
                tenant=tenant, job_id=job_id, task=task, queue=queue, since=since, until=until
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
    ) -> dict[str, Any]:
        time = self.codec.time
        return {
            "tenant": tenant,
            "job_id": job_id,
            "task": task,
            "queue": queue,
            "since": time(since) if since is not None else None,
            "until": time(until) if until is not None else None,
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
        return self._run_command(run_id, tenant, now, "cancel_run", "cancel")

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
    ) -> Run:
        with self.driver.write() as tx:
            t = self.codec.time(tx.now(now))
            current = tx.one(self.q["get_run_for_update"], {"id": run_id, "tenant": tenant})
            if current is None:
                raise RunNotFound(run_id)
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
            deleted = tx.count(self.q["prune_runs"], params)
            tx.count(self.q["prune_slot_skips"], {"cutoff": time(cutoff)})
        return deleted

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
