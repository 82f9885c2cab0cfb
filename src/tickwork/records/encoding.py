"""Any record as a JSON-ready dict (:func:`to_json`): what the CLI prints and the HTTP API
answers."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from tickwork.job import Job, Run, shown_json, shown_object
from tickwork.records.calendars import CalendarRecord
from tickwork.records.cluster import ApiKey, Cluster, Lease, NodeRecord
from tickwork.records.limits import TenantLimits, TenantStatus
from tickwork.records.metrics import QueueStatus, RunStats, Unserved
from tickwork.records.runs import AttemptRecord, InjectedRun, RunAttempts, SlotSkip
from tickwork.schedule import shown_json as shown_schedule

JsonValue = (
    Job
    | Run
    | NodeRecord
    | ApiKey
    | SlotSkip
    | Lease
    | RunStats
    | Cluster
    | TenantLimits
    | TenantStatus
    | CalendarRecord
    | InjectedRun
    | QueueStatus
    | AttemptRecord
    | RunAttempts
    | Unserved
)


def to_json(value: JsonValue) -> dict[str, Any]:
    """A record as a JSON-ready dict: times in ISO-8601 UTC, durations in seconds.

    Jobs, runs, nodes, API keys (their prefix, never a secret or hash: the record holds
    neither), ledger entries, leases, run stats and the cluster view.

    It cannot fail on what a row holds, and its output is what every JSON encoder can write:
    the JSON a record carries (args, a result, a node's info) is passed through
    :func:`~tickwork.job.shown_json`, so a row stored before the limits on args, or a
    handler's odd result, is shown cut short rather than breaking a listing (args and a
    result that are not objects are wrapped, ``{"value": ...}``).
    """
    if isinstance(value, Job):
        raw = _fields(value)
        raw["schedule"] = shown_schedule(value.schedule)
        raw["args"] = shown_object(value.args)
    elif isinstance(value, Run):
        raw = _fields(value)
        raw["args"] = shown_object(value.args)
        raw["result"] = shown_object(value.result) if value.result is not None else None
    elif isinstance(value, Cluster):
        raw = {
            "leader": to_json(value.leader) if value.leader else None,
            "nodes": [{**to_json(node), "silent": node.silent(value.now)} for node in value.nodes],
            "now": value.now,
        }
    elif isinstance(value, CalendarRecord):
        raw = {
            **value.calendar.to_json(),
            "created_at": value.created_at,
            "updated_at": value.updated_at,
        }
    elif isinstance(value, RunAttempts):
        return {
            "run_id": value.run_id,
            "attempts": [to_json(a) for a in value.attempts],
            "dropped": value.dropped,
        }
    elif isinstance(value, InjectedRun):  # the run, with its marks
        return {**to_json(value.run), "injected": [_jsonable(f) for f in value.faults]}
    elif isinstance(value, TenantStatus):
        raw = {
            **_fields(value.limits),
            "running": value.running,
            "due": value.due,
            "held": value.held,
            "at_limit": value.at_limit,
        }
    elif isinstance(value, QueueStatus):
        raw = {**_fields(value), "unserved": [to_json(u) for u in value.unserved]}
    elif is_dataclass(value):
        raw = _fields(value)
    else:
        raise TypeError(f"cannot encode {type(value).__name__}")
    return {k: _jsonable(v) for k, v in raw.items()}


def _fields(record: Any) -> dict[str, Any]:
    """A record's fields, one level deep (``dataclasses.asdict`` would copy every nested
    value by recursion, and overflow on args nested a few hundred deep)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.value
    if is_dataclass(value) and not isinstance(value, type):  # a policy inside a record
        return {k: _jsonable(v) for k, v in _fields(value).items()}
    if isinstance(value, dict | list | tuple | str | float):
        return shown_json(value)
    return value
