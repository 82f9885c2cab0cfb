"""The HTTP JSON API under ``/api/v1``: a thin adapter over :class:`~tickwork.client.Client`.

Every endpoint authenticates the caller (:mod:`tickwork.web.auth`), passes its tenant to
every client call (``None`` for an admin), and shapes records with
:func:`tickwork.records.to_json` (times ISO-8601 UTC, durations in seconds), as the CLI's
``--json`` does. Errors are the envelope of :mod:`tickwork.web.errors`; a 4xx writes
nothing. The OpenAPI document is at ``/api/v1/openapi.json``, its browsable form at
``/api/v1/docs``.

Listings page by cursor: ``?limit=N`` (1 to 1000, default 100) returns the newest first and
a ``next_cursor``; pass it as ``?after=`` for the next page (``null``: that was the last).

Examples (with a key from ``tickwork keys create --tenant acme``)::

    curl -H "Authorization: Bearer $KEY" -H 'content-type: application/json' \\
         -d '{"task": "http", "args": {"url": "https://example.com"}, "schedule": {"delay": 10}}' \\
         http://127.0.0.1:8765/api/v1/jobs
    curl -H "Authorization: Bearer $KEY" 'http://127.0.0.1:8765/api/v1/runs?state=dead&limit=20'
    curl -H "Authorization: Bearer $KEY" -X POST http://127.0.0.1:8765/api/v1/runs/42/retry
    curl -H "Authorization: Bearer $ADMIN" -H 'content-type: application/json' -X PUT \
         -d '{"max_running": 5, "rate": "20/s"}' http://127.0.0.1:8765/api/v1/tenants/acme

Tenants' limits: ``PUT`` replaces them all, ``PATCH`` changes those named (docs/tenants.md).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, WithJsonSchema
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticCustomError

from tickwork.calendar import HolidayPolicy
from tickwork.client import Client
from tickwork.cron import DstGap, DstRepeat
from tickwork.errors import TenantNotFound, ValidationError
from tickwork.inputs import parse_rate
from tickwork.job import MAX_NAME_LENGTH, JobState, MisfirePolicy, OverlapPolicy, RunState
from tickwork.records import (
    ATTEMPT_ERROR_LIMIT,
    ATTEMPT_TRACEBACK_LIMIT,
    ATTEMPTS_KEPT,
    DEFAULT_BULK,
    DEFAULT_PAGE,
    MAX_BULK,
    MAX_PAGE,
    MAX_RUNNING_CEILING,
    RATE_CEILING,
    RATE_FLOOR,
    ROLLUP_KEEP,
    WEIGHT_CEILING,
    WEIGHT_FLOOR,
    AttemptEnd,
    Page,
    SlotFate,
    to_json,
)
from tickwork.stats import bucket_percentile
from tickwork.web.auth import CallerFirst, Principal, get_admin, get_client, get_principal
from tickwork.web.errors import Forbidden, UnsupportedMediaType, error_body, is_json
from tickwork.web.params import (
    MAX_ID,
    MAX_TEXT,
    PLAIN_TEXT,
    Cursor,
    NameText,
    SlotText,
    TimeText,
)

PREFIX = "/api/v1"
SHELL_TASK = "shell"
"""The built-in task that runs a command on a worker: only an admin key may submit it."""
HTTP_TASK = "http"
ALLOW_PRIVATE = "allow_private"
"""The http arg that lifts a worker's egress policy for one job: only an admin key may send
it (see docs/http-api.md, "Egress from http tasks")."""
MAX_SECONDS = 100 * 366 * 86_400
"""Durations above a century are refused: a time that far out would overflow datetimes."""
MAX_BATCH = 1000
"""Jobs per ``POST /jobs/batch``: one transaction each; a larger fan-out takes several."""

# Query parameters: the checks are tickwork.web.params', which the dashboard applies too.
TenantQuery = Annotated[NameText | None, Query(description="Admin keys only.")]
NameQuery = Annotated[NameText | None, Query()]
TimeQuery = Annotated[
    TimeText | None,
    Query(description="ISO-8601 with an offset; bounds the slot (since <= slot < until)."),
]
ClientDep = Annotated[Client, Depends(get_client)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
AdminDep = Annotated[Principal, Depends(get_admin)]
JobId = Annotated[int, Path(ge=1, le=MAX_ID, description="A job id.")]
RunId = Annotated[int, Path(ge=1, le=MAX_ID, description="A run id.")]
After = Annotated[
    Cursor | None, Query(description="A cursor: the `next_cursor` of the previous page.")
]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="Items per page, newest first.")]
# Numbers are strict: true is not 1, "5" is not 5, 1.5 is not an integer.
Seconds = Annotated[float | None, Strict(), Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
Integer = Annotated[int | None, Strict()]
Text = Annotated[str | None, Field(max_length=MAX_TEXT)]
Label = Annotated[str | None, Field(max_length=MAX_NAME_LENGTH)]


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {
            "application/json": {
                "example": error_body("code", "what went wrong", "the offending field")
            }
        },
    }


COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _error("No key, or a wrong, malformed or revoked one."),
    422: _error("The request does not fit the schema (the field is named)."),
}
ID_ERRORS: dict[int | str, dict[str, Any]] = {
    **COMMON_ERRORS,
    404: _error("No such id, or one of another tenant (the same answer)."),
}
COMMAND_ERRORS: dict[int | str, dict[str, Any]] = {
    **ID_ERRORS,
    409: _error("The current state does not allow this change."),
}

router = APIRouter(prefix=PREFIX, responses=COMMON_ERRORS, route_class=CallerFirst)
"""Its routes know their caller before they read a body (:class:`.auth.CallerFirst`)."""


# -- request and response shapes ------------------------------------------------------------


class ScheduleIn(BaseModel):
    """At most one of ``at``, ``delay``, ``cron`` (with ``tz``) or ``every`` (with
    ``anchor``); none (or no schedule at all) means now."""

    model_config = ConfigDict(extra="forbid")

    at: Text = Field(
        None,
        description="ISO-8601 time with an offset, 1970-01-01 to 9999-12-30 UTC: run once then.",
    )
    delay: Seconds = Field(None, description="Seconds from now: run once then.")
    cron: Text = Field(None, description="A 5-field (or 6, with seconds) cron expression.")
    tz: Text = Field(None, description="IANA time zone of the cron expression (default UTC).")
    every: Seconds = Field(None, description="Seconds between slots (at least 1).")
    anchor: Text = Field(
        None, description="ISO-8601 time the interval counts from, 1970-01-01 to 9999-12-30 UTC."
    )
    dst_gap: DstGap | None = Field(
        None, description="cron: a slot in a DST gap runs right after it, or is skipped."
    )
    dst_repeat: DstRepeat | None = Field(
        None, description="cron: a slot in a repeated hour runs at the first pass, or at both."
    )
    calendar: Text = Field(None, description="cron: a business-day calendar's name.")
    on_holiday: HolidayPolicy | None = Field(
        None, description="cron, with calendar: a slot on a day off (default skip)."
    )
    business_day: Integer = Field(
        None, description="cron, with calendar: the month's n-th business day (-1: the last)."
    )
    business_days_only: Annotated[bool | None, Strict()] = Field(
        None, description="cron, with calendar: short for on_holiday skip."
    )


class JobIn(BaseModel):
    """A job to submit. Unknown fields are refused (422), so a typo cannot be ignored."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "task": "http",
                    "args": {"url": "https://example.com/hook", "method": "POST"},
                    "schedule": {"cron": "*/5 * * * *", "tz": "Europe/Berlin"},
                    "name": "hook",
                    "max_attempts": 5,
                }
            ]
        },
    )

    task: str = Field(max_length=MAX_NAME_LENGTH, description="A registered task name.")
    args: dict[str, Any] | None = Field(
        None, description="JSON object (256 KiB at most, nested 32 levels at most)."
    )
    name: Label = Field(None, description="Unique per tenant.")
    schedule: ScheduleIn | None = None
    tenant: Label = Field(
        None, description="The tenant that owns the job (admin keys; default: the key's)."
    )
    queue: Label = None
    priority: Integer = Field(None, ge=-1000, le=1000)
    max_attempts: Integer = Field(None, ge=1, le=1000)
    timeout: Seconds = Field(None, description="Seconds an attempt may take.")
    misfire: MisfirePolicy | None = None
    misfire_grace: Seconds = None
    overlap: OverlapPolicy | None = None
    idempotency_key: Label = Field(
        None, description="A repeated submit with the same key returns the same job (200)."
    )


