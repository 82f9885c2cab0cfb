"""Schemathesis against the app's own OpenAPI document: requests generated from it, valid
ones (positive mode) and invalid ones (negative mode), for every operation, over a real
store and with an admin key. No answer may be a 5xx.

Bounded (:data:`EXAMPLES` per operation and mode, derandomized, no deadline) so the run
stays well under a minute per backend; CI runs it with the rest of the suite.

Schemathesis's own pytest integration (``schemathesis.pytest.from_fixture``) reads a private
attribute that pytest 9 removed, so each operation gets a plain Hypothesis test here, built
from ``APIOperation.as_strategy``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from api_support import bearer, dead_run
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.schemas import OpenApiSchema

from tickwork.client import Client
from tickwork.store import Store
from tickwork.tasks.registry import Registry
from tickwork.tasks.task import Task
from tickwork.web import api
from tickwork.web.app import create_app

EXAMPLES = 25
"""Generated requests per operation and mode."""
OPERATIONS = sorted(
    f"{method} {route.path}"
    for router in api.ROUTERS
    for route in router.routes
    if isinstance(route, APIRoute)
    for method in route.methods or ()
)


@pytest.fixture
def admin_key(store: Store) -> str:
    return Client(store).create_api_key(tenant="ops", admin=True)[1]


def anything(ctx: object, **args: object) -> None:
    """A task that takes any args: generated jobs get past the args check to the store."""


@pytest.fixture
def api_schema(store: Store, admin_key: str) -> Iterator[OpenApiSchema]:
    """The app's schema, over a store that holds a cron job, a dead run and a queued run, so
    that generated ids sometimes name real rows (ids start at 1)."""
    registry = Registry()
    registry.add(Task("anything", anything))
    client = Client(store, registry)
    client.submit("http", args={"url": "https://example.com/"}, cron="*/5 * * * *")
    dead_run(client)
    client.submit("http", args={"url": "https://example.com/"})
    app = create_app(client, open_access=False)
    with TestClient(app):  # the app's startup, as a server would run it
        yield schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)


def test_every_route_is_in_the_openapi_document(api_schema: OpenApiSchema) -> None:
    operations = []
    for result in api_schema.get_all_operations():
        assert isinstance(result, Ok), result  # an operation the document cannot describe
        operations.append(result.ok())
    documented = sorted(f"{op.method.upper()} {op.path}" for op in operations)

    assert documented == OPERATIONS


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_no_generated_request_gets_a_server_error(
    api_schema: OpenApiSchema, admin_key: str, operation: str, mode: GenerationMode
) -> None:
    method, path = operation.split(" ", 1)
    strategy = api_schema[path][method].as_strategy(generation_mode=mode)

    @given(case=strategy)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,  # the same requests on every run: a failure reproduces
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def no_server_error(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(headers=bearer(admin_key), checks=[not_a_server_error])

    no_server_error()
