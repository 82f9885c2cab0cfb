"""Rows the pipelined trigger and bulk submit build without reading them back: a due job as
the trigger reads it, and a run just inserted for a job."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, NamedTuple

from tickwork import schedule as schedules
from tickwork.job import Job, MisfirePolicy, OverlapPolicy, Run, RunState
from tickwork.store.postgres.driver import schedule_of


class DueRow(NamedTuple):
    """A due job as the trigger reads it: what planning needs and what a new run copies."""

    id: int
    next_run_at: datetime
    misfire: MisfirePolicy
    misfire_grace: timedelta
    overlap: OverlapPolicy
    schedule: schedules.Schedule
    tenant: str
    task: str
    args: dict[str, Any]
    queue: str
    priority: int
    max_attempts: int
    timeout: timedelta | None


_MISFIRE = {p.value: p for p in MisfirePolicy}
_OVERLAP = {p.value: p for p in OverlapPolicy}
"""Policy by stored text: per due job, a dict lookup is much cheaper than the enum call
(benchmarks/README.md, "Figures behind the store's comments")."""


@lru_cache(maxsize=256)
def _seconds(value: float) -> timedelta:
    """A stored duration (grace, timeout): a few distinct values over thousands of jobs."""
    return timedelta(seconds=value)


def due_job(r: tuple[Any, ...]) -> DueRow:
    """A ``due_jobs`` row; see the query for the columns."""
    (id_, next_run_at, misfire, grace, overlap, schedule, every, anchor) = r[:8]
    tenant, task, args, queue, priority, max_attempts, timeout = r[8:]
    return DueRow(
        id_,
        next_run_at,
        _MISFIRE.get(misfire) or MisfirePolicy(misfire),  # the call: ValueError if unknown
        _seconds(grace),
        _OVERLAP.get(overlap) or OverlapPolicy(overlap),
        schedule_of(schedule)
        if schedule is not None
        else schedules.interval_from_json(every, anchor),
        tenant,
        task,
        args,
        queue,
        priority,
        max_attempts,
        _seconds(timeout) if timeout is not None else None,
    )


def new_run(job: Job | DueRow, run_id: int, slot: datetime, created_at: datetime) -> Run:
    """A run just inserted for ``job`` (by submit or trigger): the job supplies what the
    insert copied from it."""
    return Run(
        id=run_id,
        job_id=job.id,
        tenant=job.tenant,
        task=job.task,
        args=job.args,
        queue=job.queue,
        priority=job.priority,
        scheduled_for=slot,
        run_at=slot,
        state=RunState.QUEUED,
        attempt=1,
        max_attempts=job.max_attempts if isinstance(job, DueRow) else job.retry.max_attempts,
        fencing_token=0,
        worker=None,
        lease_expires_at=None,
        started_at=None,
        finished_at=None,
        error=None,
        result=None,
        timeout=job.timeout,
        created_at=created_at,
    )