class BatchIn(BaseModel):
    """Up to 1,000 jobs, each as POST /jobs takes one, submitted in one transaction."""

    model_config = ConfigDict(extra="forbid")

    jobs: list[JobIn] = Field(min_length=1, max_length=MAX_BATCH)


class RetryOut(BaseModel):
    max_attempts: int
    backoff_base: float
    backoff_cap: float


class JobOut(BaseModel):
    """A job. Times are ISO-8601 UTC; durations are seconds."""

    id: int
    tenant: str
    name: str | None
    task: str
    args: dict[str, Any]
    schedule: dict[str, Any]
    state: JobState
    next_run_at: str | None
    queue: str
    priority: int
    retry: RetryOut
    timeout: float | None
    misfire: MisfirePolicy
    misfire_grace: float
    overlap: OverlapPolicy
    idempotency_key: str | None
    created_at: str
    updated_at: str
    trace_context: str | None = None
    """The W3C traceparent of the span that submitted the job (OpenTelemetry), if any."""


class JobSubmittedOut(JobOut):
    """A job just submitted, with what its schedule should warn about."""

    warnings: list[str] = Field(
        description="E.g. each DST change of the next year its slots meet, naming the date "
        "and what the DST policy does there. The job is written all the same."
    )


class UpcomingOut(BaseModel):
    at: str = Field(description="When the slot runs (or, when run is false, would have).")
    run: bool = Field(description="False: the DST policy or the calendar skips the slot.")
    note: str | None = Field(description="What a DST change or the calendar does here.")


