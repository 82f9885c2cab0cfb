"""The dashboard's rendering: its templates and their filters, the error page and the
static files. It imports no other dashboard module (:mod:`.session` holds the router).

Every ``{{ ... }}`` goes through :func:`_shown` (control and bidi characters as codes), and
every page carries :data:`SECURITY_HEADERS` (see :mod:`tickwork.web.dashboard`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from datetime import datetime
from importlib import resources
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from tickwork import cron
from tickwork.errors import StoreTimeout, TickworkError
from tickwork.job import (
    Run,
    show_controls,
    shown_json,
    shown_object,
)
from tickwork.records import error_head, format_rate
from tickwork.timetext import format_seconds
from tickwork.web.auth import Principal
from tickwork.web.errors import status_of, unavailable

log = logging.getLogger("tickwork.web")

REFRESH_SECONDS = 5
"""How often htmx re-fetches the live part of a page."""
TAIL_LINES = 30
TAIL_CHARS = 4000
"""An output tail shows at most this many of the last lines and characters of a value."""
OUTPUT_TASKS = frozenset({"shell", "http"})
"""The built-in tasks whose result is output to read (stdout and stderr, a response body):
a job page shows tails of these only; any other task's result is on its run's page."""
ERROR_LINES = 6
"""The dead-letter list shows this many last lines of each error."""
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
STATIC_FILES = {
    "htmx.min.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
"""The only files ``/static/`` serves (no path from the request reaches the file system)."""
STATIC_MAX_AGE = 86_400
"""Seconds a browser may cache a static file; its URL carries a content hash anyway."""


# -- static files --------------------------------------------------------------------------


def _load_static() -> dict[str, tuple[bytes, str]]:
    folder = resources.files("tickwork.web") / "static"
    files = {}
    for name in STATIC_FILES:
        body = (folder / name).read_bytes()
        files[name] = (body, hashlib.sha256(body).hexdigest()[:12])
    return files


_STATIC = _load_static()


def static_url(name: str) -> str:
    """``/static/<name>?v=<content hash>``: a new file is a new URL, so caches never serve
    a stale one."""
    return f"/static/{name}?v={_STATIC[name][1]}"


def static(name: str) -> Response:
    """``GET /static/{name}``: one of :data:`STATIC_FILES` (routed in :mod:`.session`)."""
    if name not in _STATIC:
        return Response("not found\n", status_code=404, media_type="text/plain")
    body, version = _STATIC[name]
    return Response(
        body,
        media_type=STATIC_FILES[name],
        headers={
            "Cache-Control": f"public, max-age={STATIC_MAX_AGE}",
            "ETag": f'"{version}"',
            "X-Content-Type-Options": "nosniff",
        },
    )


# -- templates -----------------------------------------------------------------------------


def _stamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _relative(value: datetime, now: datetime) -> str:
    seconds = (value - now).total_seconds()
    span = abs(seconds)
    if span < 1:
        return "just now"
    if span < 120:
        text = f"{span:.0f} s"
    elif span < 7200:
        text = f"{span / 60:.0f} min"
    elif span < 172_800:
        text = f"{span / 3600:.0f} h"
    else:
        text = f"{span / 86_400:.0f} days"
    return f"in {text}" if seconds > 0 else f"{text} ago"


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 10_000:
        return f"{value / 1000:.0f} s"
    if value >= 1000:
        return f"{value / 1000:.1f} s"
    return f"{value:.0f} ms"


def _seconds(value: float) -> str:
    return format_seconds(value) if value else "0 s"


def _in_zone(value: datetime, zone: str) -> str:
    return value.astimezone(cron.zone(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def _last_lines(text: str, lines: int) -> str:
    kept = text.rstrip("\n").splitlines()
    return "\n".join((["…"] if len(kept) > lines else []) + kept[-lines:])


def _tail(text: str) -> str:
    clipped = text if len(text) <= TAIL_CHARS else "…" + text[-TAIL_CHARS:]
    return _last_lines(clipped, TAIL_LINES)


def _tails(run: Run) -> list[tuple[str, str]]:
    """What a run's result says, for reading: each text field's tail (a shell command's
    stdout and stderr, an http request's body), the other fields as one JSON line; nothing
    for a task that is no :data:`OUTPUT_TASKS` (its result is data, not output)."""
    if not run.result or run.task not in OUTPUT_TASKS:
        return []
    result = shown_object(run.result)
    texts = [(k, v) for k, v in result.items() if isinstance(v, str) and v.strip()]
    rest = {k: v for k, v in result.items() if not isinstance(v, str)}
    shown = [(f"{k} (tail)", _tail(v)) for k, v in texts]
    if rest:
        shown.insert(0, ("result", _tail(json.dumps(rest, sort_keys=True, default=str))))
    return shown


def _pretty_json(value: Any) -> str:
    return json.dumps(shown_json(value), indent=2, sort_keys=True, ensure_ascii=False)


def _shown(value: Any) -> Any:
    """What every ``{{ ... }}`` prints (the environment's ``finalize``, applied before
    escaping): text with its control and bidi characters shown as codes (``[U+202E]``).
    Markup was made by a template, whose own expressions went through here already."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return show_controls(value)
    return value


def tenant_path(tenant: str) -> str:
    """A tenant's page: its name quoted whole, so a ``/`` or ``?`` in it stays in the name."""
    return "/tenants/" + quote(tenant, safe="")


def capitalize_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("tickwork.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_shown,
    )
    env.filters.update(
        stamp=_stamp,
        relative=_relative,
        ms=_ms,
        seconds=_seconds,
        in_zone=_in_zone,
        last_lines=_last_lines,
        error_head=error_head,
        tails=_tails,
        capitalize_first=capitalize_first,
        tojson_pretty=_pretty_json,
        rate=format_rate,
        tenant_path=tenant_path,
    )
    env.globals.update(static=static_url, refresh_seconds=REFRESH_SECONDS, error_lines=ERROR_LINES)
    return env


_ENV = _environment()


def render(
    request: Request,
    template: str,
    viewer: Principal | None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    section = "/" + request.url.path.strip("/").split("/")[0]
    body = _ENV.get_template(template).render(
        viewer=viewer,
        open_access=viewer is not None and is_open(viewer),
        section="/" if section == "/fragments" else section,
        show_tenant=viewer is not None and viewer.tenant is None,
        **context,
    )
    return HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)


def error_page(
    request: Request,
    viewer: Principal | None,
    status: int,
    message: str,
    back: str | None = None,
    *,
    heading: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    headings = {
        400: "Bad request",
        401: "Not signed in",
        403: "Not allowed",
        404: "Not found",
        409: "Not possible now",
        503: "The database is unavailable",
    }
    page = render(
        request,
        "error.html",
        viewer,
        status,
        status=status,
        heading=heading or headings.get(status, "Something went wrong"),
        message=message,
        back=back,
    )
    page.headers.update(headers or {})
    return page


def failure(request: Request, viewer: Principal, exc: TickworkError, back: str = "/") -> Response:
    """The page for a failed client call: the message for the caller's mistakes (400, 404,
    409), a generic one for the store's (logged in full)."""
    status = status_of(exc)
    if status == 503:
        # DEBUG, as the API's: the outage is logged once by the store's health.
        log.debug("%s %s: store unavailable: %s", request.method, request.url.path, exc)
        message, seconds = unavailable(exc)
        return error_page(
            request,
            viewer,
            503,
            capitalize_first(message) + ".",
            back,
            heading="The database is busy" if isinstance(exc, StoreTimeout) else None,
            headers={"Retry-After": str(seconds)},
        )
    if status >= 500:
        log.error("%s %s: %s", request.method, request.url.path, type(exc).__name__, exc_info=exc)
        return error_page(request, viewer, status, "Internal error; see the server log.", back)
    return error_page(request, viewer, status, capitalize_first(str(exc)) + ".", back)


def is_open(viewer: Principal) -> bool:
    """Whether the viewer came in without a key (the open API: nobody to sign out)."""
    return viewer.key is None
