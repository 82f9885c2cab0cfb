"""Tenants: each one's limits (max_running, rate, burst, weight) and its runs now.

``PUT`` replaces a tenant's limits, ``PATCH`` changes those named (docs/tenants.md); both
are for admin keys. A tenant key sees its own tenant only.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, WithJsonSchema
from pydantic_core import PydanticCustomError

from tickwork.errors import TenantNotFound, ValidationError
from tickwork.inputs import parse_rate
from tickwork.job import MAX_NAME_LENGTH
from tickwork.records import (
    MAX_RUNNING_CEILING,
    RATE_CEILING,
    RATE_FLOOR,
    WEIGHT_CEILING,
    WEIGHT_FLOOR,
    to_json,
)
from tickwork.web.api.auth import AdminDep, ClientDep, PrincipalDep, resource_router
from tickwork.web.api.errors import COMMON_ERRORS, error_doc
from tickwork.web.params import PLAIN_TEXT

router = resource_router()


class TenantOut(BaseModel):
    tenant: str
    max_running: int | None
    rate: float | None = Field(description="Runs started per second; null: no rate limit.")
    burst: int | None = Field(description="The token bucket's size; null: one second's worth.")
    weight: float = Field(description="The tenant's share when tenants compete (default 1).")
    running: int = Field(description="Runs of the tenant in state running now.")
    due: int = Field(description="Runs queued (or awaiting retry) whose time has come.")
    held: int = Field(description="Due runs a limit keeps from starting now.")
    at_limit: bool = Field(description="At its max_running: none of its runs is claimed now.")


def _rate(value: object) -> float | None:
    """A rate in a body: a number per second or text such as ``"20/s"``, through the one
    parser the CLI uses; a 422 naming ``rate`` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PydanticCustomError(
            "rate", 'rate must be a number per second or text such as "20/s", "30/m"'
        )
    try:
        return parse_rate(value)
    except ValidationError as exc:
        raise PydanticCustomError("rate", exc.message) from None


RateIn = Annotated[
    float | None,
    BeforeValidator(_rate),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": RATE_FLOOR, "maximum": RATE_CEILING},
                {"type": "string", "pattern": r"^\s*[0-9.]+\s*(/\s*[smh])?\s*$"},
                {"type": "null"},
            ]
        }
    ),
]


class TenantLimitsIn(BaseModel):
    """A tenant's limits. ``PUT`` replaces them all (a field left out or null is cleared,
    ``weight`` back to 1); ``PATCH`` changes only the fields it names (null clears one).
    Unknown fields are refused (422)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"max_running": 5, "rate": "20/s", "burst": 40}]},
    )

    max_running: Annotated[int | None, Strict(), Field(ge=1, le=MAX_RUNNING_CEILING)] = Field(
        None,
        description="At most this many of the tenant's runs execute at once, across every "
        "worker; null: no limit.",
    )
    rate: RateIn = Field(
        None,
        description="Runs started per second across every worker: a number, or text such as "
        '"20/s", "30/m" or "100/h"; null: no limit.',
    )
    burst: Annotated[int | None, Strict(), Field(ge=1, le=MAX_RUNNING_CEILING)] = Field(
        None,
        description="Starts the rate allows at once after a quiet spell (needs a rate); "
        "null: one second's worth.",
    )
    weight: Annotated[
        float | None, Strict(), Field(ge=WEIGHT_FLOOR, le=WEIGHT_CEILING, allow_inf_nan=False)
    ] = Field(None, description="The tenant's share when tenants compete; null: 1.")

    def changes(self, *, replace: bool) -> dict[str, Any]:
        """The keyword arguments of :meth:`Client.set_tenant_limits`: every limit (``PUT``),
        or those the body names (``PATCH``), where clearing the rate clears its burst too."""
        given = set(TenantLimitsIn.model_fields) if replace else self.model_fields_set
        changes = {name: getattr(self, name) for name in given}
        if "rate" in changes and changes["rate"] is None:
            changes.setdefault("burst", None)
        return changes


TenantName = Annotated[
    str,
    Path(min_length=1, max_length=MAX_NAME_LENGTH, pattern=PLAIN_TEXT, description="A tenant."),
]
TENANT_ERRORS: dict[int | str, dict[str, Any]] = {
    **COMMON_ERRORS,
    404: error_doc("A tenant key asking for another tenant."),
}
TENANT_WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    **COMMON_ERRORS,
    400: error_doc("Limits that do not agree (a burst without a rate)."),
    403: error_doc("A tenant key: setting limits is for admins."),
}


@router.get(
    "/tenants",
    response_model=list[TenantOut],
    summary="Tenants with limits or runs now: limits, running, due and held (a tenant key: "
    "its own)",
)
def list_tenants(principal: PrincipalDep, client: ClientDep) -> list[dict[str, Any]]:
    if principal.tenant is not None:
        return [to_json(client.tenant(principal.tenant))]
    return [to_json(status) for status in client.list_tenants()]


@router.get(
    "/tenants/{tenant}",
    response_model=TenantOut,
    summary="A tenant's limits and runs now",
    responses=TENANT_ERRORS,
)
def get_tenant(tenant: TenantName, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    if principal.tenant is not None and tenant != principal.tenant:
        raise TenantNotFound(tenant)
    return to_json(client.tenant(tenant))


@router.put(
    "/tenants/{tenant}",
    response_model=TenantOut,
    summary="Replace a tenant's limits: one left out is cleared (admin keys only); workers "
    "obey them from their next claim",
    responses=TENANT_WRITE_ERRORS,
)
def put_tenant(
    tenant: TenantName, body: TenantLimitsIn, principal: AdminDep, client: ClientDep
) -> dict[str, Any]:
    return to_json(client.set_tenant_limits(tenant, **body.changes(replace=True)))


@router.patch(
    "/tenants/{tenant}",
    response_model=TenantOut,
    summary="Change the limits the body names, keep the others (admin keys only)",
    responses=TENANT_WRITE_ERRORS,
)
def patch_tenant(
    tenant: TenantName, body: TenantLimitsIn, principal: AdminDep, client: ClientDep
) -> dict[str, Any]:
    changes = body.changes(replace=False)
    if not changes:
        raise ValidationError(
            "nothing to change: give max_running, rate, burst or weight", field="body"
        )
    return to_json(client.set_tenant_limits(tenant, **changes))
