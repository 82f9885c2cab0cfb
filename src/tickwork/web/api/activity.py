"""What the runs are doing: counts by state with the due backlog and trigger lag, each
queue's backlog and consumers, and the per-minute rollup (the dashboard's activity
pages)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import Query
from pydantic import BaseModel, Field

from tickwork.records import ROLLUP_KEEP, to_json
from tickwork.stats import bucket_percentile
from tickwork.web.api.auth import ClientDep, PrincipalDep, resource_router
from tickwork.web.api.fields import NameQuery

router = resource_router()


class StatsOut(BaseModel):
    by_state: dict[str, int]
    due_backlog: int
    oldest_due_at: str | None
    recent_lag_ms: list[float]
    now: str


@router.get(
    "/stats",
    response_model=StatsOut,
    summary="Runs by state, the due backlog and recent trigger lag (the caller's tenant)",
)
def run_stats(principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    return to_json(client.run_stats(tenant=principal.tenant))


class UnservedOut(BaseModel):
    task: str
    due: int = Field(description="Due runs of the task in the queue that no live worker claims.")
    oldest_due_at: str | None
    reason: str = Field(
        description='Why, e.g. "no live worker has task send_mail": they wait, queued, '
        "spending no attempt, until a worker with the task starts."
    )


class QueueOut(BaseModel):
    queue: str
    due: int = Field(description="Runs queued (or awaiting retry) whose time has come.")
    running: int
    oldest_due_at: str | None
    consumers: int = Field(description="Live workers that claim from the queue.")
    workers: list[str] = Field(
        description="Their node ids (admin keys only: a tenant key gets an empty list)."
    )
    unserved: list[UnservedOut] = Field(
        description="Of the due runs, by task, those no live worker of the queue has the task of."
    )


@router.get(
    "/queues",
    response_model=list[QueueOut],
    summary="Queues with runs waiting or running or a worker: backlog, running, consumers",
)
def queues(principal: PrincipalDep, client: ClientDep) -> list[dict[str, Any]]:
    return [
        {
            **to_json(queue),
            "consumers": len(queue.workers),
            # Node ids are the cluster view's, which is for admins.
            "workers": queue.workers if principal.admin else [],
        }
        for queue in client.queues(tenant=principal.tenant)
    ]


class MinuteOut(BaseModel):
    minute: str
    succeeded: int
    failed: int = Field(description="Attempts that failed and will be retried.")
    dead: int
    lag_p50_ms: float | None = Field(description="Start lag of scheduled first attempts.")
    lag_p99_ms: float | None
    depth: int = Field(description="Due runs waiting, sampled in the minute.")


class MinutesOut(BaseModel):
    now: str
    items: list[MinuteOut] = Field(description="Minutes with anything in them, oldest first.")


@router.get(
    "/minutes",
    response_model=MinutesOut,
    summary="The per-minute rollup: runs finished by outcome, start lag, queue depth",
)
def minutes(
    principal: PrincipalDep,
    client: ClientDep,
    window: Annotated[
        int, Query(ge=60, le=int(ROLLUP_KEEP.total_seconds()), description="Seconds back.")
    ] = 3600,
    queue: NameQuery = None,
) -> dict[str, Any]:
    now, found = client.run_minutes(timedelta(seconds=window), tenant=principal.tenant, queue=queue)
    return {
        "now": now.isoformat(),
        "items": [
            {
                "minute": m.minute.isoformat(),
                "succeeded": m.succeeded,
                "failed": m.failed,
                "dead": m.dead,
                "lag_p50_ms": bucket_percentile(m.lag, 50),
                "lag_p99_ms": bucket_percentile(m.lag, 99),
                "depth": m.depth,
            }
            for m in found
        ],
    }
