"""Submit, one job or a batch: a batch is one ``submit_jobs`` statement per
:data:`SUBMIT_STATEMENT_ROWS` jobs, in one transaction sent as one pipeline, with the
records built here from the specs rather than read back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from psycopg import errors as pg_errors
from psycopg.rows import DictRow, tuple_row

from tickwork import schedule as schedules
from tickwork.errors import ValidationError
from tickwork.job import Job, JobSpec, JobState, RunState, ScheduleState, run_policy
from tickwork.store import rows as mapping
from tickwork.store.base import CHANNEL_JOBS, CHANNEL_RUNS, Submitted
from tickwork.store.driver import Tx
from tickwork.store.postgres.borrowed import borrowed
from tickwork.store.postgres.core import PgCore
from tickwork.store.postgres.driver import PG_CODEC, PgTx, Q, json_loads, notify, now_in
from tickwork.store.postgres.due import new_run
from tickwork.store.postgres.pool import Conn
from tickwork.store.sql.calendars import bind_calendar

SUBMIT_STATEMENT_ROWS = 5000
"""Jobs per ``submit_jobs`` statement: a bulk submit of more (``tickwork submit --file``)
takes several statements in its one transaction, so no one parameter grows unbounded."""


class PgSubmit(PgCore):
    def submit(
        self, spec: JobSpec, *, now: datetime | None = None, conn: object | None = None
    ) -> Submitted:
        with self._submitting(conn) as tx:
            t = now_in(tx, now)
            submitted = self._insert_one(tx, spec, t)
            if submitted.created:
                notify(tx, CHANNEL_JOBS, *([CHANNEL_RUNS] if submitted.run else []))
        return submitted

    def submit_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None, conn: object | None = None
    ) -> list[Submitted]:
        # One statement for the whole batch (submit_jobs): jobs, and the runs of those due
        # now. The records returned are built here from the specs, not read back.
        if not specs:
            return []
        if conn is not None:  # in the caller's transaction: its pace is the caller's
            with borrowed(conn, json_loads) as tx:
                t = now_in(tx, now)
                batch = _Batch.of(self._bound_batch(tx, specs), t)
                _check_names(tx, batch.specs)
                rows = self._insert_batch(tx, batch.all_params())
                done = batch.submitted(tx, rows)
                if any(r.created for r in done):
                    notify(tx, CHANNEL_JOBS, *([CHANNEL_RUNS] if any(r.run for r in done) else []))
            return done
        # Hazard: every tickwork session lets the server end a transaction that waits on its
        # client for 2 s (pool.IDLE_IN_TRANSACTION_TIMEOUT: a vanished client must not hold
        # locks), and a batch of thousands of jobs is seconds of Python on a loaded host
        # (its schedules, its JSON, a garbage collection). So that work happens outside
        # the transaction: before it, at a time read from the store's clock first, and
        # after it (the records). The transaction is one pipeline, BEGIN to COMMIT under a
        # single Sync, so the server never waits on this process in between: it arms that
        # timeout only after a Sync, which is why BEGIN and COMMIT are sent as statements
        # (psycopg's transaction() syncs after BEGIN). The price: a process stopped while it
        # sends (SIGSTOP) keeps its new rows locked until it goes on or dies, which only a
        # concurrent submit of the same name or key waits on.
        with self._conn() as c:
            t = now if now is not None else now_in(c, None)
            calendars: dict[str, Any] = {}
            batch = _Batch.of(self._bound_batch(c, specs, calendars), t)
            _check_names(c, batch.specs)  # a name taken meanwhile: the unique index says so
            params = batch.all_params()
            cursors: list[Any] = []
            try:
                with c.pipeline() as p:
                    c.execute("BEGIN")
                    if calendars and _calendars_changed(c, p, calendars):
                        # Changed since it was read: bound again, now under the locks.
                        batch = _Batch.of(self._bound_batch(c, specs), t)
                        params = batch.all_params()
                    # First after a Sync (the calendars'): a small message, read at once,
                    # so that the server no longer counts this transaction idle.
                    notify(c, CHANNEL_JOBS, *([CHANNEL_RUNS] if any(batch.slots) else []))
                    for chunk in params:
                        cursor = c.cursor(row_factory=tuple_row)
                        cursors.append(cursor.execute(Q["submit_jobs"], chunk))
                    c.execute("COMMIT")
            except pg_errors.UniqueViolation:  # a name taken by a concurrent submit
                raise ValidationError(
                    "a job name in the batch was taken meanwhile; nothing was submitted",
                    field="name",
                ) from None
            # (A batch whose every key matched a job notified for nothing: a spare wake-up.)
            rows = [row for cursor in cursors for row in cursor.fetchall()]
            return batch.submitted(c, rows)

    @staticmethod
    def _insert_batch(tx: Conn, params: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        try:
            for chunk in params:
                rows += tx.cursor(row_factory=tuple_row).execute(Q["submit_jobs"], chunk).fetchall()
        except pg_errors.UniqueViolation:  # a name taken by a concurrent submit
            raise ValidationError(
                "a job name in the batch was taken meanwhile; nothing was submitted",
                field="name",
            ) from None
        return rows

    def _submitting(self, caller: object | None) -> AbstractContextManager[Conn]:
        """The transaction a submit writes in: a pooled connection's own, or a savepoint
        in the caller's (``conn=``, :mod:`.borrowed`)."""
        return self._tx() if caller is None else borrowed(caller, json_loads)

    def _insert_job(self, tx: Tx, spec: JobSpec, t: datetime) -> Submitted:
        return self._insert_one(cast(PgTx, tx).conn, spec, t)

    @staticmethod
    def _bound(conn: Conn, spec: JobSpec) -> JobSpec:
        return bind_calendar(
            spec, lambda name: conn.execute(Q["calendar_for_share"], {"name": name}).fetchone()
        )

    @staticmethod
    def _bound_batch(
        conn: Conn, specs: Sequence[JobSpec], read: dict[str, Any] | None = None
    ) -> Sequence[JobSpec]:
        """The batch with each cron schedule's calendar bound, each calendar read once (and
        kept in ``read``, by name, when given); an unknown calendar is the fault of its
        job's index."""
        rows: dict[str, Any] = {} if read is None else read

        def lookup(name: str) -> Any:
            if name not in rows:
                rows[name] = conn.execute(Q["calendar_for_share"], {"name": name}).fetchone()
            return rows[name]

        bound = list(specs)
        for i, spec in enumerate(specs):
            try:
                bound[i] = bind_calendar(spec, lookup)
            except ValidationError as exc:
                raise exc.at(i) from None
        return bound

    def _insert_one(self, conn: Conn, spec: JobSpec, t: datetime) -> Submitted:
        spec = self._bound(conn, spec)
        resolved = spec.schedule.resolve(t)
        first = resolved.first_slot(t)
        due_once = isinstance(resolved, schedules.Once) and first <= t
        params = mapping.job_params(spec, resolved, PG_CODEC)
        params.update(
            state=ScheduleState.COMPLETED if due_once else ScheduleState.ACTIVE,
            next_run_at=None if due_once else first,
            now=t,
        )
        try:
            with conn.transaction():
                row = conn.execute(Q["insert_job"], params).fetchone()
        except pg_errors.UniqueViolation:
            raise ValidationError(
                f"tenant {spec.tenant!r} already has a job named {spec.name!r}", field="name"
            ) from None
        if row is None:  # the idempotency key matched a committed job
            existing = conn.execute(
                Q["job_by_idempotency_key"], {"tenant": spec.tenant, "key": spec.idempotency_key}
            ).fetchone()
            assert existing is not None
            return Submitted(mapping.read_job(existing, PG_CODEC), created=False)
        if due_once:
            run_row = conn.execute(
                Q["insert_runs"], {"job_ids": [row["id"]], "slots": [first], "now": t}
            ).fetchone()
            assert run_row is not None
            job = mapping.job(row, PG_CODEC, RunState.QUEUED)  # it reads as its new run
            run = new_run(job, run_row["id"], run_row["scheduled_for"], run_row["created_at"])
            return Submitted(job, created=True, run=run)
        return Submitted(_job(row), created=True)


