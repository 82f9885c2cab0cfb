"""The dashboard's pages, their live fragments and the commands they post: the overview,
the jobs and a job, the dead-letter list, the tenants and a tenant, and the cluster (see
:mod:`tickwork.web.dashboard` for the list of pages).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

from fastapi import Form, Request
from fastapi.responses import RedirectResponse, Response

from tickwork.client import Client
from tickwork.errors import NotFound, TenantNotFound, TickworkError, ValidationError
from tickwork.inputs import job_state, parse_rate
from tickwork.job import (
    Job,
    JobState,
    RunState,
    check_label,
)
from tickwork.records import SlotFate
from tickwork.schedule import Cron
from tickwork.stats import percentile
from tickwork.web.auth import (
    Principal,
)
from tickwork.web.dashboard import charts
from tickwork.web.dashboard.render import (
    capitalize_first,
    error_page,
    failure,
    render,
    tenant_path,
)
from tickwork.web.dashboard.session import (
    client_of,
    cross_site,
    is_htmx,
    local_path,
    return_page,
    router,
    same_origin,
    sign_in_first,
    viewer_of,
)
from tickwork.web.dashboard.view import (
    Missing,
    after_id,
    after_query,
    parse_id,
    query_text,
    serve_page,
)
from tickwork.web.errors import status_of
from tickwork.web.params import SlotText, check, check_choice

log = logging.getLogger("tickwork.web")

JOBS_PER_PAGE = 50
DEAD_PER_PAGE = 50
RUNS_PER_JOB = 50
"""Runs shown on a job's page, newest first."""
LEDGER_ROWS = 50
FIRE_TIMES = 5
LATEST_RUNS = 10
"""Runs the overview lists, newest first."""
OVERVIEW_WINDOW = "1h"
"""The overview's small charts: the last hour of outcomes and lag (``/activity`` has more)."""
FATE_HELP = {
    SlotFate.MISFIRE: "missed by more than the misfire grace; the misfire policy skipped it",
    SlotFate.COALESCED: "missed, and folded into one run by misfire policy 'once'",
    SlotFate.OVERLAP: "the previous run was unfinished and the overlap policy is 'forbid'",
    SlotFate.REPLACED: "a later slot of the same trigger replaced it (overlap 'replace')",
    SlotFate.PAUSED: "fell while the job was paused",
    SlotFate.CANCELLED: "fell after the job was cancelled",
}


# -- overview ------------------------------------------------------------------------------


def _overview_context(client: Client, viewer: Principal) -> dict[str, Any]:
    stats = client.run_stats(tenant=viewer.tenant)
    lag = {
        "p50": percentile(stats.recent_lag_ms, 50),
        "p99": percentile(stats.recent_lag_ms, 99),
        "samples": len(stats.recent_lag_ms),
    }
    latest = client.list_runs(tenant=viewer.tenant, limit=LATEST_RUNS).items
    # Queues whose due runs no live worker claims: said on the backlog card, not only on
    # the queues page, since the backlog alone looks the same as workers that are slow.
    stranded = [q for q in client.queues(tenant=viewer.tenant) if q.due and not q.workers]
    # The last hour beside the counts, from the same per-minute rollup as /activity.
    span, _ = charts.WINDOWS[OVERVIEW_WINDOW]
    now, minutes = client.run_minutes(span, tenant=viewer.tenant)
    hour = charts.buckets(now, minutes, OVERVIEW_WINDOW)
    return {
        "outcomes_chart": charts.outcomes_chart(hour),
        "lag_chart": charts.lag_chart(hour),
        "stats": stats,
        "stranded": stranded,
        "lag": lag,
        "leader": client.leader(),
        "latest": latest,
        "names": client.job_names((r.job_id for r in latest), tenant=viewer.tenant),
        "scope": viewer.tenant,
    }


@router.get("/", response_model=None)
def overview(request: Request) -> Response:
    return serve_page(request, "overview.html", _overview_context)


