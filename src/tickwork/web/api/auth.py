"""Who calls the API, as its routes see it: the dependencies that give a route its caller
and the client, the tenant a listing covers, and the router each resource builds on.

Every route authenticates its caller (:mod:`tickwork.web.auth`) and passes the caller's
tenant to every client call (``None`` for an admin).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from tickwork.client import Client
from tickwork.web.api.errors import COMMON_ERRORS
from tickwork.web.auth import CallerFirst, Principal, get_admin, get_client, get_principal
from tickwork.web.errors import Forbidden

PREFIX = "/api/v1"

ClientDep = Annotated[Client, Depends(get_client)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
AdminDep = Annotated[Principal, Depends(get_admin)]
"""The caller, when it holds an admin key (403 otherwise)."""


def resource_router() -> APIRouter:
    """A resource's router: its routes under :data:`PREFIX`, documenting the errors every
    route may answer, and knowing their caller before they read a body
    (:class:`~tickwork.web.auth.CallerFirst`)."""
    return APIRouter(prefix=PREFIX, responses=COMMON_ERRORS, route_class=CallerFirst)


def tenant_scope(principal: Principal, tenant: str | None) -> str | None:
    """The tenant a listing covers: the key's own; an admin's choice (None: all)."""
    if principal.admin:
        return tenant
    if tenant is not None and tenant != principal.tenant:
        raise Forbidden("a tenant key sees its own tenant only", field="tenant")
    return principal.tenant