class SubmittedOut(BaseModel):
    created: bool = Field(description="False: the idempotency key matched this existing job.")
    job: JobOut


class BatchOut(BaseModel):
    """One entry per job submitted, in order."""

    jobs: list[SubmittedOut]


class JobDetailOut(JobOut):
    """A job, its schedule in plain English and its next fire times."""

    schedule_description: str
    next_fire_times: list[str]
    upcoming: list[UpcomingOut] = Field(
        description="The next fire times with what DST or the calendar does to each, and "
        "the slots skipped on the way."
    )


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


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: int | None = Field(description="Pass as `after` for the next page.")


class RunPage(BaseModel):
    items: list[RunOut]
    next_cursor: int | None = Field(description="Pass as `after` for the next page.")


class SlotSkipOut(BaseModel):
    """Consecutive slots of a job that share a fate (misfire, coalesced, overlap ...)."""

    job_id: int
    first_slot: str
    last_slot: str
    count: int
    fate: str
    run_id: int | None
    more: bool
    recorded_at: str | None


class LedgerOut(BaseModel):
    items: list[SlotSkipOut]


class ExplainOut(BaseModel):
    job_id: int
    at: str | None = Field(description="The slot asked about (null: the latest).")
    slot: str = Field(description="The slot explained, ISO-8601 UTC.")
    run_id: int | None = Field(description="The slot's run, when it was triggered.")
    fate: SlotFate | None = Field(
        description="Why the slot got no run of its own, when the slot ledger says so."
    )
    explanation: str


class StatsOut(BaseModel):
    by_state: dict[str, int]
    due_backlog: int
    oldest_due_at: str | None
    recent_lag_ms: list[float]
    now: str


class LeaseOut(BaseModel):
    holder: str
    epoch: int
    expires_at: str


