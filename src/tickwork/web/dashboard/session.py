"""Who is looking at the dashboard: the viewer of a request, the sign-in form and its
session cookie, where a browser is sent back to, and the refusal of cross-site posts.

The rules are in :mod:`tickwork.web.dashboard` ("Sign-in", "Cross-site requests"); the
cross-site rule itself is the JSON API's, :func:`tickwork.web.auth.command_allowed`.

Here too is the router every dashboard module adds its routes to: its routes know their
viewer before they read a form (:class:`ViewerFirst`), so it lives beside the viewer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from tickwork.auth import SESSION_LIFETIME
from tickwork.client import Client
from tickwork.web.auth import (
    COOKIE_NAME,
    Gate,
    Principal,
    Source,
    addressed_to_loopback,
    carries_body,
    command_allowed,
    request_source,
)
from tickwork.web.dashboard.render import error_page, is_open, render, static
from tickwork.web.errors import Unauthorized

log = logging.getLogger("tickwork.web")

MAX_NEXT = 2000
"""The longest ``next`` (where a form returns to) that is followed; longer ones go home."""
NOT_RETURNED_TO = ("/fragments/", "/static/", "/login", "/logout")
"""GET routes that are no page to return to after signing in."""
SIGN_IN_FORMS = frozenset({"/login"})
"""The one form read before its viewer is known: the sign-in form carries the key."""


class ViewerFirst(APIRoute):
    """A dashboard route that knows its viewer before it reads its form: a form posted
    without a valid credential is sent to the sign-in form (as the route itself would)
    with its body unread. FastAPI reads a route's form before anything in the route runs;
    see :class:`tickwork.web.auth.CallerFirst`, the API's twin."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None or self.path in SIGN_IN_FORMS:
            return handler

        async def viewer_first(request: Request) -> Response:
            if carries_body(request.scope) and await run_in_threadpool(viewer_of, request) is None:
                return sign_in_first(request)
            return await handler(request)

        return viewer_first


router = APIRouter(include_in_schema=False, route_class=ViewerFirst)
"""The dashboard's routes: pages, fragments, commands, sign-in and the static files."""
router.add_api_route("/static/{name}", static, methods=["GET"])


# -- who is looking ------------------------------------------------------------------------


def client_of(request: Request) -> Client:
    client: Client = request.app.state.client
    return client


def viewer_of(request: Request) -> Principal | None:
    """The signed-in viewer, or None (no key, or a wrong, malformed or revoked one)."""
    gate: Gate = request.app.state.gate
    try:
        # The open API serves an anonymous viewer only on a loopback Host (DNS rebinding).
        principal = gate.principal_of(request)
    except Unauthorized:
        return None
    request.state.principal = principal  # for the access log
    return principal


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def sign_in_first(request: Request) -> Response:
    """Where a request without a valid credential goes: the sign-in form, back here after."""
    if request.headers.get("authorization") is not None:
        # A bearer client is not a browser that can fill in a form: tell it plainly.
        return error_page(request, None, 401, "The API key is wrong, malformed or revoked.")
    if is_htmx(request):
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
    target = return_page(target)
    login = "/login?" + urlencode({"next": target}) if target != "/" else "/login"
    if is_htmx(request):
        response: Response = Response(status_code=401, headers={"HX-Redirect": login})
    else:
        response = RedirectResponse(login, status_code=303)
    if request.cookies.get(COOKIE_NAME):
        response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="lax")
    return response


def same_origin(request: Request) -> bool:
    """Whether a POST comes from a page of this origin (see the module docstring)."""
    return command_allowed(request, require_page=True)


def cross_site(request: Request, viewer: Principal | None) -> HTMLResponse:
    """The 403 page for a post :func:`same_origin` refused (which logged it)."""
    return error_page(
        request,
        viewer,
        403,
        "This request did not come from a dashboard page of this site, so it was refused "
        "and nothing changed. Reload the page and try again.",
    )


def local_path(value: str | None, default: str) -> str:
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


def return_page(value: str | None, default: str = "/") -> str:
    """Where a browser is sent back to (after signing in, after a form): ``value`` if it
    is a page of the dashboard on this site (a GET route but the fragments, static files
    and the sign-in forms), else ``default``. A form's target is no page: it answers POST
    only, and a GET of it would show a JSON 405."""
    target = local_path(value, default)
    path = urlsplit(target).path
    if path.startswith(NOT_RETURNED_TO):
        return default
    pages = (r for r in router.routes if isinstance(r, APIRoute) and "GET" in (r.methods or ()))
    return target if any(page.path_regex.match(path) for page in pages) else default


# -- sign-in -------------------------------------------------------------------------------


@router.get("/login", response_model=None)
def login_form(request: Request, next: str = "/") -> Response:
    target = return_page(next)
    if viewer_of(request) is not None:
        return RedirectResponse(target, status_code=303)
    return render(request, "login.html", None, next=target, error=None)


@router.post("/login", response_model=None)
def login(
    request: Request,
    key: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    target = return_page(next)
    if not same_origin(request):
        return cross_site(request, None)
    secure = _secure_cookie(request)
    if secure and request.url.scheme != "https" and not addressed_to_loopback(request):
        # A browser keeps a Secure cookie only from https pages (and loopback hosts): say
        # so, rather than send it round the sign-in form again with no word why.
        return render(
            request,
            "login.html",
            None,
            403,
            next=target,
            error="This dashboard signs in over HTTPS only, so that the sign-in cookie never "
            "travels in clear. Serve it behind a TLS proxy (and name the proxy in "
            "--forwarded-allow-ips).",
        )
    client = client_of(request)
    signed_in = client.sign_in(key.strip()) if key.strip() else None
    if signed_in is None:
        return render(
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
    viewer = viewer_of(request)
    if viewer is None or is_open(viewer):
        return RedirectResponse("/login" if viewer is None else "/", status_code=303)
    return render(request, "logout.html", viewer)


@router.post("/logout", response_model=None)
def logout(request: Request) -> Response:
    if not same_origin(request):
        return cross_site(request, viewer_of(request))
    token = request.cookies.get(COOKIE_NAME)
    if token and client_of(request).sign_out(token):
        log.info("dashboard sign-out: a session ended")
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="lax")
    return response
