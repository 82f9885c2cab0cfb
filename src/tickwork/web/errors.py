"""Errors over HTTP: one JSON envelope for every failure, and the body-size limit.

Every error response, whatever raised it, has the body::

    {"error": {"code": "invalid_cron", "message": "invalid cron expression ...", "field": "cron"}}

``field`` is present when one input is to blame; in a batch (``POST /jobs/batch``) it is
the path to it (``jobs.3.schedule.cron``) and ``index`` (3) is the position of the job at
fault. The status says what kind of failure it is:

====  ==========================  ===========================================================
400   ``ValidationError``         bad input the domain rejected (``code`` from its class:
                                  ``invalid_cron``, ``invalid_timezone``, ``unknown_task``,
                                  ``invalid_args``, ``invalid_schedule``, ``validation_error``)
      ``invalid_json``            the body is not JSON
401   ``unauthorized``            no key, or a wrong, malformed or revoked one
403   ``forbidden``               a valid key that may not do this (a tenant key on an
                                  admin-only endpoint, a ``shell`` task, another tenant)
404   ``*_not_found``             no such job or run, *or one of another tenant* (the same
                                  answer, so ids do not leak across tenants); unknown path
405   ``method_not_allowed``
409   ``invalid_transition``      the row exists but its state forbids the change
413   ``body_too_large``          more than :data:`MAX_BODY_BYTES`
415   ``unsupported_media_type``  a body without ``Content-Type: application/json``
422   ``unprocessable``           the JSON does not fit the request's schema (FastAPI's
                                  validation: a wrong type, a missing or unknown field)
500   ``internal_error``          a bug: logged in full with its traceback, answered
                                  generically (the message could hold a password or a query)
503   ``store_unavailable``       the store cannot serve the call now: retry after
                                  ``Retry-After`` seconds. The message says which: the store
                                  *did not answer in time* (every connection busy, a
                                  statement or lock timeout: load, see
                                  :class:`~tickwork.errors.StoreTimeout`) or the database
                                  *cannot be reached* (an outage)
====  ==========================  ===========================================================

Nothing is written by a request that gets a 4xx: every check happens before the store is
called (see :mod:`tickwork.client`). And a request that wrote never gets a 5xx for its
answer: the answer is built by :func:`tickwork.records.to_json`, which cannot fail on what
a row holds.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork.errors import (
    InvalidTransition,
    NotFound,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
    TickworkError,
    ValidationError,
)
from tickwork.job import MAX_ARGS_BYTES

log = logging.getLogger("tickwork.web")

MAX_BODY_BYTES = 2 * MAX_ARGS_BYTES
"""512 KiB: a request body may hold args at their 256 KiB limit, JSON-escaped, and the rest."""
MAX_BATCH_BODY_BYTES = 16 * 1024 * 1024
"""16 MiB: a ``POST /jobs/batch`` body (up to 1,000 jobs, 16 KiB each on average)."""
BATCH_PATH = "/api/v1/jobs/batch"
RETRY_AFTER_BUSY = 2
"""Seconds a 503 asks a caller to wait when the store was too busy to answer in time."""
RETRY_AFTER_DOWN = 5
"""Seconds a 503 asks a caller to wait when the database cannot be reached."""

JSON_API_PATHS = "/api/"
"""Where request bodies are JSON (the dashboard's forms post form data elsewhere)."""
_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "unprocessable",
    500: "internal_error",
    503: "unavailable",
}


class ApiError(Exception):
    """An HTTP failure raised by the web layer itself (auth, permissions, limits)."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, field: str | None = None, index: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.index = index


class Unauthorized(ApiError):
    status = 401
    code = "unauthorized"


class Forbidden(ApiError):
    status = 403
    code = "forbidden"


class UnsupportedMediaType(ApiError):
    status = 415
    code = "unsupported_media_type"

    def __init__(self) -> None:
        super().__init__(
            "send the body as JSON, with the header Content-Type: application/json",
            field="body",
        )


class BodyTooLarge(StarletteHTTPException):
    """A request body past its limit (413), raised by the ``receive`` of
    :class:`BodyLimitMiddleware` as the body is read; answered as the envelope."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, too_large(limit), headers={"Connection": "close"})
        self.limit = limit


def too_large(limit: int) -> str:
    return (
        f"the request body is larger than {limit} bytes "
        f"(job args are limited to {MAX_ARGS_BYTES} bytes)"
    )


def error_body(
    code: str, message: str, field: str | None = None, index: int | None = None
) -> dict[str, Any]:
    """The envelope every error response carries."""
    error: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        error["field"] = field
    if index is not None:
        error["index"] = index
    return {"error": error}


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    index: int | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(code, message, field, index), status_code=status, headers=headers
    )


def error_code(exc: TickworkError) -> str:
    """``InvalidCron`` -> ``invalid_cron``: the class names the failure precisely."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).lower()


def status_of(exc: TickworkError) -> int:
    """The HTTP status for a TickworkError (see the table above)."""
    if isinstance(exc, ValidationError):
        return 400
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, InvalidTransition):
        return 409
    if isinstance(exc, StoreUnavailable):
        return 503
    return 500


def unavailable(exc: BaseException | None) -> tuple[str, int]:
    """What a 503 says for ``exc`` (a StoreUnavailable), and its ``Retry-After`` seconds:
    that the store did not answer in time (a StoreTimeout: load), or that the database
    cannot be reached. The driver's own message (a host, a query) stays in the log."""
    if isinstance(exc, StoreTimeout):
        return (
            "the store did not answer in time: it is overloaded (every connection busy, or "
            "a statement or lock timeout); try again shortly",
            RETRY_AFTER_BUSY,
        )
    return "the database cannot be reached; try again shortly", RETRY_AFTER_DOWN


