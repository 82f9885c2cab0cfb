"""The dashboard: server-rendered pages (Jinja2) refreshed live by vendored htmx.

A thin adapter over :class:`~tickwork.client.Client`, like the CLI and the JSON API: every
read and command is one client call with ``tenant=viewer.tenant``, so a tenant key sees
its own tenant only, and another tenant's job or run is the same 404 page as a missing one.

Pages
-----

====================  =========================================================================
``/``                 runs by state, due backlog, trigger lag p50/p99, the leader and its epoch
``/jobs``             jobs, filtered by state and task, newest first, cursor pagination
``/jobs/{id}``        a job: state and commands, runs (attempts, errors, output tails), the slot
                      ledger, its schedule in words, next fire times, ``explain`` for a slot
``/dead``             the dead-letter list, with a Retry button per run
``/cluster``          the leader lease and every node (admin keys only: 403 page otherwise)
``/login``            the sign-in form; ``/logout`` signs out
====================  =========================================================================

A completed job has no slot left; its badge says how its latest run ended ("completed ·
run dead", coloured as a dead run), since "completed" alone does not. Completed and
cancelled jobs offer no Run now and no Cancel job, and those POSTs are refused (409);
an unfinished run has its own Cancel button.

Every page renders completely on the server and reads without JavaScript. With it, htmx
re-fetches the live part of each page every :data:`REFRESH_SECONDS` from a fragment
endpoint (``/fragments/overview`` ...), which renders the same template the page includes.

Sign-in
-------

The dashboard takes the API's keys (:mod:`tickwork.web.auth`): a bearer header works, and
for a browser ``POST /login`` checks the key and starts a session, whose token (never the
key) goes in the ``tickwork_session`` cookie (http-only, ``SameSite=Lax``; ``Secure`` over
https, and always when the server listens beyond loopback, where a sign-in over plain http
is refused with the reason, since the browser would drop the cookie). ``POST /logout``
ends the session in the store, so a copy of the cookie is worth nothing afterwards;
revoking the key ends its sessions too. A page without a valid credential redirects to
``/login?next=<page>``; a fragment answers 401 with ``HX-Redirect`` so htmx leaves the page
for the form. On an open API (loopback, no key ever created) no sign-in is needed.

Cross-site requests
-------------------

Every POST (retry, pause, resume, trigger, cancel, sign-in and sign-out) must come from a
page of this origin: its ``Origin`` header, or ``Referer`` when a browser sends no
``Origin``, must name the host the request was sent to (``Host``, or ``X-Forwarded-Host``
behind a proxy); otherwise the answer is a 403 page and nothing changes. Requests that
authenticate with a bearer header are exempt: a browser never attaches one on its own.

Why this and not a CSRF token: the ``SameSite=Lax`` cookie already keeps other *sites*
from posting with the key, but not sibling hosts of the same site (``evil.example.com``
against ``tickwork.example.com``), not old browsers, and not the open API, which has no
cookie at all: any web page could otherwise post ``/runs/1/retry`` to ``127.0.0.1``. Every
browser in use sends ``Origin`` on a POST, and a cross-origin page can forge neither it
nor ``Referer``, so the header check closes all of these with no server-side state, no
token threaded through every form and htmx request, and no page that breaks when it is
left open past a token's lifetime. (Go 1.25's ``http.CrossOriginProtection`` rests on the
same headers.) The check is :func:`tickwork.web.auth.command_allowed`, the JSON API's,
with ``require_page``: a POST that names no page at all is refused too, since every
browser names the page a form was posted from. Hosts in ``Origin``, ``Referer`` and
``Host`` are all read by one strict parser, :func:`tickwork.web.auth.parse_authority`.

On the open API an anonymous viewer is served only when the request is addressed to a
loopback host, as in the JSON API: a page of ``evil.example`` whose name was made to
resolve to 127.0.0.1 (DNS rebinding) gets the sign-in form, not the jobs.

The pages also send a Content-Security-Policy that allows scripts and styles from this
origin only (htmx runs with ``allowEval`` off and injects no styles) and forbids framing,
so a Retry button cannot be clickjacked.

User text
---------

Everything a user or a handler wrote (names, args, errors, output) is escaped, and shown,
not obeyed: a bidirectional control (U+202A to U+202E, U+2066 to U+2069) or another
control character is printed as its code, ``[U+202E]``, so a name cannot reverse the text
around it or hide what it says (:func:`_shown`, applied to every ``{{ ... }}``). Names in
running text are also isolated (``<bdi>``), so a right-to-left name cannot reorder the words
beside it. Submit refuses those controls in names (:func:`tickwork.job.check_label`); the
display does not rely on that, since older rows, args and errors may hold them.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from importlib import resources
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from tickwork import cron
from tickwork.auth import SESSION_LIFETIME
from tickwork.client import Client, job_state
from tickwork.errors import NotFound, TickworkError, ValidationError
from tickwork.job import (
    Job,
    JobState,
    Run,
    RunState,
    show_controls,
    shown_json,
    shown_object,
)
from tickwork.records import SlotFate
from tickwork.schedule import Cron, format_seconds
from tickwork.stats import percentile
from tickwork.web.auth import (
    COOKIE_NAME,
    Gate,
    Principal,
    Source,
    addressed_to_loopback,
    command_allowed,
    request_source,
)
from tickwork.web.errors import Unauthorized, status_of

log = logging.getLogger("tickwork.web")

router = APIRouter(include_in_schema=False)

REFRESH_SECONDS = 5
"""How often htmx re-fetches the live part of a page."""
JOBS_PER_PAGE = 50
DEAD_PER_PAGE = 50
RUNS_PER_JOB = 50
"""Runs shown on a job's page, newest first."""
LEDGER_ROWS = 50
FIRE_TIMES = 5
TAIL_LINES = 30
TAIL_CHARS = 4000
"""An output tail shows at most this many of the last lines and characters of a value."""
ERROR_LINES = 6
"""The dead-letter list shows this many last lines of each error."""
LATEST_RUNS = 10
"""Runs the overview lists, newest first."""

