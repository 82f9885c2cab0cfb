"""Runs: listings across jobs and the dead-letter list, a run with its attempts, and the
commands on one run or (bulk) on every run a filter matches."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field, Strict

from tickwork.job import RunState
from tickwork.records import (
    ATTEMPT_ERROR_LIMIT,
    ATTEMPT_TRACEBACK_LIMIT,
    ATTEMPTS_KEPT,
    DEFAULT_BULK,
    DEFAULT_PAGE,
    MAX_BULK,
    AttemptEnd,
    to_json,
)
from tickwork.web.api.auth import ClientDep, PrincipalDep, resource_router, tenant_scope
from tickwork.web.api.errors import COMMAND_ERRORS, COMMON_ERRORS, ID_ERRORS, error_doc
from tickwork.web.api.fields import After, Label, Limit, NameQuery, TenantQuery, Text, page_json
from tickwork.web.auth import Principal
from tickwork.web.params import MAX_ID, TimeText

RunId = Annotated[int, Path(ge=1, le=MAX_ID, description="A run id.")]
TimeQuery = Annotated[
    TimeText | None,
    Query(description="ISO-8601 with an offset; bounds the slot (since <= slot < until)."),
]

router = resource_router()


class RunOut(BaseModel):
    """A run: one slot of a job, with its current attempt."""

    id: int
    job_id: int
    tenant: str
    task: str
    args: dict[str, Any]
    queue: str
    priority: int
    scheduled_for: str
    run_at: str
    state: RunState
    attempt: int
    max_attempts: int
    fencing_token: int
    worker: str | None
    lease_expires_at: str | None
    started_at: str | None
    finished_at: str | None
    error: str | None
    result: dict[str, Any] | None
    timeout: float | None
    created_at: str


class AttemptOut(BaseModel):
    """One attempt of a run: who ran it, when, under which fencing token, and how it
    ended."""

    attempt: int = Field(
        description="The run's attempt number then (a release spends none; an operator's "
        "retry starts again at 1)."
    )
    fencing_token: int = Field(description="The token its claim issued.")
    worker: str | None
    started_at: str | None
    ended_at: str | None = Field(description="null while it runs.")
    ended: AttemptEnd | None = Field(description="Why it ended; null while it runs.")
    error: str | None = Field(description="The exception line, or why it ended.")
    traceback: str | None = Field(description="The handler's traceback, when it raised.")


class RunDetailOut(RunOut):
    """A run with its attempts."""

    attempts: list[AttemptOut] = Field(
        description=f"Oldest first: the last {ATTEMPTS_KEPT} that ended other than by "
        "success, then the one that runs now or succeeded. Errors and tracebacks are cut "
        f"to {ATTEMPT_ERROR_LIMIT} and {ATTEMPT_TRACEBACK_LIMIT} bytes."
    )
    attempts_dropped: int = Field(description="Older attempts no longer kept.")


class RunPage(BaseModel):
    items: list[RunOut]
    next_cursor: int | None = Field(description="Pass as `after` for the next page.")


@router.get("/runs", response_model=RunPage, summary="List runs, newest first")
def list_runs(
    *,
    principal: PrincipalDep,
    client: ClientDep,
    job: Annotated[int | None, Query(ge=1, le=MAX_ID, description="Runs of this job.")] = None,
    state: RunState | None = None,
    task: NameQuery = None,
    queue: NameQuery = None,
    tenant: TenantQuery = None,
    since: TimeQuery = None,
    until: TimeQuery = None,
    after: After = None,
    limit: Limit = DEFAULT_PAGE,
) -> dict[str, Any]:
    page = client.list_runs(
        job_id=job,
        state=state,
        task=task,
        queue=queue,
        tenant=tenant_scope(principal, tenant),
        since=since,
        until=until,
        after=after,
        limit=limit,
    )
    return page_json(page)


class BulkIn(BaseModel):
    """Which runs a bulk command takes: every filter given must match. Unknown fields are
    refused (422)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"task": "send_report", "max_count": 100}]}
    )

    job: Annotated[int | None, Strict(), Field(ge=1, le=MAX_ID)] = None
    task: Label = None
    queue: Label = None
    tenant: Label = Field(default=None, description="Admin keys only.")
    since: Text = Field(default=None, description="ISO-8601: slots at or after it.")
    until: Text = Field(default=None, description="ISO-8601: slots before it.")
    max_count: Annotated[int, Strict(), Field(ge=1, le=MAX_BULK)] = Field(
        default=DEFAULT_BULK,
        description="When more runs than this match, nothing changes and the answer is 400.",
    )


class BulkOut(BaseModel):
    count: int
    run_ids: list[int] = Field(description="The runs changed, ascending.")


BULK_ERRORS: dict[int | str, dict[str, Any]] = {
    **COMMON_ERRORS,
    400: error_doc("More runs match than max_count, or a bad filter: nothing changed."),
}


@router.post(
    "/runs/bulk/retry",
    response_model=BulkOut,
    summary="Retry every dead run matching a filter: all, or none when more than max_count",
    responses=BULK_ERRORS,
)
def bulk_retry(body: BulkIn, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    ids = client.retry_runs(**_bulk_filter(principal, body))
    return {"count": len(ids), "run_ids": ids}


@router.post(
    "/runs/bulk/cancel",
    response_model=BulkOut,
    summary="Cancel every queued run (or failed, awaiting retry) matching a filter: all, or "
    "none when more than max_count",
    responses=BULK_ERRORS,
)
def bulk_cancel(body: BulkIn, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    ids = client.cancel_runs(**_bulk_filter(principal, body))
    return {"count": len(ids), "run_ids": ids}


def _bulk_filter(principal: Principal, body: BulkIn) -> dict[str, Any]:
    return {
        "job_id": body.job,
        "task": body.task,
        "queue": body.queue,
        "tenant": tenant_scope(principal, body.tenant),
        "since": body.since,
        "until": body.until,
        "max_count": body.max_count,
    }


@router.get(
    "/runs/{run_id}",
    response_model=RunDetailOut,
    summary="A run, with its attempts",
    responses=ID_ERRORS,
)
def get_run(run_id: RunId, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    history = client.run_attempts(run_id, tenant=principal.tenant)
    return {
        **to_json(history.run),
        "attempts": [to_json(a) for a in history.attempts],
        "attempts_dropped": history.dropped,
    }


@router.post(
    "/runs/{run_id}/retry",
    response_model=RunOut,
    summary="Queue a dead or failed run again, with a fresh allowance of attempts",
    responses=COMMAND_ERRORS,
)
def retry_run(run_id: RunId, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    return to_json(client.retry_run(run_id, tenant=principal.tenant))


@router.post(
    "/runs/{run_id}/cancel",
    response_model=RunOut,
    summary="Cancel a queued, failed or running run",
    responses=COMMAND_ERRORS,
)
def cancel_run(run_id: RunId, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    return to_json(client.cancel_run(run_id, tenant=principal.tenant))


@router.get("/dead", response_model=RunPage, summary="The dead-letter list, newest first")
def dead_runs(
    principal: PrincipalDep, client: ClientDep, after: After = None, limit: Limit = DEFAULT_PAGE
) -> dict[str, Any]:
    return page_json(client.dead_runs(tenant=principal.tenant, after=after, limit=limit))