def _job(r: DictRow) -> Job:
    return mapping.job(r, PG_CODEC)


def _calendars_changed(conn: Conn, pipeline: Any, read: dict[str, Any]) -> bool:
    """Whether a calendar of ``read`` (rows by name, read before the transaction) is not
    as it was, now that the transaction holds it (FOR SHARE: its update or delete waits
    for this submit, and this submit for them)."""
    cursors = {name: conn.execute(Q["calendar_for_share"], {"name": name}) for name in sorted(read)}
    pipeline.sync()
    for name, cursor in cursors.items():
        now, before = cursor.fetchone(), read[name]
        if (now is None) != (before is None):
            return True
        if now is not None and before is not None and now["definition"] != before["definition"]:
            return True
    return False


def _check_names(conn: Conn, specs: Sequence[JobSpec]) -> None:
    """ValidationError, naming the first job at fault, when a name repeats within the batch
    or is taken in its tenant (names are unique per tenant)."""
    first: dict[tuple[str, str], int] = {}
    for i, spec in enumerate(specs):
        if spec.name is None:
            continue
        key = (spec.tenant, spec.name)
        if key in first:
            raise ValidationError(
                f"job {first[key]} of the batch has the name {spec.name!r} too", field="name"
            ).at(i)
        first[key] = i
    if not first:
        return
    taken = conn.execute(
        Q["jobs_by_names"],
        {"tenants": [k[0] for k in first], "names": [k[1] for k in first]},
    ).fetchall()
    if taken:
        i = min(first[(r["tenant"], r["name"])] for r in taken)
        spec = specs[i]
        raise ValidationError(
            f"tenant {spec.tenant!r} already has a job named {spec.name!r}", field="name"
        ).at(i)