MAX_NEXT = 2000
"""The longest ``next`` (where a form returns to) that is followed; longer ones go home."""
NOT_RETURNED_TO = ("/fragments/", "/static/", "/login", "/logout")
"""GET routes that are no page to return to after signing in."""
FATE_HELP = {
    SlotFate.MISFIRE: "missed by more than the misfire grace; the misfire policy skipped it",
    SlotFate.COALESCED: "missed, and folded into one run by misfire policy 'once'",
    SlotFate.OVERLAP: "the previous run was unfinished and the overlap policy is 'forbid'",
    SlotFate.REPLACED: "a later slot of the same trigger replaced it (overlap 'replace')",
    SlotFate.PAUSED: "fell while the job was paused",
    SlotFate.CANCELLED: "fell after the job was cancelled",
}
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


@router.get("/static/{name}")
def static(name: str) -> Response:
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
    stdout and stderr, an http request's body), the other fields as one JSON line."""
    if not run.result:
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


def _capitalize_first(text: str) -> str:
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
        tails=_tails,
        capitalize_first=_capitalize_first,
        tojson_pretty=_pretty_json,
    )
    env.globals.update(static=static_url, refresh_seconds=REFRESH_SECONDS, error_lines=ERROR_LINES)
    return env


_ENV = _environment()


def _render(
    request: Request,
    template: str,
    viewer: Principal | None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    section = "/" + request.url.path.strip("/").split("/")[0]
    body = _ENV.get_template(template).render(
        viewer=viewer,
        open_access=viewer is not None and _is_open(viewer),
        section="/" if section == "/fragments" else section,
        show_tenant=viewer is not None and viewer.tenant is None,
        **context,
    )
    return HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)


def _error_page(
    request: Request, viewer: Principal | None, status: int, message: str, back: str | None = None
) -> HTMLResponse:
    headings = {
        400: "Bad request",
        401: "Not signed in",
        403: "Not allowed",
        404: "Not found",
        409: "Not possible now",
        503: "The database is unavailable",
    }
    return _render(
        request,
        "error.html",
        viewer,
        status,
        status=status,
        heading=headings.get(status, "Something went wrong"),
        message=message,
        back=back,
    )


def _failure(request: Request, viewer: Principal, exc: TickworkError, back: str = "/") -> Response:
    """The page for a failed client call: the message for the caller's mistakes (400, 404,
    409), a generic one for the store's (logged in full)."""
    status = status_of(exc)
    if status >= 500:
        log.error("%s %s: %s", request.method, request.url.path, type(exc).__name__, exc_info=exc)
        message = (
            "The database cannot be reached; try again shortly."
            if status == 503
            else "Internal error; see the server log."
        )
        return _error_page(request, viewer, status, message, back)
    return _error_page(request, viewer, status, _capitalize_first(str(exc)) + ".", back)


# -- who is looking ------------------------------------------------------------------------


