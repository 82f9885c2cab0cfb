"""The HTTP JSON API under ``/api/v1``: a thin adapter over :class:`~tickwork.client.Client`.

Every endpoint authenticates the caller (:mod:`tickwork.web.auth`), passes its tenant to
every client call (``None`` for an admin), and shapes records with
:func:`tickwork.records.to_json` (times ISO-8601 UTC, durations in seconds), as the CLI's
``--json`` does. Errors are the envelope of :mod:`tickwork.web.errors`; a 4xx writes
nothing. The OpenAPI document is at ``/api/v1/openapi.json`` (as JSON only: see
:func:`tickwork.web.app.create_app`).

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

The package has one module per resource, each with its own router (built by
:func:`.auth.resource_router`): :mod:`.jobs`, :mod:`.runs`, :mod:`.activity` (stats,
queues, the per-minute rollup), :mod:`.cluster`, :mod:`.tenants` and :mod:`.calendars`;
beside them what they share: :mod:`.auth` (the caller, the tenant a listing covers),
:mod:`.errors` (the error answers the document shows) and :mod:`.fields`. A new resource
is a new module, its router added to :data:`ROUTERS`.

Routes are matched in the order of :data:`ROUTERS`, and within a module in the order they
are written: of two routes that match one path (``/runs/bulk/retry`` and
``/runs/{run_id}/retry``), the first takes it. ``tests/interfaces/test_api_routes.py``
checks that each route answers its own path.
"""

from __future__ import annotations

from fastapi import APIRouter

from tickwork.web.api import activity, calendars, cluster, jobs, runs, tenants
from tickwork.web.api.auth import PREFIX

__all__ = ["PREFIX", "ROUTERS", "router"]

ROUTERS = (
    jobs.router,
    runs.router,
    activity.router,
    cluster.router,
    tenants.router,
    calendars.router,
)
"""Each resource's router, in the order their routes are matched."""

router = APIRouter()
"""The JSON API: every resource's routes, under :data:`PREFIX`."""
for resource in ROUTERS:
    router.include_router(resource)
