"""A child process for the conformance suite's concurrency and clock cases.

Run as ``python child.py '<json command>'``. The child opens its own store on
``command["url"]``, prints ``READY``, waits for one line on stdin (the parent's start
signal, so that children race for real), runs the operation and prints
``RESULT <json>`` as its last line. Times travel as ISO-8601 strings.

Not a test module and not imported by one: a fresh interpreter per child, never a fork of
a process holding database connections.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from tickwork.errors import FencingError, TickworkError
from tickwork.job import JobSpec
from tickwork.schedule import Cron, Once
from tickwork.store import Store, open_store

Op = Callable[[Store, dict[str, Any]], dict[str, Any]]


def _now(cmd: dict[str, Any]) -> datetime | None:
    raw = cmd.get("now")
    return datetime.fromisoformat(raw) if raw else None


def claim_all(store: Store, cmd: dict[str, Any]) -> dict[str, Any]:
    """Claim in batches until a claim returns nothing; report every run id received."""
    ids: list[int] = []
    batches = 0
    while True:
        runs = store.claim(
            cmd["worker"],
            limit=cmd["limit"],
            lease=timedelta(seconds=cmd.get("lease", 600)),
            tasks=cmd.get("tasks"),
            now=_now(cmd),
        )
        if not runs:
            break
        batches += 1
        ids.extend(run.id for run in runs)
        time.sleep(cmd.get("pause", 0))
    return {"ids": ids, "batches": batches}


def trigger_all(store: Store, cmd: dict[str, Any]) -> dict[str, Any]:
    """Trigger with one epoch until a call creates nothing; report the runs created."""
    runs: list[list[Any]] = []
    error = None
    for _ in range(cmd.get("rounds", 1000)):
        try:
            result = store.trigger(cmd["epoch"], limit=cmd.get("limit", 1000), now=_now(cmd))
        except FencingError as exc:
            error = type(exc).__name__
            break
        runs.extend([run.id, run.job_id, run.scheduled_for.isoformat()] for run in result.runs)
        if not result.runs and not result.batch_full:
            break
    return {"runs": runs, "error": error}


def rescue_all(store: Store, cmd: dict[str, Any]) -> dict[str, Any]:
    """Rescue in batches until a call rescues nothing; report the run ids rescued."""
    requeued: list[int] = []
    dead: list[int] = []
    while True:
        result = store.rescue(limit=cmd["limit"], now=_now(cmd))
        if not result.requeued and not result.dead:
            break
        requeued.extend(result.requeued)
        dead.extend(result.dead)
    return {"requeued": requeued, "dead": dead}


def acquire(store: Store, cmd: dict[str, Any]) -> dict[str, Any]:
    lease = store.acquire_leadership(cmd["node"], timedelta(seconds=cmd["ttl"]), now=_now(cmd))
    return {"epoch": lease.epoch if lease is not None else None}


def submit_idempotent(store: Store, cmd: dict[str, Any]) -> dict[str, Any]:
    spec = JobSpec(
        task="idem.task",
        schedule=Once(delay=timedelta(hours=1)),
        tenant=cmd["tenant"],
        idempotency_key=cmd["key"],
        args={"from": cmd["node"]},
    )
    submitted = store.submit(spec, now=_now(cmd))
    return {"job_id": submitted.job.id, "created": submitted.created}


def put_schedule(store: Store, cmd: dict[str, Any]) -> dict[str, Any]:
    """Sync a schedule declared in code, as every node does when it starts."""
    spec = JobSpec(
        task="sync.task",
        schedule=Cron(cmd["cron"]),
        name=cmd["name"],
        tenant=cmd.get("tenant", "default"),
    )
    try:
        put = store.put_schedule(spec, now=_now(cmd))
    except TickworkError as exc:
        return {"job_id": None, "created": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"job_id": put.job.id, "created": put.created, "error": None}


def migrate(store: Store, cmd: dict[str, Any]) -> dict[str, Any]:
    return {"applied": store.migrate(), "version": list(store.schema_version())}


def skewed(store: Store, cmd: dict[str, Any]) -> dict[str, Any]:
    """A node whose local clock is ahead acts through the store with ``now=None``."""
    local_skew = time.time() - cmd["parent_time"]
    claimed = store.claim("skewed-worker", limit=100)
    rescued = store.rescue()
    leader = store.acquire_leadership("skewed-node", timedelta(seconds=30))
    triggered: list[int] = []
    trigger_error = None
    if leader is not None:
        try:
            triggered = [run.id for run in store.trigger(leader.epoch).runs]
        except FencingError as exc:
            trigger_error = type(exc).__name__
    submitted = store.submit(
        JobSpec(task="skewed.task", schedule=Once(delay=timedelta(seconds=cmd["delay"])))
    )
    return {
        "local_skew": local_skew,
        "local_now": datetime.fromtimestamp(time.time()).astimezone().isoformat(),
        "claimed": [run.id for run in claimed],
        "rescued": rescued.requeued + rescued.dead,
        "leader_epoch": leader.epoch if leader is not None else None,
        "triggered": triggered,
        "trigger_error": trigger_error,
        "submitted_next_run_at": submitted.job.next_run_at.isoformat()
        if submitted.job.next_run_at
        else None,
        "submitted_job_id": submitted.job.id,
    }


def fold(store: Store, cmd: dict[str, Any]) -> dict[str, Any]:
    """A leader's fold (a deposed one's racing the new one's)."""
    return {"folded": store.fold_minutes(now=_now(cmd))}


def prune(store: Store, cmd: dict[str, Any]) -> dict[str, Any]:
    """Prune every finished run (retention 0) in batches until none is left."""
    deleted = 0
    while n := store.prune(timedelta(0), limit=cmd.get("limit", 50), now=_now(cmd)):
        deleted += n
    return {"deleted": deleted}


OPS: dict[str, Op] = {
    "fold": fold,
    "prune": prune,
    "claim_all": claim_all,
    "trigger_all": trigger_all,
    "rescue_all": rescue_all,
    "acquire": acquire,
    "submit_idempotent": submit_idempotent,
    "put_schedule": put_schedule,
    "migrate": migrate,
    "skewed": skewed,
}


def main() -> None:
    cmd = json.loads(sys.argv[1])
    store = open_store(cmd["url"], migrate=cmd.get("migrate"))
    try:
        print("READY", flush=True)
        sys.stdin.readline()
        result = OPS[cmd["op"]](store, cmd)
    finally:
        store.close()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