def _client(request: Request) -> Client:
    client: Client = request.app.state.client
    return client


def _viewer(request: Request) -> Principal | None:
    """The signed-in viewer, or None (no key, or a wrong, malformed or revoked one)."""
    gate: Gate = request.app.state.gate
    try:
        # The open API serves an anonymous viewer only on a loopback Host (DNS rebinding).
        principal = gate.principal_of(request)
    except Unauthorized:
        return None
    request.state.principal = principal  # for the access log
    return principal


def _is_open(viewer: Principal) -> bool:
    """Whether the viewer came in without a key (the open API: nobody to sign out)."""
    return viewer.key is None


def _is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def _sign_in_first(request: Request) -> Response:
    """Where a request without a valid credential goes: the sign-in form, back here after."""
    if request.headers.get("authorization") is not None:
        # A bearer client is not a browser that can fill in a form: tell it plainly.
        return _error_page(request, None, 401, "The API key is wrong, malformed or revoked.")
    if _is_htmx(request):
        # Back to the page the fragment was for, not to the fragment.
        target = _path_of(request.headers.get("hx-current-url", ""))
    elif request.method in ("GET", "HEAD"):
        target = request.url.path
        if request.url.query:
            target += "?" + request.url.query
    else:
        # A form posted while signed out: back to the page it was posted from, when this
        # site's page says so, and never to the form's target (a GET of it answers 405).
        # Nothing is replayed: the operator acts again, signed in, on a fresh page.
        this_site = request_source(request) is Source.THIS_SITE
        target = _path_of(request.headers.get("referer", "") if this_site else "")
    target = _return_page(target)
    login = "/login?" + urlencode({"next": target}) if target != "/" else "/login"
    if _is_htmx(request):
        response: Response = Response(status_code=401, headers={"HX-Redirect": login})
    else:
        response = RedirectResponse(login, status_code=303)
    if request.cookies.get(COOKIE_NAME):
        response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="lax")
    return response


def _same_origin(request: Request) -> bool:
    """Whether a POST comes from a page of this origin (see the module docstring)."""
    return command_allowed(request, require_page=True)


def _cross_site(request: Request, viewer: Principal | None) -> HTMLResponse:
    log.warning(
        "refused a cross-site %s %s (Origin %r, Referer %r)",
        request.method,
        request.url.path,
        request.headers.get("origin"),
        request.headers.get("referer"),
    )
    return _error_page(
        request,
        viewer,
        403,
        "This request did not come from a dashboard page of this site, so it was refused "
        "and nothing changed. Reload the page and try again.",
    )


def _local_path(value: str | None, default: str) -> str:
    """``value`` if it is a path on this site (``/jobs?state=dead``), else ``default``:
    a redirect target from a form must not send the browser elsewhere."""
    if not value or len(value) > MAX_NEXT or not value.startswith("/"):
        return default
    if value.startswith(("//", "/\\")):
        return default
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or any(ch in value for ch in "\r\n\t\\"):
        return default
    return value


def _path_of(url: str) -> str:
    shown = urlsplit(url)
    return shown.path + (f"?{shown.query}" if shown.query else "")


def _return_page(value: str | None, default: str = "/") -> str:
    """Where a browser is sent back to (after signing in, after a form): ``value`` if it
    is a page of the dashboard on this site (a GET route but the fragments, static files
    and the sign-in forms), else ``default``. A form's target is no page: it answers POST
    only, and a GET of it would show a JSON 405."""
    target = _local_path(value, default)
    path = urlsplit(target).path
    if path.startswith(NOT_RETURNED_TO):
        return default
    pages = (r for r in router.routes if isinstance(r, APIRoute) and "GET" in (r.methods or ()))
    return target if any(page.path_regex.match(path) for page in pages) else default


