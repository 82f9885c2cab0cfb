"""The cluster: the leader lease and every scheduler and worker node (admin keys only)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tickwork.records import to_json
from tickwork.web.api.auth import AdminDep, ClientDep, resource_router
from tickwork.web.api.errors import error_doc

router = resource_router()


class LeaseOut(BaseModel):
    holder: str
    epoch: int
    expires_at: str


class NodeOut(BaseModel):
    id: str
    kind: str
    host: str
    pid: int
    started_at: str
    last_seen_at: str
    running: int
    info: dict[str, Any]


class ClusterOut(BaseModel):
    leader: LeaseOut | None
    nodes: list[NodeOut]
    now: str


@router.get(
    "/cluster",
    response_model=ClusterOut,
    summary="The leader and every scheduler and worker (admin keys only)",
    responses={403: error_doc("A tenant key: the cluster view is for admins.")},
)
def cluster(principal: AdminDep, client: ClientDep) -> dict[str, Any]:
    return to_json(client.cluster())