def unavailable_response(exc: BaseException | None) -> JSONResponse:
    """The 503 ``store_unavailable`` answer for ``exc``, with its ``Retry-After``."""
    message, seconds = unavailable(exc)
    return error_response(503, "store_unavailable", message, headers={"Retry-After": str(seconds)})


def install(app: FastAPI) -> None:
    """Register the handlers that turn every failure into the envelope."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(TickworkError, _tickwork_error)
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(BodyTooLarge, _body_too_large)


async def _body_too_large(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BodyTooLarge)
    return body_too_large(exc.limit)


def body_too_large(limit: int) -> JSONResponse:
    """The 413 answer; the connection closes after it (the rest of the body is not read)."""
    return error_response(
        413, "body_too_large", too_large(limit), "body", headers={"Connection": "close"}
    )


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    return error_response(exc.status, exc.code, exc.message, exc.field, headers, index=exc.index)


async def _tickwork_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TickworkError)
    status = status_of(exc)
    if status == 503:
        # DEBUG: the outage is logged once by the store's health, and each answer shows in
        # the access log (status 503); a dashboard polling through an outage adds no WARNING.
        log.debug("%s %s: store unavailable: %s", request.method, request.url.path, exc)
        return unavailable_response(exc)
    if status == 500:
        # A store failure or a fencing error is not the caller's doing: log it whole,
        # answer without details (a driver message can hold a host name or a query).
        kind = "store error" if isinstance(exc, StoreError) else "unexpected error"
        log.error("%s %s: %s", request.method, request.url.path, kind, exc_info=exc)
        return error_response(500, "internal_error", "internal error; see the server log")
    field = exc.field if isinstance(exc, ValidationError) else None
    index = exc.index if isinstance(exc, ValidationError) else None
    if index is not None:  # only a batch sets it: the field is the path into the body
        field = f"jobs.{index}.{field}" if field else f"jobs.{index}"
    return error_response(status, error_code(exc), str(exc), field, index=index)


async def _request_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if not errors:
        return error_response(422, "unprocessable", "the request does not fit its schema")
    first = errors[0]
    kind = str(first.get("type", ""))
    loc = tuple(first.get("loc", ()))
    field = field_name(loc)
    if (
        loc[:1] == ("body",)
        and request.url.path.startswith(JSON_API_PATHS)
        and not is_json(request.headers.get("content-type"))
    ):
        # FastAPI reads a body as JSON only when it says so: a form cannot post JSON from
        # another site (CSRF) when the content type has to be application/json.
        return await _api_error(request, UnsupportedMediaType())
    if kind == "json_invalid":
        detail = (first.get("ctx") or {}).get("error", "")
        message = f"the body is not valid JSON{': ' + str(detail) if detail else ''}"
        return error_response(400, "invalid_json", message, "body")
    message = str(first.get("msg", "invalid value"))
    if loc == ("body",) and kind in ("model_attributes_type", "dict_type"):
        message = "the body must be a JSON object"
    elif kind == "missing" and field:
        message = f"{field} is required"
    elif kind == "extra_forbidden" and field:
        message = f"{field} is not a known field"
    elif field:
        message = f"{field}: {message}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    index = loc[2] if loc[:2] == ("body", "jobs") and len(loc) > 2 else None
    if isinstance(index, int):
        message = f"job {index} of the batch: {message}"
    else:
        index = None
    return error_response(422, "unprocessable", message, field or None, index=index)


def is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def field_name(loc: Sequence[Any]) -> str:
    """``("body", "schedule", "cron")`` -> ``"schedule.cron"``; ``("query", "limit")`` ->
    ``"limit"``; the whole body -> ``"body"``."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        where, rest = parts[0], parts[1:]
        if not rest:
            return where
        return ".".join(rest)
    return ".".join(parts)


async def _http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _STATUS_CODES.get(exc.status_code, "error")
    detail = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    if exc.status_code == 400 and detail == "There was an error parsing the body":
        # FastAPI's answer when the JSON parser itself fails (nesting too deep ...).
        return error_response(
            400, "invalid_json", "the body could not be parsed as JSON (nested too deeply?)", "body"
        )
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no such endpoint: {request.method} {request.url.path}"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    return error_response(exc.status_code, code, detail, headers=exc.headers)


class BodyLimitMiddleware:
    """Refuse a request body over ``limit`` bytes with 413, reading no more than the limit.

    A declared ``Content-Length`` over the limit is refused without reading a byte. Any
    other body is counted as the app reads it (the ``receive`` handed on raises
    :class:`BodyTooLarge` once the count passes the limit), so a chunked body is refused as
    soon as it passes, and nothing here holds a byte of it: a body is read only by the
    route that takes one, once it knows the caller (:class:`~tickwork.web.auth.CallerFirst`),
    and a request refused before that (401, 403) is answered with its body unread.
    """

    def __init__(
        self,
        app: ASGIApp,
        limit: int = MAX_BODY_BYTES,
        limits: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.limits = {BATCH_PATH: MAX_BATCH_BODY_BYTES} if limits is None else dict(limits)
        """Larger limits by exact path (the batch submit)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.get(scope.get("path", ""), self.limit)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await body_too_large(limit)(scope, receive, send)
            return
        size = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            # The app's exception handlers answer it; this is for a read outside them.
            if started:
                raise
            await body_too_large(limit)(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class InternalErrorMiddleware:
    """The last resort: a bug becomes a logged traceback and a generic 500 envelope.

    Starlette's own error middleware re-raises after answering (so servers log the error
    twice and test clients raise); this one answers and stops there.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            log.exception("%s %s: unexpected error", scope.get("method"), scope.get("path"))
            if started:
                raise
            response = error_response(500, "internal_error", "internal error; see the server log")
            await response(scope, receive, send)
