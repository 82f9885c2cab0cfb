"""The dashboard's time axis and queues: ``/activity`` (runs finished per minute by
outcome, start lag p50/p99 and queue depth over 1 h, 6 h or 24 h, as server-rendered SVG
from the store's per-minute rollup) and ``/queues`` (each queue's due backlog, running
count, oldest due run and the workers consuming it).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response

from tickwork.client import Client
from tickwork.web.auth import Principal
from tickwork.web.dashboard import charts
from tickwork.web.dashboard.session import router
from tickwork.web.dashboard.view import serve_page
from tickwork.web.params import NameText, check, check_choice


def _activity_context(
    client: Client, viewer: Principal, window: str | None, queue: str | None
) -> dict[str, Any]:
    window = check_choice("window", window or None, tuple(charts.WINDOWS)) or charts.DEFAULT_WINDOW
    queue = (check("queue", queue, NameText) or "").strip() or None
    span, _ = charts.WINDOWS[window]
    now, minutes = client.run_minutes(span, tenant=viewer.tenant, queue=queue)
    found = charts.buckets(now, minutes, window)
    return {
        "window": window,
        "windows": list(charts.WINDOWS),
        "queue": queue,
        "buckets": found,
        "outcomes_chart": charts.outcomes_chart(found),
        "lag_chart": charts.lag_chart(found),
        "depth_chart": charts.depth_chart(found),
        "totals": {
            "succeeded": sum(b.succeeded for b in found),
            "failed": sum(b.failed for b in found),
            "dead": sum(b.dead for b in found),
        },
        "now": now,
    }


@router.get("/activity", response_model=None)
def activity(request: Request, window: str | None = None, queue: str | None = None) -> Response:
    return serve_page(request, "activity.html", _activity_context, window, queue)


@router.get("/fragments/activity", response_model=None)
def activity_fragment(
    request: Request, window: str | None = None, queue: str | None = None
) -> Response:
    return serve_page(request, "_activity.html", _activity_context, window, queue)


def _queues_context(client: Client, viewer: Principal) -> dict[str, Any]:
    return {"queues": client.queues(tenant=viewer.tenant), "now": client.now()}


@router.get("/queues", response_model=None)
def queues(request: Request) -> Response:
    return serve_page(request, "queues.html", _queues_context)


@router.get("/fragments/queues", response_model=None)
def queues_fragment(request: Request) -> Response:
    return serve_page(request, "_queues.html", _queues_context)
