"""Why did (or didn't) a job run at a slot? One paragraph, from the store's records.

The slot ledger is the runs table (a slot that got a run) plus ``tickwork_slot_skips``
(a range of slots that did not, with the reason). :func:`explain_slot` reads both, with
the job and the leader lease, and answers the most common support question in plain
English. It is pure: the caller fetches the records (``Store.runs_for_slot``, and for a
slot triggered or skipped late, or due with no leader, ``Store.leader_terms``: a gap with no
leader then is named, "no leader from 16:07:38 to 16:07:49; epoch 2 → 3").
:func:`explain` returns the answer as a record (:class:`Explanation`: the slot, its run or
its ledger entry, and the paragraph); :func:`explain_slot` only the paragraph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise

from tickwork import cron
from tickwork.budget import Budget
from tickwork.job import Job, JobState, Run, RunState
from tickwork.records import (
    LeaderTerm,
    Lease,
    SlotFate,
    SlotSkip,
    TaskStatus,
    TenantStatus,
    format_rate,
)
from tickwork.schedule import Cron, Interval, Once
from tickwork.timetext import check_instant, read_time

ONE_US = timedelta(microseconds=1)
LATE_AFTER = timedelta(seconds=1)
"""A run triggered (or a slot skipped) more than this after its slot was late: explain
reads the leadership terms then, to name a gap with no leader."""


def parse_slot(text: str, job: Job) -> datetime:
    """An ISO-8601 time; without an offset it is read in the job's time zone (cron) or UTC.
    InvalidSchedule for text that is no time, or a time out of range (the rule of every
    input time: :func:`tickwork.timetext.check_instant`)."""
    value = read_time(text, field="at")
    if value.tzinfo is None:
        zone = job.schedule.tz if isinstance(job.schedule, Cron) else "UTC"
        value = value.replace(tzinfo=cron.zone(zone))
    return check_instant(value, field="at", text=text)


def is_slot(job: Job, slot: datetime) -> tuple[bool, datetime | None, datetime | None]:
    """Whether ``slot`` is one of the schedule's slots, with the nearest slots around it
    (for a one-off job: its one slot, as the "after" value). Each is searched within a
    budget (:mod:`tickwork.search`): None when there is none, or none the search found."""
    schedule = job.schedule
    if isinstance(schedule, Once):
        return schedule.at == slot, None, schedule.at
    at_or_after = schedule.next_after(slot - ONE_US)
    after = schedule.next_after(slot) if at_or_after == slot else at_or_after
    before = slot_before(job, slot)
    return at_or_after == slot, before, after


SLOT_BEFORE_HORIZON = timedelta(days=8 * 366)
"""How far back explain looks for a cron job's slot before a time: to a 29 February past
a non-leap century year."""


def slot_before(job: Job, slot: datetime) -> datetime | None:
    """The schedule's latest slot strictly before ``slot``, or None (none, too far, or not
    found within the search's budget).

    Cron times can only be searched forwards, so this is a bisection over where to start:
    the latest start whose next slot still falls before ``slot`` has that slot as its next
    one. About fifty searches, each ending at ``slot`` (none seeks on past it), all within
    one search budget (:mod:`tickwork.search`): a dense rule is not walked slot by slot,
    nor a rare one year by year more than once."""
    schedule = job.schedule
    if isinstance(schedule, Interval) and schedule.anchor is not None:
        if slot <= schedule.anchor:
            return None
        step = schedule.every // ONE_US
        k = ((slot - schedule.anchor) // ONE_US - 1) // step
        return schedule.anchor + timedelta(microseconds=k * step)
    if not isinstance(schedule, Cron):
        return None
    budget = Budget()
    until = slot - ONE_US

    def first_after(t: datetime) -> datetime | None:
        return next(schedule.iterate(t, until=until, budget=budget), None)

    best = first_after(slot - SLOT_BEFORE_HORIZON)
    if best is None:
        return None
    # A slot known (best, at lo); none after hi before ``slot``.
    lo, hi = best, until
    while hi - lo > ONE_US and not budget.exhausted:
        mid = lo + (hi - lo) // 2
        found = first_after(mid)
        if found is None:
            hi = mid
        else:
            lo = best = found
    last = first_after(lo)
    if budget.exhausted:
        return None  # not the latest for sure
    return last if last is not None else best


def latest_slot(job: Job, now: datetime) -> datetime:
    """The job's latest slot at or before ``now``; its first slot when none has fallen."""
    schedule = job.schedule
    if isinstance(schedule, Once):
        return schedule.first_slot(job.created_at)
    found = slot_before(job, now + ONE_US)
    if found is not None and found > job.created_at:
        return found
    # None only for a schedule with no slot left before the calendar's end, or none its
    # search found within its budget.
    return schedule.next_after(job.created_at) or job.created_at