class NodeOut(BaseModel):
    id: str
    kind: str
    host: str
    pid: int
    started_at: str
    last_seen_at: str
    running: int
    info: dict[str, Any]


class ClusterOut(BaseModel):
    leader: LeaseOut | None
    nodes: list[NodeOut]
    now: str


# -- jobs -------------------------------------------------------------------------------------


@router.post(
    "/jobs",
    status_code=status.HTTP_201_CREATED,
    response_model=JobSubmittedOut,
    summary="Submit a job",
    responses={
        200: {
            "description": "The idempotency key matched: the existing job.",
            "model": JobSubmittedOut,
        },
        400: _error("Invalid cron, unknown time zone or task, bad args ... (field named)."),
        403: _error(
            "A tenant key submitted a shell task, an http job with allow_private, or named "
            "another tenant."
        ),
        413: _error("The body is larger than 512 KiB."),
    },
)
def submit_job(
    body: JobIn, response: Response, principal: PrincipalDep, client: ClientDep
) -> dict[str, Any]:
    submitted = client.submit(**_submit_options(body, principal))
    job = submitted.job
    response.headers["Location"] = f"{PREFIX}/jobs/{job.id}"
    if not submitted.created:
        response.status_code = status.HTTP_200_OK
    return {**to_json(job), "warnings": list(submitted.warnings)}


async def _batch_body(request: Request, principal: PrincipalDep) -> bytes:
    """The batch's body, read only once the caller is known (this depends on
    :func:`get_principal`, so a 401 or 403 comes with the body unread) and bounded by
    MAX_BATCH_BODY_BYTES (:class:`~tickwork.web.errors.BodyLimitMiddleware`: 413); parsed
    by the endpoint, off the event loop."""
    if not is_json(request.headers.get("content-type")):
        raise UnsupportedMediaType()
    return await request.body()


BatchBody = Annotated[bytes, Depends(_batch_body)]


def _parse_batch(raw: bytes) -> BatchIn:
    """The batch from its JSON, parsed and checked in one pass (no Python copy of the
    whole document first); errors as FastAPI's for a body (invalid_json 400, or 422)."""
    try:
        return BatchIn.model_validate_json(raw)
    except PydanticValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def _batch_request_body() -> dict[str, Any]:
    """The batch's body in the OpenAPI document (the endpoint reads its body itself): the
    schema of BatchIn, whose JobIn is the document's own (POST /jobs has it)."""
    schema = BatchIn.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


@router.post(
    "/jobs/batch",
    status_code=status.HTTP_201_CREATED,
    response_model=BatchOut,
    summary="Submit up to 1,000 jobs at once: all or none",
    responses={
        200: {"description": "Every job's idempotency key matched: nothing was created."},
        400: _error("A job is invalid; `index` is its position, `field` the path to it."),
        403: _error("A job a tenant key may not submit (as POST /jobs); `index` names it."),
        413: _error("The body is larger than 16 MiB."),
        415: _error("The body is not declared as JSON."),
    },
    openapi_extra=_batch_request_body(),
)
def submit_jobs(
    raw: BatchBody, response: Response, principal: PrincipalDep, client: ClientDep
) -> dict[str, Any]:
    # A plain function: FastAPI runs it on its thread pool, so up to 16 MiB of JSON is
    # parsed there, never on the event loop that answers /healthz.
    body = _parse_batch(raw)
    options = [_submit_options(job, principal, index=i) for i, job in enumerate(body.jobs)]
    submitted = client.submit_many(options)
    if not any(s.created for s in submitted):
        response.status_code = status.HTTP_200_OK
    return {"jobs": [{"created": s.created, "job": to_json(s.job)} for s in submitted]}


