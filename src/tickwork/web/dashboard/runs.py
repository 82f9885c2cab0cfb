"""The dashboard's runs: the runs page across jobs (filters by state, task, queue, tenant
and slot time), a page per run (its fields, then each attempt: worker, fencing token,
start, end, why it ended, error and traceback), and the bulk commands with their
confirmation page.

Bulk commands go through a confirmation: a GET of ``/bulk/{retry,cancel}`` with the
filters shows how many runs match (up to one page more than the limit) and a form; only
its POST acts, through :meth:`~tickwork.client.Client.retry_runs` or
:meth:`~tickwork.client.Client.cancel_runs`, all or nothing and bounded by
:data:`~tickwork.records.DEFAULT_BULK`, so a filter matching more changes nothing and says
so (a 400 page).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Form, Request
from fastapi.responses import RedirectResponse, Response

from tickwork.client import Client
from tickwork.errors import TickworkError
from tickwork.inputs import run_state
from tickwork.job import RunState
from tickwork.records import DEFAULT_BULK, MAX_PAGE, AttemptEnd
from tickwork.web.auth import Principal
from tickwork.web.dashboard.render import failure
from tickwork.web.dashboard.session import (
    client_of,
    cross_site,
    router,
    same_origin,
    sign_in_first,
    viewer_of,
)
from tickwork.web.dashboard.view import Missing, after_id, after_query, parse_id, serve_page
from tickwork.web.params import Cursor, NameText, TimeText, check, check_choice

log = logging.getLogger("tickwork.web")

RUNS_PER_PAGE = 50
FILTERS = ("state", "task", "queue", "tenant", "error", "since", "until", "range")
"""The runs page's query parameters that select runs (``after`` pages through them)."""
FILTER_CHECKS: dict[str, Any] = {
    "state": NameText,
    "task": NameText,
    "queue": NameText,
    "tenant": NameText,
    "error": NameText,
    "since": TimeText,
    "until": TimeText,
    "range": NameText,
}
"""Each filter's check, the JSON API's for the same parameter (a state and a range are
then checked against their choices)."""
RANGES = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
}
"""Quick time ranges (the slot within the last ...), besides ``since`` and ``until``."""
ENDED_BY = {
    AttemptEnd.SUCCEEDED: "succeeded",
    AttemptEnd.FAILED: "failed",
    AttemptEnd.TIMED_OUT: "timed out",
    AttemptEnd.LEASE_LOST: "lease lost",
    AttemptEnd.RELEASED: "released",
    AttemptEnd.CANCELLED: "cancelled",
    AttemptEnd.INJECTED_FAULT: "injected fault",
}
"""How the run page says an attempt ended (``running``: it has not)."""
ENDED_CLASS = {
    AttemptEnd.SUCCEEDED: "succeeded",
    AttemptEnd.FAILED: "failed",
    AttemptEnd.TIMED_OUT: "failed",
    AttemptEnd.LEASE_LOST: "failed",
    AttemptEnd.INJECTED_FAULT: "failed",
    AttemptEnd.RELEASED: "cancelled",
    AttemptEnd.CANCELLED: "cancelled",
}
"""The state colour an attempt's end is shown in (the run states' classes)."""
BULK = {
    "retry": ("Retry", "dead", "every dead run"),
    "cancel": ("Cancel", "waiting", "every waiting run (queued, or failed awaiting retry)"),
}


def _filters(viewer: Principal, query: Mapping[str, str]) -> dict[str, Any]:
    """The page's filters, read from the query: each checked as the API checks it
    (``web.params``), then trimmed, empty dropped; ``range`` is checked here
    (:func:`_selection` makes it ``since``). Bad values raise ValidationError."""
    kept = {k: (check(k, query.get(k), FILTER_CHECKS[k]) or "").strip() for k in FILTERS}
    kept = {k: v for k, v in kept.items() if v}
    check_choice("range", kept.get("range"), tuple(RANGES))
    if viewer.tenant is not None:
        kept.pop("tenant", None)  # a tenant key sees its own tenant only
    return kept


def _selection(client: Client, viewer: Principal, kept: Mapping[str, str]) -> dict[str, Any]:
    """The client's keyword arguments for the filters (state aside)."""
    since: Any = kept.get("since")
    if "range" in kept:
        since = client.now() - RANGES[kept["range"]]
    return {
        "tenant": viewer.tenant if viewer.tenant is not None else kept.get("tenant"),
        "task": kept.get("task"),
        "queue": kept.get("queue"),
        "error": kept.get("error"),
        "since": since,
        "until": kept.get("until"),
    }