@dataclass(frozen=True, slots=True)
class Explanation:
    """What happened to a job at one slot (:meth:`tickwork.client.Client.explain`)."""

    job_id: int
    slot: datetime  # the slot asked about, an aware instant
    run: Run | None  # the slot's run, when it was triggered
    skip: SlotSkip | None  # the ledger entry, when it was skipped (and not triggered)
    text: str  # one paragraph, for people

    @property
    def fate(self) -> SlotFate | None:
        """Why the slot got no run of its own, when the ledger says so."""
        return self.skip.fate if self.skip is not None else None


def explain(
    job: Job,
    slot: datetime,
    runs: list[Run],
    skips: list[SlotSkip],
    *,
    now: datetime,
    leader: Lease | None,
    retention: timedelta | None = None,
    tenant: TenantStatus | None = None,
    task: TaskStatus | None = None,
    unserved: str | None = None,
    terms: Sequence[LeaderTerm] = (),
) -> Explanation:
    """The fate of ``job`` at ``slot`` as a record; its text is :func:`explain_slot`'s.
    ``tenant`` and ``task``: the run's tenant and task now, to say why a due run waits;
    ``unserved``: why no live worker would claim it, if none would
    (:meth:`tickwork.presence.LiveWorkers.unserved`); ``terms``: the leadership terms
    around the slot (:meth:`tickwork.store.base.Store.leader_terms`), to name a failover
    that made it late."""
    text = explain_slot(
        job,
        slot,
        runs,
        skips,
        now=now,
        leader=leader,
        retention=retention,
        tenant=tenant,
        task=task,
        unserved=unserved,
        terms=terms,
    )
    run = runs[0] if runs else None
    skip = skips[0] if skips and run is None and is_slot(job, slot)[0] else None
    return Explanation(job.id, slot, run, skip, text)


def explain_slot(
    job: Job,
    slot: datetime,
    runs: list[Run],
    skips: list[SlotSkip],
    *,
    now: datetime,
    leader: Lease | None,
    retention: timedelta | None = None,
    tenant: TenantStatus | None = None,
    task: TaskStatus | None = None,
    unserved: str | None = None,
    terms: Sequence[LeaderTerm] = (),
) -> str:
    """One paragraph on the fate of ``job`` at ``slot`` (an aware instant)."""
    when = _fmt(slot, job)
    head = f"Job {job.id} ({job.name or job.task}, {job.schedule.describe()})"
    note = job.schedule.note_at(slot) if isinstance(job.schedule, Cron) else None
    if runs:
        run = _describe_run(runs[0], now, tenant, task, unserved)
        text = f"{head} was triggered for {when}: {run}"
        text += _failover("ran late", terms, slot, runs[0].created_at, job)
        return f"{text} Note: {note}." if note else text
    matches, before, after = is_slot(job, slot)
    if matches and skips:
        skip = skips[0]
        missed = _failover("was missed", terms, slot, skip.recorded_at, job)
        return f"{head} did not run at {when}: {_describe_skip(skip, job)}{missed}"
    did_not = "will not run" if slot > now else "did not run"
    if not matches and note is not None:
        return f"{head} {did_not} at {when}: {note}."
    if not matches:
        if isinstance(job.schedule, Once):
            around = f"its one slot is {_fmt(after, job)}" if after else "it has no slot"
        else:
            around = ", ".join(
                f"{label} {_fmt(t, job)}"
                for label, t in (("the slot before is", before), ("the next is", after))
                if t
            )
        return f"{head} has no slot at {when}: {around}."
    if slot <= job.created_at and not isinstance(job.schedule, Once):
        # A recurring job's first slot is the first one after it was created.
        return (
            f"{head} did not run at {when}: the job did not exist yet "
            f"(it was created at {_fmt(job.created_at, job)})."
        )
    if job.state is JobState.CANCELLED:
        cancelled = _fmt(job.updated_at, job)
        if slot >= job.updated_at:
            return (
                f"{head} {did_not} at {when}: the job was cancelled at {cancelled}, "
                "so no slot after that is triggered."
            )
        return (
            f"{head} has no record of the slot {when}, which fell before the job was "
            f"cancelled at {cancelled}: the slot was still untriggered when the job was "
            "cancelled (no scheduler had reached it), or its run was pruned after it finished."
        )
    if slot > now:
        if job.state is JobState.PAUSED:
            return (
                f"{head} will not run at {when} unless resumed before then: the job is "
                "paused (slots that fall while paused are skipped)."
            )
        text = f"{head} has not reached {when} yet; it is {job.state} and will be triggered then."
        return f"{text} Note: {note}." if note else text
    if job.next_run_at is not None and slot >= job.next_run_at:
        if job.state is JobState.PAUSED:
            return (
                f"{head} did not run at {when}: the job is paused (since "
                f"{_fmt(job.updated_at, job)}); on resume this slot is recorded as "
                "skipped while paused."
            )
        lead = (
            f"the leader is {leader.holder} (epoch {leader.epoch}), which may be behind"
            if leader
            else f"no scheduler holds the leader lease{_leaderless_since(terms, now, job)}: "
            "start `tickwork scheduler` or `tickwork run`"
        )
        grace = job.misfire_grace.total_seconds()
        late = (
            f"it is already later than the misfire grace ({grace:g} s), so when a scheduler "
            f"reaches it the '{job.misfire}' misfire policy decides whether it runs"
            if now - slot > job.misfire_grace
            else f"it runs on time if a scheduler reaches it within the misfire grace "
            f"({grace:g} s); after that the '{job.misfire}' misfire policy decides"
        )
        return (
            f"{head} is due at {when} but has not been triggered yet; {lead}. {late[0].upper()}"
            f"{late[1:]}."
        )
    kept = f" (finished runs are kept for {_dur(retention)})" if retention else ""
    return (
        f"{head} has no record of the slot {when}: its run was pruned after it "
        f"finished{kept}, or the slot fell before the job's schedule last changed."
    )