def _submit_options(body: JobIn, principal: Principal, index: int | None = None) -> dict[str, Any]:
    """What the client's submit takes for ``body``, after the checks of the caller's
    rights (Forbidden; in a batch, naming the job by ``index``)."""
    where = f"jobs.{index}." if index is not None else ""
    said = f"job {index} of the batch: " if index is not None else ""

    def forbidden(message: str, field: str) -> Forbidden:
        return Forbidden(said + message, field=where + field, index=index)

    if body.task == SHELL_TASK and not principal.admin:
        raise forbidden("shell tasks run commands on workers: submitting one needs an admin key",
                        "task")  # fmt: skip
    if body.tenant is not None and not principal.admin and body.tenant != principal.tenant:
        raise forbidden("a tenant key submits jobs to its own tenant only", "tenant")
    if body.task == HTTP_TASK and body.args and ALLOW_PRIVATE in body.args and not principal.admin:
        raise forbidden(f"{ALLOW_PRIVATE} lets an http job reach private and loopback addresses: "
                        "sending it needs an admin key", f"args.{ALLOW_PRIVATE}")  # fmt: skip
    schedule = body.schedule.model_dump(exclude_none=True) if body.schedule else {}
    return {
        "task": body.task,
        "args": body.args,
        "name": body.name,
        "tenant": body.tenant if principal.admin and body.tenant else principal.home,
        "queue": body.queue,
        "priority": body.priority,
        "max_attempts": body.max_attempts,
        "timeout": body.timeout,
        "misfire": body.misfire,
        "misfire_grace": body.misfire_grace,
        "overlap": body.overlap,
        "idempotency_key": body.idempotency_key,
        **schedule,
    }


@router.get("/jobs", response_model=JobPage, summary="List jobs, newest first")
def list_jobs(
    *,
    principal: PrincipalDep,
    client: ClientDep,
    state: JobState | None = None,
    task: NameQuery = None,
    tenant: TenantQuery = None,
    search: Annotated[
        NameText | None,
        Query(description="Only jobs whose name or task contains this text (any case)."),
    ] = None,
    after: After = None,
    limit: Limit = DEFAULT_PAGE,
) -> dict[str, Any]:
    page = client.list_jobs(
        tenant=_scope(principal, tenant),
        state=state,
        task=task,
        after=after,
        limit=limit,
        search=search,
    )
    return _page(page)


@router.get(
    "/jobs/{job_id}",
    response_model=JobDetailOut,
    summary="A job, its schedule explained and its next fire times",
    responses=ID_ERRORS,
)
def get_job(
    job_id: JobId,
    principal: PrincipalDep,
    client: ClientDep,
    n: Annotated[int, Query(ge=1, le=100, description="How many fire times.")] = 5,
) -> dict[str, Any]:
    job = client.get_job(job_id, tenant=principal.tenant)
    fires = client.upcoming(job, n)
    return {
        **to_json(job),
        "schedule_description": job.schedule.describe(),
        "next_fire_times": [f.at.isoformat() for f in fires if not f.skipped],
        "upcoming": [{"at": f.at.isoformat(), "run": not f.skipped, "note": f.note} for f in fires],
    }


