"""Job transitions, written once for every dialect: put_schedule, pause, resume, cancel,
trigger_job, and the job reads."""

from __future__ import annotations

import abc
from datetime import datetime
from operator import attrgetter
from typing import Any

from tickwork import schedule as schedules
from tickwork.errors import InvalidTransition, JobNotFound, ValidationError
from tickwork.job import ONE_OFF_LEAD, Job, JobSpec, JobState, Run, ScheduleState
from tickwork.records import page_of
from tickwork.store import rows
from tickwork.store.base import (
    CHANNEL_JOBS,
    CHANNEL_RUNS,
    DEFAULT_PAGE,
    Page,
    SlotSkip,
    Submitted,
    page_limit,
)
from tickwork.store.driver import Tx
from tickwork.store.planning import paused_slots, same_schedule, spec_matches
from tickwork.store.sql.calendars import bind_calendar
from tickwork.store.sql.core import SqlCore


class JobTransitions(SqlCore):
    @abc.abstractmethod
    def _insert_job(self, tx: Tx, spec: JobSpec, t: datetime) -> Submitted:
        """Inserts one job (and its run, for a once job already due) in ``tx``; a repeated
        idempotency key answers the existing job. A taken name raises ValidationError.
        Per dialect: it is bulk submit's one-by-one path."""

    def put_schedule(self, spec: JobSpec, *, now: datetime | None = None) -> Submitted:
        if spec.name is None:
            raise ValidationError("a schedule needs a name", field="name")
        by_name = self.q["job_by_name_for_update"]
        with self.driver.write() as tx:
            t = tx.now(now)
            spec = bind_calendar(
                spec, lambda name: tx.one(self.q["calendar_for_share"], {"name": name})
            )
            row = tx.one(by_name, {"tenant": spec.tenant, "name": spec.name})
            if row is None:
                try:
                    submitted = self._insert_job(tx, spec, t)
                except ValidationError:
                    # Another node created the name since our select: take the update path
                    # on its row (the unique index decided the race; the lock orders us).
                    row = tx.one(by_name, {"tenant": spec.tenant, "name": spec.name})
                    if row is None:
                        raise
            if row is not None:
                current = rows.job(row, self.codec)
                stored = rows.schedule_state(row)
                unchanged = same_schedule(current.schedule, spec.schedule)
                resolved = current.schedule if unchanged else spec.schedule.resolve(t)
                live = stored in (ScheduleState.ACTIVE, ScheduleState.PAUSED)
                if live and spec_matches(current, spec, resolved):
                    return Submitted(current, created=False)
                next_run_at = current.next_run_at if unchanged and live else resolved.first_slot(t)
                params = rows.job_params(spec, resolved, self.codec)
                params.update(
                    id=current.id,
                    now=self.codec.time(t),
                    state=stored if stored is ScheduleState.PAUSED else ScheduleState.ACTIVE,
                    next_run_at=self.codec.time(next_run_at),
                )
                updated = tx.one(self.q["update_job_spec"], params)
                assert updated is not None
                submitted = Submitted(rows.job(updated, self.codec), created=False)
            tx.notify(CHANNEL_JOBS)
        return submitted

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        with self.driver.read() as tx:
            row = tx.one(self.q["get_job"], {"id": job_id, "tenant": tenant})
        if row is None:
            raise JobNotFound(job_id)
        return rows.read_job(row, self.codec)

    def list_jobs(
        self,
        *,
        tenant: str | None = None,
        state: JobState | None = None,
        task: str | None = None,
        after: int | None = None,
        limit: int = DEFAULT_PAGE,
        search: str | None = None,
        recurring: bool | None = None,
    ) -> Page[Job]:
        limit = page_limit(limit)
        params: dict[str, Any] = {
            "tenant": tenant,
            "state": state,
            "task": task,
            "after": after,
            "search": search,
            "recurring": recurring,
        }
        params["limit"] = limit + 1  # one more: is there a next page?
        with self.driver.read() as tx:
            found = tx.all(self.q["list_jobs"], params)
        return page_of([rows.read_job(r, self.codec) for r in found], limit, attrgetter("id"))

    def _job_for_update(self, tx: Tx, job_id: int, tenant: str | None) -> tuple[Job, ScheduleState]:
        """The job, locked, and its schedule's stored state (what the transitions act on)."""
        row = tx.one(self.q["get_job_for_update"], {"id": job_id, "tenant": tenant})
        if row is None:
            raise JobNotFound(job_id)
        return rows.read_job(row, self.codec), rows.schedule_state(row)

    def _set_state(
        self, tx: Tx, job_id: int, state: ScheduleState, next_run_at: datetime | None, t: datetime
    ) -> Job:
        time = self.codec.time
        row = tx.one(
            self.q["set_job_state"],
            {"id": job_id, "state": state, "next_run_at": time(next_run_at), "now": time(t)},
        )
        assert row is not None
        tx.notify(CHANNEL_JOBS)
        return rows.job(row, self.codec)

    def cancel_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        with self.driver.write() as tx:
            t = tx.now(now)
            job, stored = self._job_for_update(tx, job_id, tenant)
            if stored is ScheduleState.CANCELLED:
                return job
            tx.all(
                self.q["cancel_waiting_runs_of_job"],
                {"job_id": job_id, "now": self.codec.time(t), "reason": "job cancelled"},
            )
            return self._set_state(tx, job_id, ScheduleState.CANCELLED, None, t)

    def pause_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        with self.driver.write() as tx:
            t = tx.now(now)
            job, stored = self._job_for_update(tx, job_id, tenant)
            if stored is ScheduleState.PAUSED:
                return job
            if stored is not ScheduleState.ACTIVE:
                raise InvalidTransition("job", job_id, job.state, "pause")
            return self._set_state(tx, job_id, ScheduleState.PAUSED, job.next_run_at, t)

    def resume_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        time = self.codec.time
        with self.driver.write() as tx:
            t = tx.now(now)
            job, stored = self._job_for_update(tx, job_id, tenant)
            if stored is ScheduleState.ACTIVE:
                return job
            if stored is not ScheduleState.PAUSED:
                raise InvalidTransition("job", job_id, job.state, "resume")
            next_run_at = job.next_run_at
            if not isinstance(job.schedule, schedules.Once):
                skip, next_run_at = paused_slots(job, t)
                if skip is not None:
                    tx.count(
                        self.q["insert_slot_skip"],
                        {
                            "job_id": job_id,
                            "first_slot": time(skip.first_slot),
                            "last_slot": time(skip.last_slot),
                            "count": skip.count,
                            "fate": skip.fate,
                            "run_id": None,
                            "more": skip.more,
                            "now": time(t),
                        },
                    )
            state = ScheduleState.ACTIVE if next_run_at is not None else ScheduleState.COMPLETED
            return self._set_state(tx, job_id, state, next_run_at, t)

    def trigger_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Run:
        with self.driver.write() as tx:
            t = self.codec.time(tx.now(now))
            job, stored = self._job_for_update(tx, job_id, tenant)
            if stored is ScheduleState.CANCELLED:
                raise InvalidTransition("job", job_id, job.state, "trigger")
            row = tx.one(self.q["trigger_job"], {"job_id": job_id, "now": t})
            if row is None:  # a run already holds this very microsecond's slot
                row = tx.one(self.q["run_at_slot"], {"job_id": job_id, "slot": t})
            assert row is not None
            tx.notify(CHANNEL_RUNS)
        return rows.run(row, self.codec)

    def next_due_at(self) -> datetime | None:
        with self.driver.read() as tx:
            lead = self.codec.duration(ONE_OFF_LEAD)
            row = tx.one(self.q["next_due_at"], {"lead": lead, "now": self.driver.at(None)})
        return self.codec.from_time(row["at"]) if row is not None else None

    def slot_skips(
        self, job_id: int, *, tenant: str | None = None, limit: int = DEFAULT_PAGE
    ) -> list[SlotSkip]:
        params = {"job_id": job_id, "tenant": tenant, "limit": page_limit(limit)}
        with self.driver.read() as tx:
            found = tx.all(self.q["slot_skips"], params)
        if not found:
            self.get_job(job_id, tenant=tenant)  # JobNotFound for unknown or foreign ids
        return [rows.skip(r, self.codec) for r in found]

    def runs_for_slot(
        self, job_id: int, slot: datetime, *, tenant: str | None = None
    ) -> tuple[Job, list[Run], list[SlotSkip]]:
        job = self.get_job(job_id, tenant=tenant)
        params = {"job_id": job_id, "slot": self.codec.time(slot)}
        with self.driver.read() as tx:
            runs = [rows.run(r, self.codec) for r in tx.all(self.q["run_at_slot"], params)]
            skips = [rows.skip(r, self.codec) for r in tx.all(self.q["skips_covering"], params)]
        return job, runs, skips
