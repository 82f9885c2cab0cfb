"""Rows to records and specs to parameters, once for every dialect (through its Codec)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tickwork import schedule as schedules
from tickwork.job import (
    Job,
    JobSpec,
    JobState,
    MisfirePolicy,
    OverlapPolicy,
    Run,
    RunState,
    ScheduleState,
)
from tickwork.retry import RetryPolicy
from tickwork.store.base import (
    ApiKey,
    AttemptEnd,
    AttemptRecord,
    LeaderTerm,
    Lease,
    NodeRecord,
    Session,
    SlotFate,
    SlotSkip,
)
from tickwork.store.driver import Codec, Row

_SCHEDULE_STATE = {s.value: s for s in ScheduleState}
_RUN_STATE = {s.value: s for s in RunState}
_MISFIRE = {p.value: p for p in MisfirePolicy}
_OVERLAP = {p.value: p for p in OverlapPolicy}
"""Enums by stored text: a dict lookup costs a fraction of the enum call (the call stays as
the fallback, for its ValueError on a value no tickwork writes)."""


def job_params(spec: JobSpec, resolved: schedules.Schedule, c: Codec) -> dict[str, Any]:
    """The columns a job row takes from its spec (``resolved``: its schedule, resolved)."""
    return {
        "tenant": spec.tenant,
        "name": spec.name,
        "task": spec.task,
        "args": c.args(spec),
        "schedule": c.schedule(resolved),
        "queue": spec.queue,
        "priority": spec.priority,
        "max_attempts": spec.retry.max_attempts,
        "backoff_base": spec.retry.backoff_base,
        "backoff_cap": spec.retry.backoff_cap,
        "timeout": spec.timeout.total_seconds() if spec.timeout else None,
        "misfire": spec.misfire.value,
        "misfire_grace": spec.misfire_grace.total_seconds(),
        "overlap": spec.overlap.value,
        "idempotency_key": spec.idempotency_key,
        "trace_context": spec.trace_context,
    }


def job(r: Row, c: Codec, latest_run: str | None = None) -> Job:
    """A job row as its record. Its state is derived (:meth:`JobState.of`) from the stored
    schedule state and, for a completed one-off job, ``latest_run``: the state of its latest
    run, which the job reads (``run_state`` of the read queries: :func:`read_job`). A row
    written just now needs none (a new or changed job has no finished run to read as)."""
    from_time = c.from_time
    timeout = r["timeout"]
    schedule = c.from_schedule(r["schedule"])
    stored = _SCHEDULE_STATE.get(r["state"]) or ScheduleState(r["state"])
    return Job(
        id=r["id"],
        tenant=r["tenant"],
        name=r["name"],
        task=r["task"],
        args=c.from_json(r["args"]),
        schedule=schedule,
        state=JobState.of(stored, isinstance(schedule, schedules.Once), latest_run),
        next_run_at=from_time(r["next_run_at"]),
        queue=r["queue"],
        priority=r["priority"],
        retry=RetryPolicy(r["max_attempts"], r["backoff_base"], r["backoff_cap"]),
        timeout=timedelta(seconds=timeout) if timeout is not None else None,
        misfire=_MISFIRE.get(r["misfire"]) or MisfirePolicy(r["misfire"]),
        misfire_grace=timedelta(seconds=r["misfire_grace"]),
        overlap=_OVERLAP.get(r["overlap"]) or OverlapPolicy(r["overlap"]),
        idempotency_key=r["idempotency_key"],
        created_at=from_time(r["created_at"]),
        updated_at=from_time(r["updated_at"]),
        trace_context=r["trace_context"],
    )


def read_job(r: Row, c: Codec) -> Job:
    """A row of a job read (``get_job``, ``list_jobs`` ...): one with the ``run_state``
    column, the state of the job's latest run when its schedule is completed."""
    return job(r, c, r["run_state"])


def schedule_state(r: Row) -> ScheduleState:
    """The stored state of a job row: what pause, resume, cancel and trigger act on."""
    return _SCHEDULE_STATE.get(r["state"]) or ScheduleState(r["state"])


def run(r: Row, c: Codec) -> Run:
    from_time = c.from_time
    timeout = r["timeout"]
    return Run(
        id=r["id"],
        job_id=r["job_id"],
        tenant=r["tenant"],
        task=r["task"],
        args=c.from_json(r["args"]),
        queue=r["queue"],
        priority=r["priority"],
        scheduled_for=from_time(r["scheduled_for"]),
        run_at=from_time(r["run_at"]),
        state=_RUN_STATE.get(r["state"]) or RunState(r["state"]),
        attempt=r["attempt"],
        max_attempts=r["max_attempts"],
        fencing_token=r["fencing_token"],
        worker=r["worker"],
        lease_expires_at=from_time(r["lease_expires_at"]),
        started_at=from_time(r["started_at"]),
        finished_at=from_time(r["finished_at"]),
        error=r["error"],
        result=c.from_json(r["result"]),
        timeout=timedelta(seconds=timeout) if timeout is not None else None,
        created_at=from_time(r["created_at"]),
    )


def attempt(r: Row, c: Codec) -> AttemptRecord:
    """A row of a run's history (``tickwork_attempts``)."""
    return AttemptRecord(
        r["attempt"],
        r["fencing_token"],
        r["worker"],
        c.from_time(r["started_at"]),
        c.from_time(r["ended_at"]),
        AttemptEnd(r["ended"]),
        r["error"],
        r["traceback"],
    )


def skip(r: Row, c: Codec) -> SlotSkip:
    return SlotSkip(
        r["job_id"],
        c.from_time(r["first_slot"]),
        c.from_time(r["last_slot"]),
        r["count"],
        SlotFate(r["fate"]),
        r["run_id"],
        bool(r["more"]),
        c.from_time(r["recorded_at"]),
    )


def session(r: Row, c: Codec) -> Session:
    return Session(
        r["id"],
        r["key_id"],
        c.from_time(r["created_at"]),
        c.from_time(r["last_seen_at"]),
        c.from_duration(r["idle_timeout"]),
        c.from_time(r["expires_at"]),
        c.from_time(r["revoked_at"]),
    )


def api_key(r: Row, c: Codec) -> ApiKey:
    return ApiKey(
        r["id"],
        r["prefix"],
        r["tenant"],
        bool(r["admin"]),
        r["label"],
        c.from_time(r["created_at"]),
        c.from_time(r["revoked_at"]),
    )


def session_key(r: Row, c: Codec) -> ApiKey:
    """The key of a ``session_by_hash`` row (its columns carry a ``key_`` prefix)."""
    return ApiKey(
        r["key_id"],
        r["prefix"],
        r["tenant"],
        bool(r["admin"]),
        r["label"],
        c.from_time(r["key_created_at"]),
        c.from_time(r["key_revoked_at"]),
    )


def lease(r: Row, c: Codec) -> Lease:
    return Lease(r["holder"], r["epoch"], c.from_time(r["expires_at"]))


def leader_term(r: Row, c: Codec) -> LeaderTerm:
    ended = r["ended_at"]
    return LeaderTerm(
        r["epoch"],
        r["holder"],
        c.from_time(r["started_at"]),
        c.from_time(ended) if ended is not None else None,
    )


def node(r: Row, c: Codec) -> NodeRecord:
    return NodeRecord(
        r["id"],
        r["kind"],
        r["host"],
        r["pid"],
        c.from_time(r["started_at"]),
        c.from_time(r["last_seen_at"]),
        r["running"],
        c.from_json(r["info"]),
    )