@router.get("/fragments/overview", response_model=None)
def overview_fragment(request: Request) -> Response:
    return serve_page(request, "_overview.html", _overview_context)


# -- jobs ----------------------------------------------------------------------------------


JOB_KINDS = {"recurring": True, "one-off": False}
"""The jobs page's ``kind`` tabs: recurring (cron, interval) or one-off jobs only, so the
few schedules are not buried under many one-off jobs."""


def _jobs_context(client: Client, viewer: Principal, query: Mapping[str, str]) -> dict[str, Any]:
    state = query.get("state") or None
    task = query_text(query, "task")
    search = query_text(query, "q")
    kind = check_choice("kind", query.get("kind") or None, tuple(JOB_KINDS))
    # A tenant key sees its own tenant only, whatever the query says.
    tenant = query_text(query, "tenant") if viewer.tenant is None else None
    after = after_id(query.get("after"))
    page = client.list_jobs(
        tenant=viewer.tenant if viewer.tenant is not None else tenant,
        state=job_state(state),
        task=task,
        after=after,
        limit=JOBS_PER_PAGE,
        search=search,
        recurring=JOB_KINDS[kind] if kind is not None else None,
    )
    chosen = (("state", state), ("task", task), ("q", search), ("kind", kind), ("tenant", tenant))
    kept = {k: v for k, v in chosen if v}
    others = {k: v for k, v in kept.items() if k != "kind"}
    return {
        "page": page,
        "filters": {
            "state": state,
            "task": task,
            "q": search,
            "kind": kind,
            "tenant": tenant,
            "after": after,
        },
        "kinds": [
            (label, value, "/jobs?" + urlencode({**others, **({"kind": value} if value else {})}))
            for label, value in (("All", None), ("Recurring", "recurring"), ("One-off", "one-off"))
        ],
        "job_states": [s.value for s in JobState],
        "fragment_url": "/fragments/jobs?" + urlencode({**kept, **after_query(after)}),
        "first_url": "/jobs?" + urlencode(kept),
        "next_url": (
            "/jobs?" + urlencode({**kept, "after": page.next_cursor})
            if page.next_cursor is not None
            else None
        ),
    }


@router.get("/jobs", response_model=None)
def jobs(request: Request) -> Response:
    return serve_page(request, "jobs.html", _jobs_context, request.query_params)


@router.get("/fragments/jobs", response_model=None)
def jobs_fragment(request: Request) -> Response:
    return serve_page(request, "_jobs.html", _jobs_context, request.query_params)


def _job_id(text: str) -> int:
    ident = parse_id(text)
    if ident is None:
        raise Missing(f"job {text} not found")
    return ident


def _job_head_context(client: Client, viewer: Principal, job_id: str) -> dict[str, Any]:
    return {"job": client.get_job(_job_id(job_id), tenant=viewer.tenant)}


def _job_live_context(client: Client, viewer: Principal, job_id: str) -> dict[str, Any]:
    job = client.get_job(_job_id(job_id), tenant=viewer.tenant)
    runs = client.list_runs(job_id=job.id, tenant=viewer.tenant, limit=RUNS_PER_JOB).items
    return {
        "job": job,
        "runs": runs,
        "runs_truncated": len(runs) == RUNS_PER_JOB,
        "ledger": client.slot_ledger(job.id, tenant=viewer.tenant, limit=LEDGER_ROWS),
        "fate_help": FATE_HELP,
    }


def _job_context(client: Client, viewer: Principal, job_id: str, at: str | None) -> dict[str, Any]:
    values = _job_live_context(client, viewer, job_id)
    job: Job = values["job"]
    explanation = explain_error = None
    if at:
        try:
            check("at", at, SlotText)
            explanation = client.explain(job.id, at, tenant=viewer.tenant).text
        except ValidationError as exc:
            explain_error = capitalize_first(exc.message) + "."
    zone = job.schedule.tz if isinstance(job.schedule, Cron) and job.schedule.tz != "UTC" else None
    return {
        **values,
        "fire_times": client.next_fire_times(job, FIRE_TIMES),
        "local_zone": zone,
        "explain_at": at,
        "explanation": explanation,
        "explain_error": explain_error,
    }


