"""The server-rendered dashboard (Jinja2 + vendored htmx): a thin adapter over the client.

Work in progress: the pages land in the following commits; the router exists now so the
HTTP app can include it.
"""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
