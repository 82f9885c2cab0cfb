"""Jobs: submitting one or a batch, listings, a job with its schedule explained, the
commands on a job (cancel, pause, resume, trigger), why a slot ran or not, and its slot
ledger."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, Strict
from pydantic import ValidationError as PydanticValidationError

from tickwork.calendar import HolidayPolicy
from tickwork.cron import DstGap, DstRepeat
from tickwork.job import MAX_NAME_LENGTH, JobState, MisfirePolicy, OverlapPolicy
from tickwork.records import DEFAULT_PAGE, SlotFate, to_json
from tickwork.web.api.auth import PREFIX, ClientDep, PrincipalDep, resource_router, tenant_scope
from tickwork.web.api.errors import COMMAND_ERRORS, ID_ERRORS, error_doc
from tickwork.web.api.fields import After, Label, Limit, NameQuery, TenantQuery, Text, page_json
from tickwork.web.api.runs import RunOut
from tickwork.web.auth import Principal
from tickwork.web.errors import Forbidden, UnsupportedMediaType, is_json
from tickwork.web.params import MAX_ID, NameText, SlotText

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

JobId = Annotated[int, Path(ge=1, le=MAX_ID, description="A job id.")]
# Numbers are strict: true is not 1, "5" is not 5, 1.5 is not an integer.
Seconds = Annotated[float | None, Strict(), Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
Integer = Annotated[int | None, Strict()]

router = resource_router()


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


class JobPage(BaseModel):
    items: list[JobOut]
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
        400: error_doc("Invalid cron, unknown time zone or task, bad args ... (field named)."),
        403: error_doc(
            "A tenant key submitted a shell task, an http job with allow_private, or named "
            "another tenant."
        ),
        413: error_doc("The body is larger than 512 KiB."),
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
        400: error_doc("A job is invalid; `index` is its position, `field` the path to it."),
        403: error_doc("A job a tenant key may not submit (as POST /jobs); `index` names it."),
        413: error_doc("The body is larger than 16 MiB."),
        415: error_doc("The body is not declared as JSON."),
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
        tenant=tenant_scope(principal, tenant),
        state=state,
        task=task,
        after=after,
        limit=limit,
        search=search,
    )
    return page_json(page)


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
    responses={**ID_ERRORS, 400: error_doc("`at` is not an ISO-8601 time.")},
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