@router.post(
    "/jobs/{job_id}/cancel",
    response_model=JobOut,
    summary="Cancel a job: no more slots; its waiting runs are cancelled",
    responses=COMMAND_ERRORS,
)
def cancel_job(job_id: JobId, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    return to_json(client.cancel_job(job_id, tenant=principal.tenant))


@router.post(
    "/jobs/{job_id}/pause",
    response_model=JobOut,
    summary="Pause a job: no slot is triggered until it is resumed",
    responses=COMMAND_ERRORS,
)
def pause_job(job_id: JobId, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    return to_json(client.pause_job(job_id, tenant=principal.tenant))


@router.post(
    "/jobs/{job_id}/resume",
    response_model=JobOut,
    summary="Resume a paused job (slots that fell while paused are skipped)",
    responses=COMMAND_ERRORS,
)
def resume_job(job_id: JobId, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    return to_json(client.resume_job(job_id, tenant=principal.tenant))


@router.post(
    "/jobs/{job_id}/trigger",
    status_code=status.HTTP_201_CREATED,
    response_model=RunOut,
    summary="Run a job now, once, besides its schedule",
    responses=COMMAND_ERRORS,
)
def trigger_job(
    job_id: JobId, response: Response, principal: PrincipalDep, client: ClientDep
) -> dict[str, Any]:
    run = client.trigger_job(job_id, tenant=principal.tenant)
    response.headers["Location"] = f"{PREFIX}/runs/{run.id}"
    return to_json(run)


@router.get(
    "/jobs/{job_id}/explain",
    response_model=ExplainOut,
    summary="Why the job did or did not run at a slot",
    responses={**ID_ERRORS, 400: _error("`at` is not an ISO-8601 time.")},
)
def explain_job(
    job_id: JobId,
    principal: PrincipalDep,
    client: ClientDep,
    at: Annotated[
        SlotText | None,
        Query(
            description="ISO-8601 slot; without an offset it is read in the job's cron time "
            "zone (UTC otherwise). Default: the job's latest slot.",
        ),
    ] = None,
) -> dict[str, Any]:
    found = client.explain(job_id, at, tenant=principal.tenant)
    return {
        "job_id": job_id,
        "at": at,
        "slot": found.slot.isoformat(),
        "run_id": found.run.id if found.run is not None else None,
        "fate": found.fate,
        "explanation": found.text,
    }


@router.get(
    "/jobs/{job_id}/ledger",
    response_model=LedgerOut,
    summary="The job's skipped slots, newest first",
    responses=ID_ERRORS,
)
def job_ledger(
    job_id: JobId, principal: PrincipalDep, client: ClientDep, limit: Limit = DEFAULT_PAGE
) -> dict[str, Any]:
    skips = client.slot_ledger(job_id, tenant=principal.tenant, limit=limit)
    return {"items": [to_json(skip) for skip in skips]}


# -- runs -------------------------------------------------------------------------------------


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
        tenant=_scope(principal, tenant),
        since=since,
        until=until,
        after=after,
        limit=limit,
    )
    return _page(page)


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
    400: _error("More runs match than max_count, or a bad filter: nothing changed."),
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
        "tenant": _scope(principal, body.tenant),
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
    return _page(client.dead_runs(tenant=principal.tenant, after=after, limit=limit))


# -- the cluster ------------------------------------------------------------------------------


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


@router.get(
    "/cluster",
    response_model=ClusterOut,
    summary="The leader and every scheduler and worker (admin keys only)",
    responses={403: _error("A tenant key: the cluster view is for admins.")},
)
def cluster(principal: AdminDep, client: ClientDep) -> dict[str, Any]:
    return to_json(client.cluster())


# -- tenants ----------------------------------------------------------------------------------


class TenantOut(BaseModel):
    tenant: str
    max_running: int | None
    rate: float | None = Field(description="Runs started per second; null: no rate limit.")
    burst: int | None = Field(description="The token bucket's size; null: one second's worth.")
    weight: float = Field(description="The tenant's share when tenants compete (default 1).")
    running: int = Field(description="Runs of the tenant in state running now.")
    due: int = Field(description="Runs queued (or awaiting retry) whose time has come.")
    held: int = Field(description="Due runs a limit keeps from starting now.")
    at_limit: bool = Field(description="At its max_running: none of its runs is claimed now.")


def _rate(value: object) -> float | None:
    """A rate in a body: a number per second or text such as ``"20/s"``, through the one
    parser the CLI uses; a 422 naming ``rate`` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PydanticCustomError(
            "rate", 'rate must be a number per second or text such as "20/s", "30/m"'
        )
    try:
        return parse_rate(value)
    except ValidationError as exc:
        raise PydanticCustomError("rate", exc.message) from None


RateIn = Annotated[
    float | None,
    BeforeValidator(_rate),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": RATE_FLOOR, "maximum": RATE_CEILING},
                {"type": "string", "pattern": r"^\s*[0-9.]+\s*(/\s*[smh])?\s*$"},
                {"type": "null"},
            ]
        }
    ),
]


class TenantLimitsIn(BaseModel):
    """A tenant's limits. ``PUT`` replaces them all (a field left out or null is cleared,
    ``weight`` back to 1); ``PATCH`` changes only the fields it names (null clears one).
    Unknown fields are refused (422)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"max_running": 5, "rate": "20/s", "burst": 40}]},
    )

    max_running: Annotated[int | None, Strict(), Field(ge=1, le=MAX_RUNNING_CEILING)] = Field(
        None,
        description="At most this many of the tenant's runs execute at once, across every "
        "worker; null: no limit.",
    )
    rate: RateIn = Field(
        None,
        description="Runs started per second across every worker: a number, or text such as "
        '"20/s", "30/m" or "100/h"; null: no limit.',
    )
    burst: Annotated[int | None, Strict(), Field(ge=1, le=MAX_RUNNING_CEILING)] = Field(
        None,
        description="Starts the rate allows at once after a quiet spell (needs a rate); "
        "null: one second's worth.",
    )
    weight: Annotated[
        float | None, Strict(), Field(ge=WEIGHT_FLOOR, le=WEIGHT_CEILING, allow_inf_nan=False)
    ] = Field(None, description="The tenant's share when tenants compete; null: 1.")

    def changes(self, *, replace: bool) -> dict[str, Any]:
        """The keyword arguments of :meth:`Client.set_tenant_limits`: every limit (``PUT``),
        or those the body names (``PATCH``), where clearing the rate clears its burst too."""
        given = set(TenantLimitsIn.model_fields) if replace else self.model_fields_set
        changes = {name: getattr(self, name) for name in given}
        if "rate" in changes and changes["rate"] is None:
            changes.setdefault("burst", None)
        return changes


