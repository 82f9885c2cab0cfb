"""The fields more than one resource takes (a query parameter gets the check of
:mod:`tickwork.web.params`, as the dashboard's does), and a page of a listing as JSON."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from pydantic import Field

from tickwork.job import MAX_NAME_LENGTH
from tickwork.records import MAX_PAGE, Page, to_json
from tickwork.web.params import MAX_TEXT, Cursor, NameText

TenantQuery = Annotated[NameText | None, Query(description="Admin keys only.")]
NameQuery = Annotated[NameText | None, Query()]
After = Annotated[
    Cursor | None, Query(description="A cursor: the `next_cursor` of the previous page.")
]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="Items per page, newest first.")]
Text = Annotated[str | None, Field(max_length=MAX_TEXT)]
Label = Annotated[str | None, Field(max_length=MAX_NAME_LENGTH)]


def page_json(page: Page[Any]) -> dict[str, Any]:
    """A page of a listing as the API answers it: its items and the cursor of the next."""
    return {"items": [to_json(item) for item in page.items], "next_cursor": page.next_cursor}
