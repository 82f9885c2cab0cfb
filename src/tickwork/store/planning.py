"""What one trigger transaction writes, decided in Python, identically for every store.

The stores select the due jobs (locked), hand them here with the set of jobs that have
unfinished runs, and write back what :func:`plan_batch` returns: the runs to insert, each
job's new ``next_run_at`` and state, the slot ledger entries, and the jobs whose unfinished
runs overlap ``replace`` cancels.

Every next slot is searched within a budget (:mod:`tickwork.search`), so no job can stall
a trigger. A cron job whose search finds no next slot, because its rule fires no more or
because the budget ran out first (a calendar closed for decades), is completed like a job
whose schedule reached the calendar's end: its due slots still run, and the leader logs one
WARNING naming the job, its rule and why (the job is not planned again).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Generic, Protocol, TypeVar

from tickwork.job import (
    ONE_OFF_LEAD,
    Job,
    JobSpec,
    MisfirePolicy,
    OverlapPolicy,
    ScheduleState,
    plan_slots,
    run_policy,
)
from tickwork.schedule import Cron, Interval, Once, Schedule
from tickwork.store.base import SlotFate

log = logging.getLogger("tickwork.scheduler")


class DueJob(Protocol):
    """What planning reads of a due job: a :class:`Job`, or a store's narrower row."""

    @property
    def id(self) -> int: ...
    @property
    def schedule(self) -> Schedule: ...
    @property
    def next_run_at(self) -> datetime | None: ...
    @property
    def misfire(self) -> MisfirePolicy: ...
    @property
    def misfire_grace(self) -> timedelta: ...
    @property
    def overlap(self) -> OverlapPolicy: ...


J = TypeVar("J", bound=DueJob)


@dataclass(slots=True)
class NewRun(Generic[J]):
    job: J
    scheduled_for: datetime


@dataclass(slots=True)
class JobAdvance:
    job_id: int
    next_run_at: datetime | None
    state: ScheduleState


@dataclass(slots=True)
class Skip:
    job_id: int
    first_slot: datetime
    last_slot: datetime
    count: int
    fate: SlotFate
    more: bool
    coalesced_into: datetime | None  # resolved to a run id once runs are inserted


@dataclass(slots=True)
class BatchPlan(Generic[J]):
    runs: list[NewRun[J]] = field(default_factory=list)
    advances: list[JobAdvance] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    replace_job_ids: list[int] = field(default_factory=list)


def plan_batch(jobs: Sequence[J], unfinished_job_ids: set[int], now: datetime) -> BatchPlan[J]:
    batch: BatchPlan[J] = BatchPlan()
    for job in jobs:
        assert job.next_run_at is not None
        at = now
        if isinstance(job.schedule, Once) and job.next_run_at > now:
            # Triggered ahead of its time (ONE_OFF_LEAD, the due jobs' query): planned as at
            # its slot, on time; its run is claimable from the slot.
            assert job.next_run_at <= now + ONE_OFF_LEAD, (job.id, job.next_run_at, now)
            at = job.next_run_at
        plan = plan_slots(
            job.schedule,
            job.next_run_at,
            at,
            misfire=job.misfire,
            grace=job.misfire_grace,
            overlap=job.overlap,
            has_unfinished=job.id in unfinished_job_ids,
        )
        for slot in plan.run_slots:
            batch.runs.append(NewRun(job, slot))
        state = ScheduleState.ACTIVE if plan.next_run_at is not None else ScheduleState.COMPLETED
        if state is ScheduleState.COMPLETED and isinstance(job.schedule, Cron):
            _log_completed(job.id, job.schedule, now)
        batch.advances.append(JobAdvance(job.id, plan.next_run_at, state))
        for skipped in plan.skipped:
            batch.skips.append(
                Skip(
                    job.id,
                    skipped.first,
                    skipped.last,
                    skipped.count,
                    SlotFate(skipped.fate),
                    skipped.more,
                    plan.coalesced_into if skipped.fate == SlotFate.COALESCED else None,
                )
            )
        if plan.cancel_unfinished:
            batch.replace_job_ids.append(job.id)
    return batch


def _log_completed(job_id: int, schedule: Cron, now: datetime) -> None:
    """One WARNING for a cron job the trigger completes: it has no next slot to plan."""
    found = schedule.search(now)
    why = str(schedule.no_slot(now, found)) if found.slot is None else "no slot after its last"
    log.warning("trigger completed job=%d: %s", job_id, why)


def paused_slots(job: Job, now: datetime) -> tuple[Skip | None, datetime | None]:
    """On resume: the slots that fell while paused (one ledger entry) and the next slot."""
    if job.next_run_at is None:
        return None, None
    first = job.next_run_at
    count = 0
    last = first
    slot: datetime | None = first
    more = False
    while slot is not None and slot <= now:
        if count >= 10_000:
            more = True
            break
        last = slot
        count += 1
        slot = job.schedule.next_after(slot)
    if more:
        slot = job.schedule.next_after(now)
    if count == 0:
        return None, first
    return Skip(job.id, first, last, count, SlotFate.PAUSED, more, None), slot


def same_schedule(current: Schedule, wanted: Schedule) -> bool:
    """Whether ``wanted`` (as declared, unresolved) is the schedule ``current`` already has:
    an interval declared without an anchor matches the anchored one it was resolved to."""
    if isinstance(wanted, Interval) and isinstance(current, Interval):
        return wanted.every == current.every and wanted.anchor in (None, current.anchor)
    if isinstance(wanted, Once) and wanted.delay is not None:
        return False
    return current == wanted


def spec_matches(job: Job, spec: JobSpec, resolved: Schedule) -> bool:
    """Whether ``put_schedule(spec)`` would change nothing on ``job``."""
    return (job.task, job.args, job.schedule, *run_policy(job)) == (
        spec.task,
        spec.args,
        resolved,
        *run_policy(spec),
    )
