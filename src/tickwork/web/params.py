"""What a caller may put in a URL's query: one definition of each check, for both faces.

The JSON API declares its query parameters with these types (FastAPI applies them, and a
value that fails is a 422 naming the parameter); the dashboard reads its pages' queries
through :func:`check` with the same types, so a value the API refuses is a 400 page that
names the parameter and says what is wrong in the same words, never a 500 from the store
(PostgreSQL text cannot hold a NUL)::

    GET /api/v1/jobs?task=%00   422  "message": "task: holds a control character (U+0000)"
    GET /jobs?task=%00          400  a page: "Task: holds a control character (U+0000)."

==============  ====================================================================
``NameText``    a task, queue or tenant name, or a search: at most MAX_NAME_LENGTH
                (200) characters, no control character (C0 or DEL)
``TimeText``    a time bound (``since``, ``until``): at most MAX_TEXT (1000)
``SlotText``    explain's slot (``at``): at most MAX_SLOT_TEXT (100)
``Cursor``      a page's ``after``: an integer from 0 to MAX_ID
==============  ====================================================================

These are the checks of the text a query carries; what the text means (a time that
parses, a name that exists) is checked by the client, for both faces alike.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated, Any

import pydantic
from pydantic import AfterValidator, Field, StringConstraints, TypeAdapter, WithJsonSchema
from pydantic_core import PydanticCustomError

from tickwork.errors import ValidationError
from tickwork.job import MAX_NAME_LENGTH

MAX_ID = 2**63 - 1
"""Ids are 64-bit; a larger number in a path or cursor is refused as bad input."""
MAX_TEXT = 1000
"""Longest free-text query value (an ISO time, a filter)."""
MAX_SLOT_TEXT = 100
"""Longest slot explain takes (an ISO time with its offset is some 30 characters)."""
PLAIN_TEXT = r"^[^\x00-\x1f\x7f]*$"
"""Query text without control characters, as the OpenAPI document states it."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def plain_text(value: str) -> str:
    """``value`` if it holds no control character (PostgreSQL text cannot hold a NUL, and
    the others reach terminals and logs), else a validation error naming the first."""
    found = _CONTROL.search(value)
    if found is not None:
        raise PydanticCustomError(
            "control_character",
            "holds a control character ({code})",
            {"code": f"U+{ord(found.group()):04X}"},
        )
    return value


def _text(max_length: int) -> Any:
    return Annotated[
        str,
        StringConstraints(max_length=max_length),
        AfterValidator(plain_text),
        WithJsonSchema({"type": "string", "maxLength": max_length, "pattern": PLAIN_TEXT}),
    ]


NameText = _text(MAX_NAME_LENGTH)
TimeText = _text(MAX_TEXT)
SlotText = _text(MAX_SLOT_TEXT)
Cursor = Annotated[int, Field(ge=0, le=MAX_ID)]


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def check(name: str, value: str | None, kind: Any) -> Any:
    """``value`` (a query parameter ``name`` as the dashboard read it) through the check of
    ``kind``, one of the types above; None stays None. A value that fails raises
    ValidationError naming ``name``, with the API's words (``task: holds a control
    character (U+0000)``)."""
    if value is None:
        return None
    try:
        return _adapter(kind).validate_python(value)
    except pydantic.ValidationError as exc:
        raise ValidationError(f"{name}: {exc.errors()[0]['msg']}", field=name) from None


def check_choice(name: str, value: str | None, choices: tuple[str, ...]) -> str | None:
    """``value`` if it is one of ``choices`` (or None), else ValidationError naming ``name``."""
    if value is None or value in choices:
        return value
    shown = value if len(value) <= MAX_NAME_LENGTH else value[:MAX_NAME_LENGTH] + "…"
    raise ValidationError(f"{name} must be one of {', '.join(choices)}, got {shown!r}", field=name)