def terms_until(
    job: Job,
    slot: datetime,
    runs: list[Run],
    skips: list[SlotSkip],
    *,
    leader: Lease | None,
    now: datetime,
) -> datetime | None:
    """Up to when explain needs the leadership terms from ``slot`` on, or None when it
    needs none: the slot was acted on late (its run triggered, or it skipped, over
    LATE_AFTER after it), or it is due with no leader. A slot on time costs no read."""
    acted = runs[0].created_at if runs else skips[0].recorded_at if skips else None
    if acted is not None:
        return acted if acted - slot > LATE_AFTER else None
    due = job.next_run_at is not None and job.next_run_at <= slot <= now
    return now if leader is None and due else None


def leader_gaps(
    terms: Sequence[LeaderTerm], since: datetime, until: datetime
) -> list[tuple[LeaderTerm, LeaderTerm]]:
    """The gaps with no leader between ``since`` and ``until``: each a term that ended and
    the next one, which started later. ``terms`` by epoch (``Store.leader_terms``)."""
    return [
        (a, b)
        for a, b in pairwise(terms)
        if a.ended_at is not None and a.ended_at < b.started_at
        and a.ended_at < until and b.started_at > since
    ]  # fmt: skip


def _failover(
    what: str, terms: Sequence[LeaderTerm], slot: datetime, at: datetime | None, job: Job
) -> str:
    """ " It ran late: no leader from ... to ...; epoch 2 → 3 (a, then b)." when the slot,
    acted on at ``at``, waited through a gap with no leader; else ""."""
    if at is None or at - slot <= LATE_AFTER:
        return ""
    gaps = [
        f"no leader from {_span(a.ended_at, b.started_at, job)}; epoch {a.epoch} → {b.epoch} "
        f"({a.holder}, then {b.holder})"
        for a, b in leader_gaps(terms, slot, at)
        if a.ended_at is not None
    ]
    return f" It {what}: {'; then '.join(gaps)}." if gaps else ""


def _leaderless_since(terms: Sequence[LeaderTerm], now: datetime, job: Job) -> str:
    """ " (none since ..., when a's lease at epoch 2 ran out)" when the latest term ended."""
    last = terms[-1] if terms else None
    if last is None or last.ended_at is None or last.ended_at > now:
        return ""
    return (
        f" (none since {_fmt(last.ended_at, job)}, when {last.holder}'s lease at epoch "
        f"{last.epoch} ran out)"
    )


