"""Who is calling: API keys, tenants, and the open API on a loopback address.

A request names its key in ``Authorization: Bearer tw_...``, or a session in the
``tickwork_session`` cookie: the dashboard's sign-in form checks a key once and starts a
session (:meth:`tickwork.client.Client.sign_in`), whose token, never the key, is the
cookie's value (http-only, ``SameSite=Lax``, so a cross-site form cannot post with it;
``Secure`` over https and whenever the server listens beyond loopback). Signing out or
revoking the key ends the session in the store. Either becomes a :class:`Principal`:

- a **tenant key** sees and acts on its own tenant's jobs and runs only. Every client call
  passes ``tenant=principal.tenant``; an id of another tenant is answered 404 exactly like
  a missing one, so ids do not leak. Jobs it submits are its tenant's.
- an **admin key** sees every tenant (``tenant=None``), may name a tenant when it submits,
  may submit ``shell`` tasks and read the cluster view and the metrics.

No key, or a wrong, malformed or revoked one: 401. The one exception is the **open API**
(``open_access``): ``tickwork api`` on a loopback address while no key was ever created
lets a caller without a key act as an admin, so a laptop needs no setup. It stays open only
while no key was ever created: the first ``tickwork keys create`` closes it (checked at
most every :data:`OPEN_RECHECK_SECONDS`), and revoking that key does not open it again
(keys are never deleted, so the store remembers). ``force_open`` (``--open``) keeps it
open whatever keys exist. A wrong key is refused even while it is open.

Browsers
--------
A web page the operator happens to visit must not be able to act through the operator's
browser. Two checks in :meth:`Gate.for_request` see to it:

- **Commands from another site** (a POST whose ``Origin``, or ``Referer``, names another
  host than the one addressed) are refused with 403 unless they carry a bearer header,
  which a browser never adds on its own. The ``SameSite=Lax`` cookie already keeps other
  sites out, but not sibling hosts of the same site, and the open API has no cookie at
  all: without this, any page could ``fetch("http://127.0.0.1:8765/api/v1/runs/1/retry",
  {method: "POST"})`` (a simple request, sent without a CORS preflight). Scripts and
  ``curl`` send no ``Origin`` and are not affected.
- **DNS rebinding**: the open API lets an anonymous caller in only when the request is
  addressed to a loopback host (``Host: 127.0.0.1:8765``, ``localhost``, ``[::1]``). A page
  of ``evil.example`` whose name is made to resolve to 127.0.0.1 sends ``Host:
  evil.example`` and is refused, so it can neither read the jobs nor submit one.

Both read hosts through one strict parser, :func:`parse_authority` (``host[:port]`` and
nothing else), so ``Host: evil.example:80@127.0.0.1`` or ``127.0.0.1:80.evil.example``
is no loopback host, and an ``Origin`` with user info is no page of this site.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, NamedTuple

from fastapi import Depends, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.types import Scope

from tickwork.client import Client
from tickwork.job import DEFAULT_TENANT
from tickwork.records import ApiKey
from tickwork.web.errors import Forbidden, Unauthorized

log = logging.getLogger("tickwork.web")

COOKIE_NAME = "tickwork_session"
"""The cookie the dashboard's sign-in form sets to a session token (http-only, SameSite=Lax)."""
OPEN_RECHECK_SECONDS = 1.0
"""How stale the open API's "no key was ever created" may be: a new key closes it this fast."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing: no cross-site check."""
MAX_PORT = 65_535
MAX_HOST_NAME = 253
"""Characters in a DNS name, dots included (RFC 1035)."""
DEFAULT_PORTS = {"http": 80, "https": 443}
_CREDENTIAL = "tickwork.credential"
_CHECKED = "tickwork.principal"
"""Where a request's scope keeps its caller once found (by credential; and checked against
cross-site commands too), so that finding it before the body is read costs nothing after."""


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: which tenant it may see (None: every tenant) and whether it is an admin."""

    tenant: str | None
    admin: bool
    home: str = DEFAULT_TENANT
    """The tenant a job goes to when the caller names none (the key's tenant)."""
    key: str | None = None
    """The key's prefix (for logs); None for the open API's anonymous admin."""


class Gate:
    """Turns a request's credentials into a Principal (or a 401) for one app."""

    def __init__(self, client: Client, *, open_access: bool, force_open: bool = False) -> None:
        self.client = client
        self.open_access = open_access or force_open
        self.force_open = force_open
        self._lock = threading.Lock()
        self._checked_at = -float("inf")
        self._keys_created = False

    def for_request(self, request: Request) -> Principal:
        """The principal of ``request``: its credential, checked against the browser
        attacks of the module docstring. Unauthorized or Forbidden otherwise. Found once
        per request (kept in its scope), however many times it is asked."""
        checked = request.scope.get(_CHECKED)
        if isinstance(checked, Principal):
            return checked
        principal = self.principal_of(request)
        if request.method not in SAFE_METHODS and not command_allowed(request, require_page=False):
            raise Forbidden(
                "a command sent from another site's page is refused; "
                "send the key in an Authorization header"
            )
        request.scope[_CHECKED] = principal
        return principal

    def principal_of(self, request: Request) -> Principal:
        """The caller by its credential alone (no cross-site check), or Unauthorized: the
        bearer key, else the session cookie, else nobody (the open API's anonymous admin,
        on a loopback ``Host`` only). Looked up once per request (kept in its scope)."""
        found = request.scope.get(_CREDENTIAL)
        if isinstance(found, Principal):
            return found
        principal = self._look_up(request)
        request.scope[_CREDENTIAL] = principal
        return principal

    def _look_up(self, request: Request) -> Principal:
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, token = header.strip().partition(" ")
            # Another scheme (Basic ...) is a wrong key, not no key: the caller meant one.
            key = self.client.authenticate(token.strip()) if scheme.lower() == "bearer" else None
            if key is None:
                raise Unauthorized("the API key is wrong, malformed or revoked")
            return _principal(key)
        cookie = request.cookies.get(COOKIE_NAME)
        if cookie:
            found = self.client.authenticate_session(cookie)
            if found is None:
                raise Unauthorized("the session is over: sign in again")
            return _principal(found[1])
        if self._open():
            if addressed_to_loopback(request):
                return Principal(tenant=None, admin=True)
            raise Unauthorized(
                "without a key this API answers only requests addressed to a loopback "
                "host (127.0.0.1, localhost, [::1])"
            )
        raise Unauthorized(
            "an API key is required: send 'Authorization: Bearer <key>' "
            "(create one with 'tickwork keys create --tenant NAME')"
        )

    def _open(self) -> bool:
        """Whether a caller without a key is let in (on a loopback host): forced, or no key
        was ever created. Once one was, this app stays closed."""
        if self.force_open:
            return True
        if not self.open_access:
            return False
        with self._lock:
            now = time.monotonic()
            if now - self._checked_at >= OPEN_RECHECK_SECONDS:
                self._keys_created = self.client.api_keys_exist()
                self._checked_at = now
                if self._keys_created:
                    log.warning("an API key was created: the open API requires keys from here on")
                    self.open_access = False
            return not self._keys_created


def _principal(key: ApiKey) -> Principal:
    return Principal(
        tenant=None if key.admin else key.tenant, admin=key.admin, home=key.tenant, key=key.prefix
    )


# -- hosts and pages ---------------------------------------------------------------------------


class Authority(NamedTuple):
    """A ``host[:port]`` as :func:`parse_authority` reads it."""

    host: str
    """Lower-case; an IP address in its canonical text (an IPv6 one without brackets)."""
    port: int | None
    """None when none was given."""

    @property
    def loopback(self) -> bool:
        """Whether the host is a loopback name (``localhost``, ``*.localhost``) or address."""
        if self.host == "localhost" or self.host.endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


_AUTHORITY = re.compile(
    r"(?:\[(?P<ipv6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9.-]+))(?::(?P<port>[0-9]{1,5}))?"
)
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_PAGE = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#]*)(?P<rest>[/?#].*)?", re.DOTALL)


def parse_authority(value: str) -> Authority | None:
    """``value`` as a ``Host`` header's ``host[:port]``, or None for anything else.

    The one parser of hosts here: the open API's loopback check and the cross-site check
    both read hosts through it. Strict, because a lenient URL parser finds a host where
    there is none: ``urlsplit`` reads ``evil.example:80@127.0.0.1`` as user info plus
    127.0.0.1, and ``127.0.0.1:80.evil.example`` as 127.0.0.1 with a bad port.

    - host: a DNS name (dot-separated labels of letters, digits and inner hyphens, 63
      characters each and 253 in all), a dotted-quad IPv4 address, or an IPv6 address in
      brackets (no zone). A name whose last label is all digits must be an IPv4 address.
    - port: optional, decimal digits for 1 to 65535.

    Nothing else: no user info, path, query, fragment, whitespace, trailing dot or
    non-ASCII character.
    """
    if not value.isascii():
        return None
    match = _AUTHORITY.fullmatch(value.lower())
    if match is None:
        return None
    port = int(match["port"]) if match["port"] is not None else None
    if port is not None and not 1 <= port <= MAX_PORT:
        return None
    if match["ipv6"] is not None:
        try:
            return Authority(str(ipaddress.IPv6Address(match["ipv6"])), port)
        except ValueError:
            return None
    name: str = match["name"]
    labels = name.split(".")
    if labels[-1].isdigit():  # no top-level domain is all digits: an IPv4 address or nothing
        try:
            return Authority(str(ipaddress.IPv4Address(name)), port)
        except ValueError:
            return None
    if len(name) > MAX_HOST_NAME or not all(_LABEL.fullmatch(label) for label in labels):
        return None
    return Authority(name, port)


def page_authority(url: str, *, origin: bool = False) -> Authority | None:
    """The ``host[:port]`` of an ``http``/``https`` page (``Referer``), or of an origin
    (``origin=True``: nothing may follow it), its scheme's default port dropped as a
    browser drops it from ``Host``; None for anything else."""
    match = _PAGE.fullmatch(url) if url.isascii() else None
    if match is None or (origin and match["rest"] is not None):
        return None
    found = parse_authority(match["authority"])
    if found is None or found.port != DEFAULT_PORTS[match["scheme"]]:
        return found
    return Authority(found.host, None)


def addressed_to_loopback(request: Request) -> bool:
    """Whether the request's ``Host`` is a loopback name or address."""
    found = parse_authority(request.headers.get("host", ""))
    return found is not None and found.loopback


class Source(Enum):
    """The page a request was sent from, as its ``Origin`` (else ``Referer``) says."""

    THIS_SITE = "this site"
    ANOTHER_SITE = "another site"
    """Another host, a sandboxed frame or ``file:`` page (``Origin: null``), or a header
    that does not parse."""
    UNNAMED = "unnamed"
    """No ``Origin`` and no ``Referer``: a script or ``curl``, not a browser's form."""


def request_source(request: Request) -> Source:
    """Where ``request`` was sent from: its page's host against the host it addressed
    (``Host``, or ``X-Forwarded-Host`` behind a proxy), both read by
    :func:`parse_authority`; the scheme is not compared."""
    origin = request.headers.get("origin")
    if origin:
        page = None if origin == "null" else page_authority(origin, origin=True)
    else:
        referer = request.headers.get("referer")
        if not referer:
            return Source.UNNAMED
        page = page_authority(referer)
    # X-Forwarded-Host is not checked against --forwarded-allow-ips: a page can only set it
    # through a preflighted request, which this server never approves.
    addressed = {
        parse_authority(value)
        for value in (request.headers.get("host"), request.headers.get("x-forwarded-host"))
        if value
    }
    return Source.THIS_SITE if page is not None and page in addressed else Source.ANOTHER_SITE


def command_allowed(request: Request, *, require_page: bool) -> bool:
    """The cross-site rule, for the JSON API and the dashboard alike: a command carrying a
    bearer header (which a browser never adds on its own) is allowed; otherwise it must
    come from a page of this site, or (unless ``require_page``, as for the dashboard's
    forms, which browsers always post with a page named) from no page at all. A refusal is
    logged here, once for both.

    The JSON API does not require a page: ``curl`` and scripts name none, and on the open
    API (no key) they carry no bearer header either."""
    if request.headers.get("authorization") is not None:
        return True
    source = request_source(request)
    if source is Source.THIS_SITE or (source is Source.UNNAMED and not require_page):
        return True
    log.warning(
        "refused a cross-site %s %s (Origin %r, Referer %r)",
        request.method,
        request.url.path,
        request.headers.get("origin"),
        request.headers.get("referer"),
    )
    return False


# -- the caller before the body ----------------------------------------------------------------


def carries_body(scope: Scope) -> bool:
    """Whether a request says it has a body (a ``Content-Length`` above 0, or chunked)."""
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
    return False


class CallerFirst(APIRoute):
    """An API route that knows its caller before it reads a byte of the body.

    FastAPI reads and parses a route's body before it solves the route's dependencies, so
    :func:`get_principal` alone would run after a 16 MiB body was read and parsed, for a
    caller without a key. For a route that takes a body, this finds the caller first (in a
    thread: it is a store read) and answers 401, 403 (a cross-site command) or, on an
    admin-only route, 403 for a tenant key, with the body unread; the route's own
    dependency then finds the caller already known. Routes that take no body (and those
    that read theirs in a dependency of :func:`get_principal`, as the batch submit does)
    read nothing before their dependencies, so they need nothing more.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler
        admin_only = _depends_on(self.dependant, get_admin)

        async def caller_first(request: Request) -> Response:
            if carries_body(request.scope):
                principal = await run_in_threadpool(get_principal, request)
                if admin_only:
                    require_admin(principal)
            return await handler(request)

        return caller_first


def _depends_on(dependant: Dependant, call: Callable[..., Any]) -> bool:
    pending = list(dependant.dependencies)
    while pending:
        found = pending.pop()
        if found.call is call:
            return True
        pending.extend(found.dependencies)
    return False


def get_client(request: Request) -> Client:
    """The app's client (a dependency)."""
    client: Client = request.app.state.client
    return client


# Declared for the OpenAPI document (its "Authorize" button); `credential` reads both.
BEARER = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer tw_...`.")
COOKIE = APIKeyCookie(
    name=COOKIE_NAME,
    auto_error=False,
    description="The dashboard's session cookie, set by signing in with a key at /login.",
)


def get_principal(
    request: Request,
    _bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)] = None,
    _cookie: Annotated[str | None, Depends(COOKIE)] = None,
) -> Principal:
    """The caller, or 401 (a dependency for every endpoint behind the keys)."""
    gate: Gate = request.app.state.gate
    principal = gate.for_request(request)
    request.state.principal = principal
    return principal


def require_admin(principal: Principal) -> None:
    """403 unless ``principal`` is an admin."""
    if not principal.admin:
        raise Forbidden("this needs an admin key")


def get_admin(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    """The caller if it is an admin; 401 without a key, 403 for a tenant key."""
    require_admin(principal)
    return principal