@router.get("/jobs/{job_id}", response_model=None)
def job_page(request: Request, job_id: str, at: str | None = None) -> Response:
    # `at` goes to explain whole: its parser refuses what is no time (a NUL, a control
    # character, text past the offset) rather than have it trimmed here first.
    at = at if at and at.strip(" ") else None
    return serve_page(request, "job.html", _job_context, job_id, at)


@router.get("/fragments/jobs/{job_id}", response_model=None)
def job_fragment(request: Request, job_id: str) -> Response:
    """The live part of a job's page below what it is: its runs and slot ledger."""
    return serve_page(request, "_job_live.html", _job_live_context, job_id)


@router.get("/fragments/jobs/{job_id}/head", response_model=None)
def job_head_fragment(request: Request, job_id: str) -> Response:
    """The live part of a job's page at its top: its state and commands."""
    return serve_page(request, "_job_head.html", _job_head_context, job_id)


FINISHED_JOB_REFUSALS = {
    "trigger": "Job {job} is {state}: it has no slot left, so it is not run again.",
    "cancel": (
        "Job {job} is {state}: it has no slot left to cancel. To stop a run of it that has "
        "not finished, cancel that run."
    ),
}
"""What the dashboard answers (409) to Run now and Cancel job on a job with no slot left,
whose page offers neither. (The JSON API and ``tickwork trigger`` keep the store's rule: a
one-off job already triggered may get an extra run.)"""


@router.post("/jobs/{job_id}/{action}", response_model=None)
def job_action(request: Request, job_id: str, action: str) -> Response:
    """Pause, resume, trigger (run now) or cancel a job, then show its page again."""
    viewer = viewer_of(request)
    if viewer is None:
        return sign_in_first(request)
    if not same_origin(request):
        return cross_site(request, viewer)
    back = f"/jobs/{job_id}"
    client = client_of(request)
    commands = {
        "pause": client.pause_job,
        "resume": client.resume_job,
        "trigger": client.trigger_job,
        "cancel": client.cancel_job,
    }
    command = commands.get(action)
    try:
        if command is None:
            raise Missing(f"there is no job action {action!r}")
        ident = _job_id(job_id)
        if action in FINISHED_JOB_REFUSALS:
            job = client.get_job(ident, tenant=viewer.tenant)
            if not job.state.has_slots:
                message = FINISHED_JOB_REFUSALS[action].format(job=job.id, state=job.state)
                return error_page(request, viewer, 409, message, back)
        command(ident, tenant=viewer.tenant)
    except TickworkError as exc:
        return failure(request, viewer, exc, back)
    log.info("dashboard: %s job %s (key %s)", action, job_id, viewer.key or "open")
    return RedirectResponse(back, status_code=303)


# -- dead letter ---------------------------------------------------------------------------


DEAD_FILTERS = ("task", "queue", "tenant", "error")
"""The dead letter's filters: each checked as the API's query text (``web.params``); a
tenant key's ``tenant`` is its own, whatever the query says."""


def _dead_context(client: Client, viewer: Principal, query: Mapping[str, str]) -> dict[str, Any]:
    kept = {name: text for name in DEAD_FILTERS if (text := query_text(query, name))}
    if viewer.tenant is not None:
        kept.pop("tenant", None)
    after = after_id(query.get("after"))
    page = client.list_runs(
        state=RunState.DEAD,
        after=after,
        limit=DEAD_PER_PAGE,
        tenant=viewer.tenant if viewer.tenant is not None else kept.get("tenant"),
        task=kept.get("task"),
        queue=kept.get("queue"),
        error=kept.get("error"),
    )
    return {
        "page": page,
        "names": client.job_names((r.job_id for r in page.items), tenant=viewer.tenant),
        "after": after,
        "filters": kept,
        "notice": None,
        "fragment_url": "/fragments/dead?" + urlencode({**kept, **after_query(after)}),
        "first_url": "/dead?" + urlencode(kept),
        "next_url": (
            "/dead?" + urlencode({**kept, "after": page.next_cursor})
            if page.next_cursor is not None
            else None
        ),
        "retry_url": "/bulk/retry?" + urlencode(kept),
        "back": "/dead?" + urlencode(kept) if kept else "/dead",
    }