def _runs_context(client: Client, viewer: Principal, query: Mapping[str, str]) -> dict[str, Any]:
    kept = _filters(viewer, query)
    after = after_id(query.get("after"))
    page = client.list_runs(
        state=run_state(kept.get("state")),
        after=after,
        limit=RUNS_PER_PAGE,
        **_selection(client, viewer, kept),
    )
    bulk_filters = {k: v for k, v in kept.items() if k != "state"}
    # The tabs' counts are the store's by-state totals of the viewer's runs (or the
    # tenant filtered to): with any narrower filter they would not be the tab's count,
    # so the tabs then show none.
    counted = set(bulk_filters) <= {"tenant"}
    by_state = (
        client.run_stats(tenant=_selection(client, viewer, kept)["tenant"]).by_state
        if counted
        else {}
    )
    tabs = [
        (
            label,
            value,
            "/runs?" + urlencode({**bulk_filters, **({"state": value} if value else {})}),
            (sum(by_state.values()) if value is None else by_state.get(value, 0))
            if counted
            else None,
        )
        for label, value in [("all", None), *((s.value, s.value) for s in RunState)]
    ]
    done = check_choice("done", query.get("done") or None, tuple(BULK))
    count: int | None = check("count", query.get("count") or None, Cursor)
    return {
        "notice": (
            f"{BULK[done][0]}: {count} runs." if done in BULK and count is not None else None
        ),
        "page": page,
        "names": client.job_names((r.job_id for r in page.items), tenant=viewer.tenant),
        "filters": kept,
        "after": after,
        "run_states": [s.value for s in RunState],
        "tabs": tabs,
        "now": client.now(),
        "ranges": list(RANGES),
        "fragment_url": "/fragments/runs?" + urlencode({**kept, **after_query(after)}),
        "first_url": "/runs?" + urlencode(kept),
        "next_url": (
            "/runs?" + urlencode({**kept, "after": page.next_cursor})
            if page.next_cursor is not None
            else None
        ),
        "retry_url": "/bulk/retry?" + urlencode(bulk_filters),
        "cancel_url": "/bulk/cancel?" + urlencode(bulk_filters),
    }


@router.get("/runs", response_model=None)
def runs(request: Request) -> Response:
    return serve_page(request, "runs.html", _runs_context, request.query_params)


@router.get("/fragments/runs", response_model=None)
def runs_fragment(request: Request) -> Response:
    return serve_page(request, "_runs.html", _runs_context, request.query_params)


# -- one run ---------------------------------------------------------------------------------


def _run_context(client: Client, viewer: Principal, run_id: str) -> dict[str, Any]:
    ident = parse_id(run_id)
    if ident is None:
        raise Missing(f"run {run_id} not found")
    history = client.run_attempts(ident, tenant=viewer.tenant)
    run = history.run
    job = client.get_job(run.job_id, tenant=viewer.tenant)
    lag = (run.started_at - run.scheduled_for) if run.started_at is not None else None
    took = (
        run.finished_at - run.started_at
        if run.finished_at is not None and run.started_at is not None
        else None
    )
    return {
        "run": run,
        "job": job,
        "lag": lag,
        "took": took,
        "now": client.now(),
        "attempts": history.attempts,
        "attempts_dropped": history.dropped,
        "ended_by": ENDED_BY,
        "ended_class": ENDED_CLASS,
    }


@router.get("/runs/{run_id}", response_model=None)
def run_page(request: Request, run_id: str) -> Response:
    return serve_page(request, "run.html", _run_context, run_id)


# -- bulk ------------------------------------------------------------------------------------


def _bulk_context(
    client: Client, viewer: Principal, action: str, query: Mapping[str, str]
) -> dict[str, Any]:
    if action not in BULK:
        raise Missing(f"there is no bulk action {action!r}")
    kept = _filters(viewer, query)
    kept.pop("state", None)
    states = [RunState.DEAD] if action == "retry" else [RunState.QUEUED, RunState.FAILED]
    selection = _selection(client, viewer, kept)
    if "range" in kept:
        # The confirmation names the instant, so the POST acts on what was counted.
        kept = {k: v for k, v in kept.items() if k != "range"}
        kept["since"] = selection["since"].isoformat()
    matching = 0
    more = False
    for state in states:
        page = client.list_runs(state=state, limit=MAX_PAGE, **selection)
        matching += len(page.items)
        more = more or page.next_cursor is not None
    verb, noun, what = BULK[action]
    return {
        "action": action,
        "verb": verb,
        "noun": noun,
        "what": what,
        "filters": kept,
        "matching": matching,
        "more": more,
        "max_count": DEFAULT_BULK,
        "back": "/runs?" + urlencode(kept),
    }


@router.get("/bulk/{action}", response_model=None)
def bulk_confirm(request: Request, action: str) -> Response:
    return serve_page(request, "bulk.html", _bulk_context, action, request.query_params)


@router.post("/bulk/{action}", response_model=None)
def bulk(
    request: Request,
    action: str,
    *,
    task: Annotated[str, Form()] = "",
    queue: Annotated[str, Form()] = "",
    tenant: Annotated[str, Form()] = "",
    error: Annotated[str, Form()] = "",
    since: Annotated[str, Form()] = "",
    until: Annotated[str, Form()] = "",
) -> Response:
    """Retry or cancel every run matching the filters, all or nothing; then the runs page
    with those filters, saying how many."""
    viewer = viewer_of(request)
    if viewer is None:
        return sign_in_first(request)
    if not same_origin(request):
        return cross_site(request, viewer)
    client = client_of(request)
    query = {
        "task": task,
        "queue": queue,
        "tenant": tenant,
        "error": error,
        "since": since,
        "until": until,
    }
    kept = {k: v.strip() for k, v in query.items() if v.strip()}
    back = "/runs?" + urlencode(kept)
    try:
        if action not in BULK:
            raise Missing(f"there is no bulk action {action!r}")
        selection = _selection(client, viewer, _filters(viewer, kept))
        command = client.retry_runs if action == "retry" else client.cancel_runs
        ids = command(max_count=DEFAULT_BULK, **selection)
    except TickworkError as exc:
        return failure(request, viewer, exc, back)
    log.info("dashboard: bulk %s of %d runs (key %s)", action, len(ids), viewer.key or "open")
    state = "queued" if action == "retry" else "cancelled"
    done = {**kept, "state": state, "done": action, "count": len(ids)}
    return RedirectResponse("/runs?" + urlencode(done), status_code=303)
