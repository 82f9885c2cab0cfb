"""The HTTP application: the JSON API, the dashboard, metrics and health, on one client.

::

    /api/v1/...          the JSON API (tickwork.web.api); OpenAPI at /api/v1/openapi.json
                         (as JSON only: no page that loads scripts from a CDN)
    /                    the dashboard (tickwork.web.dashboard)
    /metrics             Prometheus metrics (tickwork.web.metrics); admin key, unless open
    /healthz             200 while the process serves requests (liveness)
    /readyz              200 when the store answers (within 2 s) and its schema is
                         current, else 503

Served by ``tickwork api`` and by ``tickwork run`` (see :mod:`tickwork.cli.api`). Handlers
are plain functions: FastAPI runs them on its thread pool, since the client blocks on the
database.
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from fastapi import Depends, FastAPI, Response
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork.client import Client
from tickwork.errors import TickworkError
from tickwork.web import api, dashboard, errors
from tickwork.web.auth import Gate, Principal, get_admin
from tickwork.web.metrics import CONTENT_TYPE, Metrics, StoreCollector

log = logging.getLogger("tickwork.web")

TITLE = "tickwork"
DESCRIPTION = """\
Submit jobs, watch their runs and act on them. Every endpoint but the health checks needs an
API key (`Authorization: Bearer <key>`; create one with `tickwork keys create --tenant T`).
A tenant key sees its own tenant's jobs only; an admin key (`--admin`) sees all.

Errors are `{"error": {"code", "message", "field"?}}` with status 400 (bad input), 401 (no
or wrong key), 403 (not allowed for this key), 404 (no such id), 409 (not in this state),
413 (body over 512 KiB) or 422 (the body does not fit the schema). A 4xx changes nothing.
"""


def create_app(
    client: Client,
    *,
    open_access: bool,
    force_open: bool = False,
    secure_cookies: bool = False,
    rescues: Callable[[], int] | None = None,
) -> FastAPI:
    """The app over ``client``.

    ``open_access``: callers without a key act as an admin while no API key was ever
    created; ``force_open``: whatever keys exist (``--open``). The CLI allows either only
    on a loopback address. ``secure_cookies``: the sign-in cookie is ``Secure`` even on a
    request that came over plain http (the CLI sets it off loopback; over https it is
    ``Secure`` anyway). ``rescues``: the count of lease expirations rescued in this
    process, when a reaper runs here (``tickwork run``), for ``/metrics``.
    """
    app = TickworkAPI(
        client.registry.names(),
        title=TITLE,
        description=DESCRIPTION,
        version=_version(),
        openapi_url=f"{api.PREFIX}/openapi.json",
        # FastAPI's Swagger page loads its scripts from a CDN; tickwork serves nothing from
        # one, so the document is offered as JSON only (any OpenAPI viewer can open it).
        docs_url=None,
        redoc_url=None,
    )
    app.state.client = client
    app.state.gate = Gate(client, open_access=open_access, force_open=force_open)
    app.state.open_access = open_access or force_open
    app.state.secure_cookies = secure_cookies
    metrics = Metrics(StoreCollector(client, rescues))

    errors.install(app)
    # Outermost first: the access log sees every answer, the error net catches every bug,
    # the body limit runs before anything reads the body.
    app.add_middleware(errors.BodyLimitMiddleware)
    app.add_middleware(errors.InternalErrorMiddleware)
    app.add_middleware(AccessLogMiddleware)

    app.include_router(api.router)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    readiness = Readiness(client)

    @app.get("/readyz", include_in_schema=False)
    def readyz() -> Response:
        try:
            applied, latest = readiness.schema_version()
        except TimeoutError:
            return errors.error_response(
                503,
                "store_unavailable",
                f"the store did not answer within {READY_TIMEOUT:g} s",
                headers={"Retry-After": str(errors.RETRY_AFTER_DOWN)},
            )
        except TickworkError as exc:
            log.debug("readyz: the store does not answer: %s", exc)  # the outage is logged once
            return errors.unavailable_response(exc)
        schema = {"applied": applied, "latest": latest}
        if applied < latest:
            return JSONResponse(
                {
                    **errors.error_body(
                        "migrations_pending",
                        f"the schema is at version {applied} of {latest}: "
                        "run 'tickwork db migrate'",
                    ),
                    "schema": schema,
                },
                status_code=503,
            )
        return JSONResponse({"status": "ready", "schema": schema})

    @app.get("/metrics", include_in_schema=False)
    def metrics_endpoint(principal: Principal = Depends(get_admin)) -> Response:  # noqa: B008
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    app.include_router(dashboard.router)
    return app


READY_TIMEOUT = 2.0
"""Seconds ``/readyz`` waits for the store before answering 503: a probe must get an answer
while the database is black-holed, not when TCP gives up."""


class Readiness:
    """The store's schema version for ``/readyz``, read with a deadline.

    The read runs in a thread of its own; a probe waits for it at most READY_TIMEOUT. While
    one read is in flight every probe waits for that one, so a hung database costs one
    stuck thread, not one per probe.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._pending: Future[tuple[int, int]] | None = None

    def schema_version(self) -> tuple[int, int]:
        """(applied, latest); raises TimeoutError, or what the read raised."""
        with self._lock:
            pending = self._pending
            if pending is None or pending.done():
                pending = self._pending = Future()
                threading.Thread(
                    target=self._read, args=(pending,), name="readyz", daemon=True
                ).start()
        return pending.result(timeout=READY_TIMEOUT)

    def _read(self, into: Future[tuple[int, int]]) -> None:
        try:
            into.set_result(self.client.schema_version())
        except BaseException as exc:
            into.set_exception(exc)


class TickworkAPI(FastAPI):
    """FastAPI whose OpenAPI document names the tasks this API accepts (its registry's:
    the built-ins and the ``--app`` module's), as an enum of ``JobIn.task``."""

    def __init__(self, tasks: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tasks = tasks

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            document = super().openapi()
            task = document["components"]["schemas"]["JobIn"]["properties"]["task"]
            task["enum"] = list(self.tasks)
            self.openapi_schema = document
        return self.openapi_schema


class AccessLogMiddleware:
    """One ``request`` line per answer: method, path, status, milliseconds, key prefix, and
    the query as it came (percent-encoded), when there is one.

    INFO for commands and errors; DEBUG for successful reads (the dashboard polls). The
    path is decoded (``%0A`` is a line feed in it): the log formatters escape every control
    character of a line (:mod:`tickwork.cli.serve`), so no value here can start a line.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        answered: list[int] = []

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered.append(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        finally:
            status = answered[0] if answered else 500
            method = scope.get("method", "?")
            level = logging.DEBUG if method in ("GET", "HEAD") and status < 400 else logging.INFO
            if log.isEnabledFor(level):
                principal = _principal(scope)
                query = bytes(scope.get("query_string") or b"").decode("latin-1")
                log.log(
                    level,
                    "request method=%s path=%s status=%d ms=%.1f key=%s%s",
                    method,
                    scope.get("path", "?"),
                    status,
                    (time.perf_counter() - began) * 1000,
                    (principal.key or "open") if principal else "-",
                    f" query={query}" if query else "",
                )


def _version() -> str:
    try:
        return importlib.metadata.version("tickwork")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "0+unknown"


def _principal(scope: Scope) -> Principal | None:
    state: Any = scope.get("state") or {}
    principal = state.get("principal") if isinstance(state, dict) else None
    return principal if isinstance(principal, Principal) else None