@router.get("/dead", response_model=None)
def dead(request: Request) -> Response:
    return serve_page(request, "dead.html", _dead_context, request.query_params)


@router.get("/fragments/dead", response_model=None)
def dead_fragment(request: Request) -> Response:
    return serve_page(request, "_dead.html", _dead_context, request.query_params)


@router.post("/runs/{run_id}/retry", response_model=None)
def retry_run(request: Request, run_id: str, next: Annotated[str, Form()] = "/dead") -> Response:
    """Put a dead or failed run back in the queue.

    A plain form post is answered 303 to the page it came from (``next``). From htmx
    (``HX-Request``) the answer is the run's dead-letter row, re-rendered in its new state,
    which htmx swaps in place; a run that cannot be retried (another operator was first:
    409, or it is gone: 404) gets its row back with the reason.
    """
    viewer = viewer_of(request)
    if viewer is None:
        return sign_in_first(request)
    if not same_origin(request):
        return cross_site(request, viewer)
    back = return_page(next, "/dead")
    client = client_of(request)
    ident = parse_id(run_id)
    try:
        if ident is None:
            raise Missing(f"run {run_id} not found")
        run = client.retry_run(ident, tenant=viewer.tenant)
    except TickworkError as exc:
        if not is_htmx(request) or ident is None or status_of(exc) >= 500:
            return failure(request, viewer, exc, back)
        return _retry_refused(request, viewer, client, ident, exc)
    log.info("dashboard: retry run %d (key %s)", run.id, viewer.key or "open")
    if is_htmx(request):
        return render(request, "_dead_row.html", viewer, run=run, notice="Retried:")
    return RedirectResponse(back, status_code=303)


@router.post("/runs/{run_id}/cancel", response_model=None)
def cancel_run(request: Request, run_id: str, next: Annotated[str, Form()] = "/") -> Response:
    """Cancel a queued, failed or running run (a running one stops at its next heartbeat),
    then return to the page the form came from (``next``)."""
    viewer = viewer_of(request)
    if viewer is None:
        return sign_in_first(request)
    if not same_origin(request):
        return cross_site(request, viewer)
    back = local_path(next, "/")
    ident = parse_id(run_id)
    try:
        if ident is None:
            raise Missing(f"run {run_id} not found")
        run = client_of(request).cancel_run(ident, tenant=viewer.tenant)
    except TickworkError as exc:
        return failure(request, viewer, exc, back)
    log.info("dashboard: cancel run %d (key %s)", run.id, viewer.key or "open")
    return RedirectResponse(back, status_code=303)


def _retry_refused(
    request: Request, viewer: Principal, client: Client, run_id: int, exc: TickworkError
) -> Response:
    status = status_of(exc)
    if status == 404:
        return render(request, "_gone_row.html", viewer, status, run_id=run_id, message=str(exc))
    try:
        run = client.get_run(run_id, tenant=viewer.tenant)
    except NotFound as gone:
        return render(request, "_gone_row.html", viewer, 404, run_id=run_id, message=str(gone))
    notice = f"Not retried: it is {run.state}."
    return render(request, "_dead_row.html", viewer, status, run=run, notice=notice)


# -- cluster -------------------------------------------------------------------------------


def _cluster_context(client: Client, viewer: Principal) -> dict[str, Any]:
    return {"cluster": client.cluster()}


@router.get("/cluster", response_model=None)
def cluster(request: Request) -> Response:
    return serve_page(request, "cluster.html", _cluster_context, admin=True)


@router.get("/fragments/cluster", response_model=None)
def cluster_fragment(request: Request) -> Response:
    return serve_page(request, "_cluster.html", _cluster_context, admin=True)