TenantName = Annotated[
    str,
    Path(min_length=1, max_length=MAX_NAME_LENGTH, pattern=PLAIN_TEXT, description="A tenant."),
]
TENANT_ERRORS: dict[int | str, dict[str, Any]] = {
    **COMMON_ERRORS,
    404: _error("A tenant key asking for another tenant."),
}
TENANT_WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    **COMMON_ERRORS,
    400: _error("Limits that do not agree (a burst without a rate)."),
    403: _error("A tenant key: setting limits is for admins."),
}


@router.get(
    "/tenants",
    response_model=list[TenantOut],
    summary="Tenants with limits or runs now: limits, running, due and held (a tenant key: "
    "its own)",
)
def list_tenants(principal: PrincipalDep, client: ClientDep) -> list[dict[str, Any]]:
    if principal.tenant is not None:
        return [to_json(client.tenant(principal.tenant))]
    return [to_json(status) for status in client.list_tenants()]


@router.get(
    "/tenants/{tenant}",
    response_model=TenantOut,
    summary="A tenant's limits and runs now",
    responses=TENANT_ERRORS,
)
def get_tenant(tenant: TenantName, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    if principal.tenant is not None and tenant != principal.tenant:
        raise TenantNotFound(tenant)
    return to_json(client.tenant(tenant))


@router.put(
    "/tenants/{tenant}",
    response_model=TenantOut,
    summary="Replace a tenant's limits: one left out is cleared (admin keys only); workers "
    "obey them from their next claim",
    responses=TENANT_WRITE_ERRORS,
)
def put_tenant(
    tenant: TenantName, body: TenantLimitsIn, principal: AdminDep, client: ClientDep
) -> dict[str, Any]:
    return to_json(client.set_tenant_limits(tenant, **body.changes(replace=True)))


@router.patch(
    "/tenants/{tenant}",
    response_model=TenantOut,
    summary="Change the limits the body names, keep the others (admin keys only)",
    responses=TENANT_WRITE_ERRORS,
)
def patch_tenant(
    tenant: TenantName, body: TenantLimitsIn, principal: AdminDep, client: ClientDep
) -> dict[str, Any]:
    changes = body.changes(replace=False)
    if not changes:
        raise ValidationError(
            "nothing to change: give max_running, rate, burst or weight", field="body"
        )
    return to_json(client.set_tenant_limits(tenant, **changes))


# -- calendars --------------------------------------------------------------------------------

CalendarName = Annotated[
    str, Path(max_length=63, pattern=r"^[a-z0-9][a-z0-9._-]*$", description="A calendar.")
]
DateList = Annotated[list[Annotated[str, Field(max_length=10)]] | None, Field(max_length=1000)]


class CalendarOut(BaseModel):
    name: str
    country: str | None
    subdiv: str | None
    weekend: list[str]
    added: list[str]
    removed: list[str]
    created_at: str
    updated_at: str


class CalendarIn(BaseModel):
    """A new calendar, or (PATCH) a change: a given country, subdiv or weekend replaces the
    stored one; add and remove list days off and business days (YYYY-MM-DD)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"country": "DE", "subdiv": "BY", "add": ["2026-12-24"]}]},
    )

    country: Text = Field(None, description="ISO 3166-1 code: its public holidays.")
    subdiv: Text = Field(None, description="A region of the country: its holidays too.")
    weekend: Text = Field(None, description="SAT,SUN (the default), FRI,SAT, or none.")
    add: DateList = Field(None, description="Days off besides the holidays.")
    remove: DateList = Field(None, description="Business days despite a holiday.")


class CalendarChangeOut(BaseModel):
    calendar: CalendarOut
    replanned: list[int] = Field(description="The jobs whose next run was re-planned.")


@router.get("/calendars", response_model=list[CalendarOut], summary="Every calendar, by name")
def list_calendars(principal: PrincipalDep, client: ClientDep) -> list[dict[str, Any]]:
    return [to_json(record) for record in client.list_calendars()]


@router.get(
    "/calendars/{name}",
    response_model=CalendarOut,
    summary="A calendar",
    responses={**COMMON_ERRORS, 404: _error("No such calendar.")},
)
def get_calendar(name: CalendarName, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    return to_json(client.get_calendar(name))


@router.put(
    "/calendars/{name}",
    status_code=status.HTTP_201_CREATED,
    response_model=CalendarOut,
    summary="Create a calendar (admin keys only)",
    responses={
        **COMMON_ERRORS,
        400: _error("Unknown country or region, a malformed date, or the name is taken."),
        403: _error("A tenant key: calendars are for admins."),
    },
)
def create_calendar(
    name: CalendarName, body: CalendarIn, principal: AdminDep, client: ClientDep
) -> dict[str, Any]:
    record = client.create_calendar(name, **body.model_dump())
    return to_json(record)


@router.patch(
    "/calendars/{name}",
    response_model=CalendarChangeOut,
    summary="Change a calendar (admin keys only); its jobs are re-planned in one transaction",
    responses={
        **COMMON_ERRORS,
        400: _error("Unknown country or region, or a malformed date."),
        403: _error("A tenant key: calendars are for admins."),
        404: _error("No such calendar."),
    },
)
def update_calendar(
    name: CalendarName, body: CalendarIn, principal: AdminDep, client: ClientDep
) -> dict[str, Any]:
    change = client.update_calendar(name, **body.model_dump())
    return {"calendar": to_json(change.record), "replanned": change.replanned}


@router.delete(
    "/calendars/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a calendar no active or paused job uses (admin keys only)",
    responses={
        **COMMON_ERRORS,
        403: _error("A tenant key: calendars are for admins."),
        404: _error("No such calendar."),
        409: _error("Active or paused jobs use the calendar (the message names them)."),
    },
)
def delete_calendar(name: CalendarName, principal: AdminDep, client: ClientDep) -> Response:
    client.delete_calendar(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# -- helpers ----------------------------------------------------------------------------------


def _scope(principal: Principal, tenant: str | None) -> str | None:
    """The tenant a listing covers: the key's own; an admin's choice (None: all)."""
    if principal.admin:
        return tenant
    if tenant is not None and tenant != principal.tenant:
        raise Forbidden("a tenant key sees its own tenant only", field="tenant")
    return principal.tenant


def _page(page: Page[Any]) -> dict[str, Any]:
    return {"items": [to_json(item) for item in page.items], "next_cursor": page.next_cursor}
