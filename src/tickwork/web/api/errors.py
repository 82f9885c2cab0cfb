"""The error answers the API documents: each an entry of an operation's ``responses`` in the
OpenAPI document, with the envelope of :mod:`tickwork.web.errors` as its example. A
resource adds its own (403, 409 ...) beside these."""

from __future__ import annotations

from typing import Any

from tickwork.web.errors import error_body


def error_doc(description: str) -> dict[str, Any]:
    """An error answer as OpenAPI documents it: ``description``, and the envelope."""
    return {
        "description": description,
        "content": {
            "application/json": {
                "example": error_body("code", "what went wrong", "the offending field")
            }
        },
    }


COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    401: error_doc("No key, or a wrong, malformed or revoked one."),
    422: error_doc("The request does not fit the schema (the field is named)."),
}
"""What every route may answer (each resource's router documents them)."""
ID_ERRORS: dict[int | str, dict[str, Any]] = {
    **COMMON_ERRORS,
    404: error_doc("No such id, or one of another tenant (the same answer)."),
}
COMMAND_ERRORS: dict[int | str, dict[str, Any]] = {
    **ID_ERRORS,
    409: error_doc("The current state does not allow this change."),
}