@router.post("/cluster/forget", response_model=None)
def forget_node(request: Request, node: Annotated[str, Form()] = "") -> Response:
    """Forget a gone node (admin keys only), then show the cluster again: a node that is
    alive or only lately silent is refused (409) and stays, as ``tickwork cluster forget``."""
    viewer = viewer_of(request)
    if viewer is None:
        return sign_in_first(request)
    if not same_origin(request):
        return cross_site(request, viewer)
    if not viewer.admin:
        return error_page(request, viewer, 403, "Forgetting a node needs an admin key.")
    try:
        gone = client_of(request).forget_node(node)
    except TickworkError as exc:
        return failure(request, viewer, exc, "/cluster")
    log.info("dashboard: forgot node %r (key %s)", gone.id, viewer.key or "open")
    return RedirectResponse("/cluster", status_code=303)


# -- tenants -------------------------------------------------------------------------------


def _tenants_context(client: Client, viewer: Principal) -> dict[str, Any]:
    # A tenant key sees its own tenant only (as GET /api/v1/tenants); admins see every one.
    if viewer.tenant is not None:
        return {"tenants": [client.tenant(viewer.tenant)]}
    return {"tenants": client.list_tenants()}


def _tenant_context(client: Client, viewer: Principal, tenant: str) -> dict[str, Any]:
    if viewer.tenant is not None and tenant != viewer.tenant:
        raise TenantNotFound(tenant)
    return {"status": client.tenant(tenant)}


@router.get("/tenants", response_model=None)
def tenants(request: Request) -> Response:
    return serve_page(request, "tenants.html", _tenants_context)


@router.get("/fragments/tenants", response_model=None)
def tenants_fragment(request: Request) -> Response:
    return serve_page(request, "_tenants.html", _tenants_context)


@router.get("/tenants/{tenant:path}", response_model=None)
def tenant_page(request: Request, tenant: str) -> Response:
    return serve_page(request, "tenant.html", _tenant_context, tenant)


@router.get("/fragments/tenants/{tenant:path}", response_model=None)
def tenant_fragment(request: Request, tenant: str) -> Response:
    return serve_page(request, "_tenant.html", _tenant_context, tenant)


@router.post("/tenants", response_model=None)
def set_tenant_limits(
    request: Request,
    *,
    tenant: Annotated[str, Form()] = "",
    max_running: Annotated[str, Form()] = "",
    rate: Annotated[str, Form()] = "",
    burst: Annotated[str, Form()] = "",
    weight: Annotated[str, Form()] = "",
) -> Response:
    """Replace a tenant's limits from the form (admin keys only): an empty field clears
    that limit (weight: back to 1), as the JSON API's PUT. Bad input is a 400 page naming
    the field, and nothing changes."""
    viewer = viewer_of(request)
    if viewer is None:
        return sign_in_first(request)
    if not same_origin(request):
        return cross_site(request, viewer)
    if not viewer.admin:
        return error_page(request, viewer, 403, "Setting limits needs an admin key.")
    back = "/tenants"
    try:
        check_label("tenant", tenant)
        back = tenant_path(tenant)
        status = client_of(request).set_tenant_limits(
            tenant,
            max_running=_form_number(max_running, "max_running", int),
            rate=parse_rate(rate) if rate.strip() else None,
            burst=_form_number(burst, "burst", int),
            weight=_form_number(weight, "weight", float),
        )
    except TickworkError as exc:
        return failure(request, viewer, exc, back)
    log.info("dashboard: limits of tenant %r: %s (key %s)", tenant, status.limits, viewer.key)
    return RedirectResponse(back, status_code=303)


N = TypeVar("N", int, float)


def _form_number(text: str, field: str, kind: type[N]) -> N | None:
    """A form field's number (the store checks its range), None for an empty field."""
    if not text.strip():
        return None
    try:
        return kind(text.strip())
    except ValueError:
        noun = "a whole number" if kind is int else "a number"
        raise ValidationError(f"{field} must be {noun}, not {text!r}", field=field) from None
