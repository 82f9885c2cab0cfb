"""Rows to records and specs to parameters, once for every dialect (through its Codec)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tickwork import schedule as schedules
from tickwork.job import Job, JobSpec, JobState, MisfirePolicy, OverlapPolicy, Run, RunState
from tickwork.retry import RetryPolicy
from tickwork.store.base import ApiKey, Lease, Node, Session, SlotFate, SlotSkip
from tickwork.store.driver import Codec, Row


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
    }


def job(r: Row, c: Codec) -> Job:
    return Job(
        id=r["id"],
        tenant=r["tenant"],
        name=r["name"],
        task=r["task"],
        args=c.from_json(r["args"]),
        schedule=c.from_schedule(r["schedule"]),
        state=JobState(r["state"]),
        next_run_at=c.from_time(r["next_run_at"]),
        queue=r["queue"],
        priority=r["priority"],
        retry=RetryPolicy(r["max_attempts"], r["backoff_base"], r["backoff_cap"]),
        timeout=seconds(r["timeout"]),
        misfire=MisfirePolicy(r["misfire"]),
        misfire_grace=seconds(r["misfire_grace"]),
        overlap=OverlapPolicy(r["overlap"]),
        idempotency_key=r["idempotency_key"],
        created_at=c.from_time(r["created_at"]),
        updated_at=c.from_time(r["updated_at"]),
    )


def run(r: Row, c: Codec) -> Run:
    from_time = c.from_time
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
        state=RunState(r["state"]),
        attempt=r["attempt"],
        max_attempts=r["max_attempts"],
        fencing_token=r["fencing_token"],
        worker=r["worker"],
        lease_expires_at=from_time(r["lease_expires_at"]),
        started_at=from_time(r["started_at"]),
        finished_at=from_time(r["finished_at"]),
        error=r["error"],
        result=c.from_json(r["result"]),
        timeout=seconds(r["timeout"]),
        created_at=from_time(r["created_at"]),
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


def node(r: Row, c: Codec) -> Node:
    return Node(
        r["id"],
        r["kind"],
        r["host"],
        r["pid"],
        c.from_time(r["started_at"]),
        c.from_time(r["last_seen_at"]),
        r["running"],
        c.from_json(r["info"]),
    )


def seconds(value: float | None) -> Any:
    """A duration stored as seconds (timeout, grace); None stays None."""
    return timedelta(seconds=value) if value is not None else None