def _describe_run(
    run: Run,
    now: datetime,
    tenant: TenantStatus | None,
    task: TaskStatus | None,
    unserved: str | None,
) -> str:
    text = f"run {run.id} is {run.state} (attempt {run.attempt} of {run.max_attempts})"
    waits = run.state in (RunState.QUEUED, RunState.FAILED) and run.run_at <= now
    if waits and unserved is not None:
        # First: while no live worker would claim it, that is what holds it (a limit too,
        # said after it, holds it once one does).
        text += f"; waiting: {unserved} (it stays queued, spending no attempt, until one does)"
    if waits and tenant is not None and tenant.at_limit:
        text += (
            f"; waiting: tenant {tenant.tenant} is at max_running "
            f"{tenant.limits.max_running} ({tenant.running} running)"
        )
    elif waits and tenant is not None and tenant.rate_held and tenant.limits.rate is not None:
        text += f"; waiting: tenant {tenant.tenant}'s rate {format_rate(tenant.limits.rate)}"
    elif waits and task is not None and task.rate_held and task.limits.rate is not None:
        text += f"; waiting: task {task.task}'s rate {format_rate(task.limits.rate)}"
    if run.started_at:
        lag = (run.started_at - run.scheduled_for).total_seconds() * 1000
        text += f", last started at {_iso(run.started_at)}"
        if run.attempt == 1:
            text += f" ({lag:.0f} ms after its slot)"
    if run.finished_at:
        text += f", finished at {_iso(run.finished_at)}"
    if run.state in (RunState.FAILED, RunState.DEAD, RunState.CANCELLED) and run.error:
        text += f"; error: {run.error}"
    if run.state is RunState.FAILED:
        text += f"; the next attempt is due at {_iso(run.run_at)}"
    return text + "."


def _describe_skip(skip: SlotSkip, job: Job) -> str:
    recorded = f" (recorded at {_fmt(skip.recorded_at, job)})" if skip.recorded_at else ""
    if skip.count == 1 and not skip.more:
        alike = ""  # the slot alone: its time is already in the sentence
    else:
        alike = (
            f"; {skip.count}{'+' if skip.more else ''} slots from "
            f"{_fmt(skip.first_slot, job)} to {_fmt(skip.last_slot, job)} share this fate"
        )
    grace = job.misfire_grace.total_seconds()
    match skip.fate:
        case SlotFate.MISFIRE:
            why = (
                f"it was missed by more than the misfire grace of {grace:g} s (the "
                f"scheduler was down or behind), and the misfire policy is "
                f"'{job.misfire}', so it was skipped"
            )
        case SlotFate.COALESCED:
            into = f"run {skip.run_id}" if skip.run_id else "one later run"
            why = (
                f"it was missed by more than the misfire grace of {grace:g} s, and misfire "
                f"policy 'once' folded the missed slots into {into}"
            )
        case SlotFate.OVERLAP:
            why = (
                "the previous run was still unfinished and the overlap policy is "
                "'forbid', so the slot was skipped"
            )
        case SlotFate.REPLACED:
            why = (
                "a later slot was due in the same trigger and the overlap policy is "
                "'replace', so only the latest ran"
            )
        case SlotFate.PAUSED:
            why = "the job was paused when the slot fell, so it was skipped"
        case SlotFate.CANCELLED:
            why = "the job was cancelled"
        case _:  # pragma: no cover - every fate is handled
            why = str(skip.fate)
    return f"{why}{alike}{recorded}."


def _fmt(t: datetime, job: Job) -> str:
    """A time in the job's zone (a cron's; UTC otherwise), to the second: a one-off slot's
    microseconds say nothing to a reader (``--json`` keeps them)."""
    if isinstance(job.schedule, Cron) and job.schedule.tz != "UTC":
        local = t.astimezone(cron.zone(job.schedule.tz)).isoformat(timespec="seconds")
        return f"{local} ({job.schedule.tz})"
    return _iso(t)


def _span(start: datetime, end: datetime, job: Job) -> str:
    """ "start to end" as :func:`_fmt` writes them, the end by its time alone (and the zone
    once) when both fall on one day there."""
    zone = job.schedule.tz if isinstance(job.schedule, Cron) else "UTC"
    a, b = (t.astimezone(cron.zone(zone)) for t in (start, end))
    if a.date() != b.date():
        return f"{_fmt(start, job)} to {_fmt(end, job)}"
    tail = f" ({zone})" if zone != "UTC" else ""
    return f"{a.isoformat(timespec='seconds')} to {b.time().isoformat(timespec='seconds')}{tail}"


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="seconds")


def _dur(td: timedelta) -> str:
    days = td.total_seconds() / 86_400
    return f"{days:g} days" if days >= 1 else f"{td.total_seconds():g} s"
