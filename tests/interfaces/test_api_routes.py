"""The API's routes as a caller sees them: the operations of the OpenAPI document, and which
route answers a path that two routes match (``/runs/bulk/retry`` is also a
``/runs/{run_id}/retry``). Moving endpoints between modules must change neither."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from tickwork.client import Client
from tickwork.web.app import create_app

OPERATIONS = {
    ("POST", "/api/v1/jobs"),
    ("GET", "/api/v1/jobs"),
    ("POST", "/api/v1/jobs/batch"),
    ("GET", "/api/v1/jobs/{job_id}"),
    ("POST", "/api/v1/jobs/{job_id}/cancel"),
    ("POST", "/api/v1/jobs/{job_id}/pause"),
    ("POST", "/api/v1/jobs/{job_id}/resume"),
    ("POST", "/api/v1/jobs/{job_id}/trigger"),
    ("GET", "/api/v1/jobs/{job_id}/explain"),
    ("GET", "/api/v1/jobs/{job_id}/ledger"),
    ("GET", "/api/v1/runs"),
    ("POST", "/api/v1/runs/bulk/retry"),
    ("POST", "/api/v1/runs/bulk/cancel"),
    ("GET", "/api/v1/runs/{run_id}"),
    ("POST", "/api/v1/runs/{run_id}/retry"),
    ("POST", "/api/v1/runs/{run_id}/cancel"),
    ("GET", "/api/v1/dead"),
    ("GET", "/api/v1/stats"),
    ("GET", "/api/v1/queues"),
    ("GET", "/api/v1/minutes"),
    ("GET", "/api/v1/cluster"),
    ("GET", "/api/v1/tenants"),
    ("GET", "/api/v1/tenants/{tenant}"),
    ("PUT", "/api/v1/tenants/{tenant}"),
    ("PATCH", "/api/v1/tenants/{tenant}"),
    ("GET", "/api/v1/calendars"),
    ("GET", "/api/v1/calendars/{name}"),
    ("PUT", "/api/v1/calendars/{name}"),
    ("PATCH", "/api/v1/calendars/{name}"),
    ("DELETE", "/api/v1/calendars/{name}"),
}
"""Every operation of the document, as released before the API became a package."""
SAMPLES = {"job_id": "1", "run_id": "1", "tenant": "acme", "name": "cal"}
"""A value for each path parameter: one its route accepts and no literal segment equals."""

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])  # routes do not vary by store


@pytest.fixture
def document(web: TestClient) -> dict[str, Any]:
    answer = web.get("/api/v1/openapi.json")
    assert answer.status_code == 200
    document: dict[str, Any] = answer.json()
    return document


class RouteSeen:
    """The app, noting the route that answered the last request (the router writes it into
    the request's scope, which every middleware of the app passes on as it got it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.route: APIRoute | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            route = scope.get("route")
            self.route = route if isinstance(route, APIRoute) else None


@pytest.fixture
def seen(client: Client) -> Iterator[tuple[TestClient, RouteSeen]]:
    app = RouteSeen(create_app(client, open_access=False))
    with TestClient(app) as web:
        yield web, app


def test_the_document_has_every_operation_and_no_other(document: dict[str, Any]) -> None:
    found = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}

    assert found == OPERATIONS


def test_each_operation_is_answered_by_its_own_route(
    seen: tuple[TestClient, RouteSeen],
) -> None:
    web, app = seen
    for method, path in sorted(OPERATIONS):
        concrete = re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m.group(1)], path)
        web.request(method, concrete)  # 401 without a key: the route is chosen by then

        assert app.route is not None, (method, concrete)
        assert (method, app.route.path) == (method, path), concrete
        assert method in (app.route.methods or set())