def _parse_id(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else None


# -- sign-in -------------------------------------------------------------------------------


@router.get("/login", response_model=None)
def login_form(request: Request, next: str = "/") -> Response:
    target = _return_page(next)
    if _viewer(request) is not None:
        return RedirectResponse(target, status_code=303)
    return _render(request, "login.html", None, next=target, error=None)


@router.post("/login", response_model=None)
def login(
    request: Request,
    key: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    target = _return_page(next)
    if not _same_origin(request):
        return _cross_site(request, None)
    secure = _secure_cookie(request)
    if secure and request.url.scheme != "https" and not addressed_to_loopback(request):
        # A browser keeps a Secure cookie only from https pages (and loopback hosts): say
        # so, rather than send it round the sign-in form again with no word why.
        return _render(
            request,
            "login.html",
            None,
            403,
            next=target,
            error="This dashboard signs in over HTTPS only, so that the sign-in cookie never "
            "travels in clear. Serve it behind a TLS proxy (and name the proxy in "
            "--forwarded-allow-ips).",
        )
    client = _client(request)
    signed_in = client.sign_in(key.strip()) if key.strip() else None
    if signed_in is None:
        return _render(
            request,
            "login.html",
            None,
            401,
            next=target,
            error="That key is wrong, malformed or revoked.",
        )
    previous = request.cookies.get(COOKIE_NAME)
    if previous:
        client.sign_out(previous)  # one browser, one session
    log.info(
        "dashboard sign-in: session %d with key %s (tenant %s)",
        signed_in.session.id,
        signed_in.key.prefix,
        signed_in.key.tenant,
    )
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE_NAME,
        signed_in.token,
        max_age=int(SESSION_LIFETIME.total_seconds()),
        path="/",
        httponly=True,
        samesite="lax",
        secure=secure,
    )
    return response


def _secure_cookie(request: Request) -> bool:
    """Whether the sign-in cookie is ``Secure``: the request came over https (directly, or
    through a proxy in ``--forwarded-allow-ips``), or the server listens beyond loopback."""
    return request.url.scheme == "https" or bool(request.app.state.secure_cookies)


@router.get("/logout", response_model=None)
def logout_form(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer is None or _is_open(viewer):
        return RedirectResponse("/login" if viewer is None else "/", status_code=303)
    return _render(request, "logout.html", viewer)


@router.post("/logout", response_model=None)
def logout(request: Request) -> Response:
    if not _same_origin(request):
        return _cross_site(request, _viewer(request))
    token = request.cookies.get(COOKIE_NAME)
    if token and _client(request).sign_out(token):
        log.info("dashboard sign-out: a session ended")
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="lax")
    return response


# -- overview ------------------------------------------------------------------------------


def _overview_context(client: Client, viewer: Principal) -> dict[str, Any]:
    stats = client.run_stats(tenant=viewer.tenant)
    lag = {
        "p50": percentile(stats.recent_lag_ms, 50),
        "p99": percentile(stats.recent_lag_ms, 99),
        "samples": len(stats.recent_lag_ms),
    }
    return {
        "stats": stats,
        "lag": lag,
        "leader": client.leader(),
        "latest": client.list_runs(tenant=viewer.tenant, limit=LATEST_RUNS).items,
        "scope": viewer.tenant,
    }


@router.get("/", response_model=None)
def overview(request: Request) -> Response:
    return _page(request, "overview.html", _overview_context)


@router.get("/fragments/overview", response_model=None)
def overview_fragment(request: Request) -> Response:
    return _page(request, "_overview.html", _overview_context)


def _page(
    request: Request,
    template: str,
    context: Callable[..., dict[str, Any]],
    *args: Any,
    admin: bool = False,
) -> Response:
    """Render ``template`` with ``context(client, viewer, *args)`` for a signed-in viewer:
    the sign-in form for nobody, a 403 page for a tenant key on an ``admin`` page, and the
    error page for a failed client call."""
    viewer = _viewer(request)
    if viewer is None:
        return _sign_in_first(request)
    if admin and not viewer.admin:
        return _error_page(request, viewer, 403, "This page needs an admin key.")
    try:
        values = context(_client(request), viewer, *args)
        return _render(request, template, viewer, **values)
    except TickworkError as exc:
        return _failure(request, viewer, exc)
    except Exception:
        # A bug: the page still answers as a page, not with the JSON API's envelope; the
        # traceback goes to the log.
        log.exception("%s %s: unexpected error", request.method, request.url.path)
        return _error_page(request, viewer, 500, "Internal error; see the server log.")


# -- jobs ----------------------------------------------------------------------------------


def _jobs_context(client: Client, viewer: Principal, query: Mapping[str, str]) -> dict[str, Any]:
    state = query.get("state") or None
    task = (query.get("task") or "").strip() or None
    after_text = query.get("after") or None
    after = _parse_id(after_text) if after_text else None
    if after_text and after is None:
        raise ValidationError(f"after must be a job id, got {after_text!r}", field="after")
    page = client.list_jobs(
        tenant=viewer.tenant, state=job_state(state), task=task, after=after, limit=JOBS_PER_PAGE
    )
    kept = {k: v for k, v in (("state", state), ("task", task)) if v}
    return {
        "page": page,
        "outcomes": _outcomes(client, viewer, page.items),
        "filters": {"state": state, "task": task, "after": after},
        "job_states": [s.value for s in JobState],
        "fragment_url": "/fragments/jobs?" + urlencode({**kept, **_after(after)}),
        "first_url": "/jobs?" + urlencode(kept),
        "next_url": (
            "/jobs?" + urlencode({**kept, "after": page.next_cursor})
            if page.next_cursor is not None
            else None
        ),
    }


def _outcomes(client: Client, viewer: Principal, jobs: list[Job]) -> dict[int, RunState]:
    """The state of the latest run of each completed job: "completed" says only that no
    slot is left, not how the job's work ended (its one run may be dead). One read per
    completed job on the page, at most JOBS_PER_PAGE."""
    outcomes = {}
    for job in jobs:
        if job.state is JobState.COMPLETED:
            latest = client.list_runs(job_id=job.id, tenant=viewer.tenant, limit=1).items
            if latest:
                outcomes[job.id] = latest[0].state
    return outcomes


def _after(after: int | None) -> dict[str, int]:
    return {"after": after} if after is not None else {}


@router.get("/jobs", response_model=None)
def jobs(request: Request) -> Response:
    return _page(request, "jobs.html", _jobs_context, request.query_params)


@router.get("/fragments/jobs", response_model=None)
def jobs_fragment(request: Request) -> Response:
    return _page(request, "_jobs.html", _jobs_context, request.query_params)


class _Missing(NotFound):
    """A path that names no row (``/jobs/abc``): the same 404 as an unknown id."""


def _job_id(text: str) -> int:
    ident = _parse_id(text)
    if ident is None:
        raise _Missing(f"job {text} not found")
    return ident


def _job_live_context(client: Client, viewer: Principal, job_id: str) -> dict[str, Any]:
    job = client.get_job(_job_id(job_id), tenant=viewer.tenant)
    runs = client.list_runs(job_id=job.id, tenant=viewer.tenant, limit=RUNS_PER_JOB).items
    return {
        "job": job,
        "runs": runs,
        # The job's badge says how its latest run ended once no slot is left (_outcomes).
        "outcome": runs[0].state if job.state is JobState.COMPLETED and runs else None,
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
            explanation = client.explain(job.id, at, tenant=viewer.tenant).text
        except ValidationError as exc:
            explain_error = _capitalize_first(exc.message) + "."
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
    return _page(request, "job.html", _job_context, job_id, at if at and at.strip(" ") else None)


@router.get("/fragments/jobs/{job_id}", response_model=None)
def job_fragment(request: Request, job_id: str) -> Response:
    return _page(request, "_job_live.html", _job_live_context, job_id)


FINISHED_JOB_STATES = frozenset({JobState.COMPLETED, JobState.CANCELLED})
FINISHED_JOB_REFUSALS = {
    "trigger": "Job {job} is {state}: it has no slot left, so it is not run again.",
    "cancel": (
        "Job {job} is {state}: it has no slot left to cancel. To stop a run of it that has "
        "not finished, cancel that run."
    ),
}
"""What the dashboard answers (409) to Run now and Cancel job on a job with no slot left,
whose page offers neither. (The JSON API and ``tickwork trigger`` keep the store's rule: a
completed job may get an extra run.)"""


@router.post("/jobs/{job_id}/{action}", response_model=None)
def job_action(request: Request, job_id: str, action: str) -> Response:
    """Pause, resume, trigger (run now) or cancel a job, then show its page again."""
    viewer = _viewer(request)
    if viewer is None:
        return _sign_in_first(request)
    if not _same_origin(request):
        return _cross_site(request, viewer)
    back = f"/jobs/{job_id}"
    client = _client(request)
    commands = {
        "pause": client.pause_job,
        "resume": client.resume_job,
        "trigger": client.trigger_job,
        "cancel": client.cancel_job,
    }
    command = commands.get(action)
    try:
        if command is None:
            raise _Missing(f"there is no job action {action!r}")
        ident = _job_id(job_id)
        if action in FINISHED_JOB_REFUSALS:
            job = client.get_job(ident, tenant=viewer.tenant)
            if job.state in FINISHED_JOB_STATES:
                message = FINISHED_JOB_REFUSALS[action].format(job=job.id, state=job.state)
                return _error_page(request, viewer, 409, message, back)
        command(ident, tenant=viewer.tenant)
    except TickworkError as exc:
        return _failure(request, viewer, exc, back)
    log.info("dashboard: %s job %s (key %s)", action, job_id, viewer.key or "open")
    return RedirectResponse(back, status_code=303)


# -- dead letter ---------------------------------------------------------------------------


def _dead_context(client: Client, viewer: Principal, after_text: str | None) -> dict[str, Any]:
    after = _parse_id(after_text) if after_text else None
    if after_text and after is None:
        raise ValidationError(f"after must be a run id, got {after_text!r}", field="after")
    page = client.dead_runs(tenant=viewer.tenant, after=after, limit=DEAD_PER_PAGE)
    return {
        "page": page,
        "after": after,
        "notice": None,
        "fragment_url": "/fragments/dead?" + urlencode(_after(after)),
    }


@router.get("/dead", response_model=None)
def dead(request: Request, after: str | None = None) -> Response:
    return _page(request, "dead.html", _dead_context, after)


@router.get("/fragments/dead", response_model=None)
def dead_fragment(request: Request, after: str | None = None) -> Response:
    return _page(request, "_dead.html", _dead_context, after)


@router.post("/runs/{run_id}/retry", response_model=None)
def retry_run(request: Request, run_id: str, next: Annotated[str, Form()] = "/dead") -> Response:
    """Put a dead or failed run back in the queue.

    A plain form post is answered 303 to the page it came from (``next``). From htmx
    (``HX-Request``) the answer is the run's dead-letter row, re-rendered in its new state,
    which htmx swaps in place; a run that cannot be retried (another operator was first:
    409, or it is gone: 404) gets its row back with the reason.
    """
    viewer = _viewer(request)
    if viewer is None:
        return _sign_in_first(request)
    if not _same_origin(request):
        return _cross_site(request, viewer)
    back = _return_page(next, "/dead")
    client = _client(request)
    ident = _parse_id(run_id)
    try:
        if ident is None:
            raise _Missing(f"run {run_id} not found")
        run = client.retry_run(ident, tenant=viewer.tenant)
    except TickworkError as exc:
        if not _is_htmx(request) or ident is None or status_of(exc) >= 500:
            return _failure(request, viewer, exc, back)
        return _retry_refused(request, viewer, client, ident, exc)
    log.info("dashboard: retry run %d (key %s)", run.id, viewer.key or "open")
    if _is_htmx(request):
        return _render(request, "_dead_row.html", viewer, run=run, notice="Retried:")
    return RedirectResponse(back, status_code=303)


@router.post("/runs/{run_id}/cancel", response_model=None)
def cancel_run(request: Request, run_id: str, next: Annotated[str, Form()] = "/") -> Response:
    """Cancel a queued, failed or running run (a running one stops at its next heartbeat),
    then return to the page the form came from (``next``)."""
    viewer = _viewer(request)
    if viewer is None:
        return _sign_in_first(request)
    if not _same_origin(request):
        return _cross_site(request, viewer)
    back = _local_path(next, "/")
    ident = _parse_id(run_id)
    try:
        if ident is None:
            raise _Missing(f"run {run_id} not found")
        run = _client(request).cancel_run(ident, tenant=viewer.tenant)
    except TickworkError as exc:
        return _failure(request, viewer, exc, back)
    log.info("dashboard: cancel run %d (key %s)", run.id, viewer.key or "open")
    return RedirectResponse(back, status_code=303)


def _retry_refused(
    request: Request, viewer: Principal, client: Client, run_id: int, exc: TickworkError
) -> Response:
    status = status_of(exc)
    if status == 404:
        return _render(request, "_gone_row.html", viewer, status, run_id=run_id, message=str(exc))
    try:
        run = client.get_run(run_id, tenant=viewer.tenant)
    except NotFound as gone:
        return _render(request, "_gone_row.html", viewer, 404, run_id=run_id, message=str(gone))
    notice = f"Not retried: it is {run.state}."
    return _render(request, "_dead_row.html", viewer, status, run=run, notice=notice)


# -- cluster -------------------------------------------------------------------------------


def _cluster_context(client: Client, viewer: Principal) -> dict[str, Any]:
    return {"cluster": client.cluster()}


@router.get("/cluster", response_model=None)
def cluster(request: Request) -> Response:
    return _page(request, "cluster.html", _cluster_context, admin=True)


@router.get("/fragments/cluster", response_model=None)
def cluster_fragment(request: Request) -> Response:
    return _page(request, "_cluster.html", _cluster_context, admin=True)
