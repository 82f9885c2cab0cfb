"""What every dashboard page family builds on: serving a page for its viewer
(:func:`serve_page`), and reading what its path and query carry (an id, a cursor, a filter's
text), each checked as the JSON API checks it (:mod:`tickwork.web.params`).

:mod:`~tickwork.web.dashboard.pages`, :mod:`~tickwork.web.dashboard.runs` and
:mod:`~tickwork.web.dashboard.activity` import these; none of them imports another's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from tickwork.errors import NotFound, TickworkError
from tickwork.web.dashboard.render import error_page, failure, render
from tickwork.web.dashboard.session import client_of, sign_in_first, viewer_of
from tickwork.web.params import Cursor, NameText, check

log = logging.getLogger("tickwork.web")


class Missing(NotFound):
    """A path that names no row (``/jobs/abc``): the same 404 as an unknown id."""


def parse_id(text: str) -> int | None:
    """An id from a path (``/runs/12``), or None when it is no id a row can have."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else None


def after_id(text: str | None) -> int | None:
    """A page's ``after`` cursor, checked as the API's (``web.params``): None when absent
    or empty, a ValidationError when it is no cursor."""
    after: int | None = check("after", text or None, Cursor)
    return after


def after_query(after: int | None) -> dict[str, int]:
    """The ``after`` of a link's query: empty on the first page."""
    return {"after": after} if after is not None else {}


def query_text(query: Mapping[str, str], name: str, kind: Any = NameText) -> str | None:
    """Query text checked as the API's (``web.params``), then trimmed; None when empty."""
    value: str | None = check(name, query.get(name), kind)
    return (value or "").strip() or None


def serve_page(
    request: Request,
    template: str,
    context: Callable[..., dict[str, Any]],
    *args: Any,
    admin: bool = False,
) -> Response:
    """Render ``template`` with ``context(client, viewer, *args)`` for a signed-in viewer:
    the sign-in form for nobody, a 403 page for a tenant key on an ``admin`` page, and the
    error page for a failed client call."""
    viewer = viewer_of(request)
    if viewer is None:
        return sign_in_first(request)
    if admin and not viewer.admin:
        return error_page(request, viewer, 403, "This page needs an admin key.")
    try:
        values = context(client_of(request), viewer, *args)
        return render(request, template, viewer, **values)
    except TickworkError as exc:
        return failure(request, viewer, exc)
    except Exception:
        # A bug: the page still answers as a page, not with the JSON API's envelope; the
        # traceback goes to the log.
        log.exception("%s %s: unexpected error", request.method, request.url.path)
        return error_page(request, viewer, 500, "Internal error; see the server log.")
