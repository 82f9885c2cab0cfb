"""Submit, one job or a batch: one write transaction, a job at a time."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import cast

from tickwork import schedule as schedules
from tickwork.clock import from_micros, to_micros
from tickwork.errors import ValidationError
from tickwork.job import JobSpec, RunState, ScheduleState
from tickwork.store import rows
from tickwork.store.base import CHANNEL_JOBS, CHANNEL_RUNS, Submitted
from tickwork.store.driver import Tx
from tickwork.store.sql.calendars import bind_calendar
from tickwork.store.sqlite.core import SqliteCore
from tickwork.store.sqlite.driver import SQLITE_CODEC as C
from tickwork.store.sqlite.driver import Q, SqliteTx


class SqliteSubmit(SqliteCore):
    def submit(
        self, spec: JobSpec, *, now: datetime | None = None, conn: object | None = None
    ) -> Submitted:
        return self._submit([spec], now, conn, batch=False)[0]

    def submit_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None, conn: object | None = None
    ) -> list[Submitted]:
        return self._submit(specs, now, conn, batch=True)

    def _submit(
        self, specs: Sequence[JobSpec], now: datetime | None, conn: object | None, *, batch: bool
    ) -> list[Submitted]:
        if conn is not None:
            raise ValidationError(
                "conn= writes in a caller's PostgreSQL transaction; this store is SQLite "
                f"({self.path})",
                field="conn",
            )
        t = self._now(now)
        submitted: list[Submitted] = []
        with self._write() as tx:
            for i, spec in enumerate(specs):
                try:
                    submitted.append(self._submit_one(tx, spec, t))
                except ValidationError as exc:
                    raise exc.at(i) if batch else exc from None
        channels = [CHANNEL_JOBS] if any(s.created for s in submitted) else []
        if any(s.run for s in submitted):
            channels.append(CHANNEL_RUNS)
        self._signals.notify(*channels)
        return submitted

    def _submit_one(self, conn: sqlite3.Connection, spec: JobSpec, t: int) -> Submitted:
        if spec.idempotency_key is not None:
            row = conn.execute(
                Q["job_by_idempotency_key"],
                {"tenant": spec.tenant, "key": spec.idempotency_key},
            ).fetchone()
            if row is not None:
                return Submitted(rows.read_job(row, C), created=False)
        if spec.name is not None:
            taken = conn.execute(
                Q["job_by_name_for_update"], {"tenant": spec.tenant, "name": spec.name}
            ).fetchone()
            if taken is not None:
                raise ValidationError(
                    f"tenant {spec.tenant!r} already has a job named {spec.name!r} "
                    f"(job {taken['id']})",
                    field="name",
                )
        return self._insert_one(conn, spec, t)

    def _insert_job(self, tx: Tx, spec: JobSpec, t: datetime) -> Submitted:
        return self._insert_one(cast(SqliteTx, tx).conn, spec, to_micros(t))

    def _insert_one(self, conn: sqlite3.Connection, spec: JobSpec, t: int) -> Submitted:
        spec = bind_calendar(
            spec, lambda name: conn.execute(Q["calendar_for_share"], {"name": name}).fetchone()
        )
        now_dt = from_micros(t)
        resolved = spec.schedule.resolve(now_dt)
        first = resolved.first_slot(now_dt)
        due_once = isinstance(resolved, schedules.Once) and first <= now_dt
        params = rows.job_params(spec, resolved, C)
        params.update(
            state=ScheduleState.COMPLETED if due_once else ScheduleState.ACTIVE,
            next_run_at=None if due_once else to_micros(first),
            now=t,
        )
        job_row = conn.execute(Q["insert_job"], params).fetchone()
        run = None
        if due_once:
            run_row = conn.execute(
                Q["insert_runs"],
                {"job_id": job_row["id"], "scheduled_for": to_micros(first), "now": t},
            ).fetchone()
            run = rows.run(run_row, C)
        # A job due now reads as the run just queued with it.
        latest = RunState.QUEUED if due_once else None
        return Submitted(rows.job(job_row, C, latest), created=True, run=run)