def _template(
    ix: int, spec: JobSpec, schedule: schedules.Schedule, first: datetime, slot: datetime | None
) -> dict[str, Any]:
    """The ``submit_jobs`` template ``ix``: the columns jobs like ``spec`` share."""
    retry = spec.retry
    shape: dict[str, Any] = {
        "ix": ix,
        "tenant": spec.tenant,
        "task": spec.task,
        "schedule": schedule.to_json(),
        "state": (ScheduleState.ACTIVE if slot is None else ScheduleState.COMPLETED).value,
        "queue": spec.queue,
        "priority": spec.priority,
        "max_attempts": retry.max_attempts,
        "backoff_base": retry.backoff_base,
        "backoff_cap": retry.backoff_cap,
        "misfire": spec.misfire.value,
        "misfire_grace": spec.misfire_grace.total_seconds(),
        "overlap": spec.overlap.value,
    }
    if slot is None:
        shape["next_run_at"] = first.isoformat()
    else:
        shape["slot"] = slot.isoformat()
    if spec.timeout is not None:
        shape["timeout"] = spec.timeout.total_seconds()
    return shape


@dataclass(frozen=True, slots=True)
class _Batch:
    """A bulk submit's specs and what the store derives from them at ``t``."""

    specs: Sequence[JobSpec]
    t: datetime
    resolved: list[schedules.Schedule]
    firsts: list[datetime]
    slots: list[datetime | None]  # the run's slot, for a one-off job due now

    @classmethod
    def of(cls, specs: Sequence[JobSpec], t: datetime) -> _Batch:
        resolved = [spec.schedule.resolve(t) for spec in specs]
        firsts = []
        for i, r in enumerate(resolved):
            try:
                firsts.append(r.first_slot(t))
            except ValidationError as exc:  # a rule that never fires: its job's fault
                raise exc.at(i) from None
        slots = [
            f if f <= t and isinstance(r, schedules.Once) else None
            for r, f in zip(resolved, firsts, strict=True)
        ]
        return cls(specs, t, resolved, firsts, slots)

    def all_params(self) -> list[dict[str, Any]]:
        """``submit_jobs``'s parameters for the whole batch, a statement each
        ``SUBMIT_STATEMENT_ROWS`` jobs."""
        return [
            self.params(start, SUBMIT_STATEMENT_ROWS)
            for start in range(0, len(self.specs), SUBMIT_STATEMENT_ROWS)
        ]

    def params(self, start: int, count: int) -> dict[str, Any]:
        """``submit_jobs``'s parameters for ``count`` specs from ``start``: what the jobs
        share (tenant, task, schedule, policies) as a few *templates*, and per job its
        template and what is its own (args, name, keys), each a JSON array of objects
        without the null members. A fan-out of one task is one template: the server reads
        at most five fields a job instead of nineteen, and this side builds one small object."""
        templates: dict[tuple[Any, ...], int] = {}
        shapes: list[dict[str, Any]] = []
        rows: list[dict[str, Any]] = []
        end = start + count
        for spec, schedule, first, slot in zip(
            self.specs[start:end],
            self.resolved[start:end],
            self.firsts[start:end],
            self.slots[start:end],
            strict=True,
        ):
            key = (spec.tenant, spec.task, schedule, first, slot is None, *run_policy(spec))
            ix = templates.get(key)
            if ix is None:
                ix = templates[key] = len(shapes)
                shapes.append(_template(ix, spec, schedule, first, slot))
            row: dict[str, Any] = {"tpl": ix}
            if spec.args:
                row["args"] = spec.args
            if spec.name is not None:
                row["name"] = spec.name
            if spec.idempotency_key is not None:
                row["idempotency_key"] = spec.idempotency_key
            if spec.trace_context is not None:
                row["trace_context"] = spec.trace_context
            rows.append(row)
        return {
            "templates": json.dumps(shapes, separators=(",", ":")),
            "jobs": json.dumps(rows, separators=(",", ":")),
            "now": self.t,
        }

    def submitted(self, conn: Conn, rows: list[tuple[Any, ...]]) -> list[Submitted]:
        """The records of the ``submit_jobs`` answer: a new job built from its spec; one
        whose idempotency key matched is the batch's earlier job with that key, else read."""
        out: list[Submitted | None] = []
        by_key: dict[tuple[str, str], Job] = {}
        missing: list[int] = []
        for i, (job_id, created, run_id) in enumerate(rows):
            spec, slot = self.specs[i], self.slots[i]
            key = spec.idempotency_key
            if not created:
                assert key is not None
                earlier = by_key.get((spec.tenant, key))
                out.append(Submitted(earlier, created=False) if earlier else None)
                if earlier is None:
                    missing.append(i)
                continue
            job = self.job(i, job_id)
            if key is not None:
                by_key[(spec.tenant, key)] = job
            run = new_run(job, run_id, slot, self.t) if slot is not None else None
            out.append(Submitted(job, created=True, run=run))
        if missing:
            keyed = [self.specs[i] for i in missing]
            found = conn.execute(
                Q["jobs_by_idempotency_keys"],
                {"tenants": [s.tenant for s in keyed], "keys": [s.idempotency_key for s in keyed]},
            ).fetchall()
            existing = {
                (r["tenant"], r["idempotency_key"]): mapping.read_job(r, PG_CODEC) for r in found
            }
            for i, spec in zip(missing, keyed, strict=True):
                out[i] = Submitted(existing[(spec.tenant, cast(str, spec.idempotency_key))], False)
        return [s for s in out if s is not None]

    def job(self, i: int, job_id: int) -> Job:
        """The row ``submit_jobs`` wrote for spec ``i``, as :func:`_job` would read it."""
        spec, slot, t = self.specs[i], self.slots[i], self.t
        return Job(
            id=job_id,
            tenant=spec.tenant,
            name=spec.name,
            task=spec.task,
            # As stored: JSON turns a tuple into a list, a number key into text.
            args=json.loads(json.dumps(spec.args)) if spec.args else {},
            schedule=self.resolved[i],
            # As :func:`~tickwork.store.rows.job` reads it: a job due now, as its new run.
            state=JobState.of(
                ScheduleState.ACTIVE if slot is None else ScheduleState.COMPLETED,
                isinstance(self.resolved[i], schedules.Once),
                None if slot is None else RunState.QUEUED,
            ),
            next_run_at=self.firsts[i] if slot is None else None,
            queue=spec.queue,
            priority=spec.priority,
            retry=spec.retry,
            timeout=spec.timeout,
            misfire=spec.misfire,
            misfire_grace=spec.misfire_grace,
            overlap=spec.overlap,
            idempotency_key=spec.idempotency_key,
            created_at=t,
            updated_at=t,
            trace_context=spec.trace_context,
        )
