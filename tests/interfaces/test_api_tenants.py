"""The HTTP API's tenants: list, read, and set limits (admin keys only); a tenant key reads
its own tenant only; bad input is a 4xx with the JSON error body and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from api_support import bearer, error_of
from fastapi.testclient import TestClient

from tickwork.client import Client
from tickwork.job import JobSpec
from tickwork.records import TenantLimits
from tickwork.schedule import Once
from tickwork.store import Store

TENANTS = "/api/v1/tenants"


def test_an_admin_sets_a_limit_and_every_list_shows_it(
    web: TestClient, admin_key: str, client: Client
) -> None:
    answer = web.put(f"{TENANTS}/acme", json={"max_running": 5}, headers=bearer(admin_key))
    assert answer.status_code == 200, answer.text
    assert answer.json()["max_running"] == 5
    assert client.tenant("acme").limits.max_running == 5
    listed = web.get(TENANTS, headers=bearer(admin_key)).json()
    assert [(t["tenant"], t["max_running"], t["running"], t["due"]) for t in listed] == [
        ("acme", 5, 0, 0)
    ]
    got = web.get(f"{TENANTS}/acme", headers=bearer(admin_key)).json()
    assert (got["max_running"], got["at_limit"]) == (5, False)
    cleared = web.put(f"{TENANTS}/acme", json={"max_running": None}, headers=bearer(admin_key))
    assert cleared.json()["max_running"] is None


def test_a_tenant_key_reads_its_own_tenant_only(
    web: TestClient, acme_key: str, client: Client
) -> None:
    client.set_tenant_limits("acme", max_running=2)
    client.set_tenant_limits("globex", max_running=3)
    own = web.get(f"{TENANTS}/acme", headers=bearer(acme_key))
    assert own.status_code == 200
    assert own.json()["max_running"] == 2
    other = web.get(f"{TENANTS}/globex", headers=bearer(acme_key))
    assert other.status_code == 404
    assert error_of(other)["code"] == "tenant_not_found"
    assert [t["tenant"] for t in web.get(TENANTS, headers=bearer(acme_key)).json()] == ["acme"]


def test_a_tenant_key_cannot_set_limits(web: TestClient, acme_key: str, client: Client) -> None:
    answer = web.put(f"{TENANTS}/acme", json={"max_running": 9}, headers=bearer(acme_key))
    assert answer.status_code == 403
    error_of(answer)
    assert client.tenant("acme").limits.max_running is None


def test_put_replaces_every_limit_and_patch_changes_only_those_it_names(
    web: TestClient, admin_key: str, client: Client
) -> None:
    body = {"max_running": 5, "rate": "30/m", "burst": 4, "weight": 2}
    put = web.put(f"{TENANTS}/acme", json=body, headers=bearer(admin_key))
    assert put.status_code == 200, put.text
    got = put.json()
    assert (got["max_running"], got["rate"], got["burst"], got["weight"]) == (5, 0.5, 4, 2.0)
    assert client.tenant("acme").limits == TenantLimits("acme", 5, 0.5, 4, 2.0)

    patched = web.patch(f"{TENANTS}/acme", json={"rate": 20}, headers=bearer(admin_key))
    assert patched.status_code == 200, patched.text
    assert client.tenant("acme").limits == TenantLimits("acme", 5, 20.0, 4, 2.0)

    patched = web.patch(f"{TENANTS}/acme", json={"rate": None}, headers=bearer(admin_key))
    assert patched.status_code == 200, patched.text  # clearing the rate clears its burst
    assert client.tenant("acme").limits == TenantLimits("acme", 5, None, None, 2.0)

    put = web.put(f"{TENANTS}/acme", json={"rate": 1.5}, headers=bearer(admin_key))
    assert put.status_code == 200, put.text  # what a PUT leaves out is cleared
    assert client.tenant("acme").limits == TenantLimits("acme", rate=1.5)

    cleared = web.put(f"{TENANTS}/acme", json={}, headers=bearer(admin_key))
    assert cleared.status_code == 200
    assert web.get(TENANTS, headers=bearer(admin_key)).json() == []  # nothing left to list


def test_held_counts_the_due_runs_a_limit_keeps_waiting(
    web: TestClient, admin_key: str, client: Client, store: Store
) -> None:
    now = store.now()
    store.submit_many([JobSpec(task="t", schedule=Once(at=now), tenant="acme")] * 5, now=now)
    client.set_tenant_limits("acme", max_running=2)
    store.claim("w", limit=10)
    got = web.get(f"{TENANTS}/acme", headers=bearer(admin_key)).json()
    assert (got["running"], got["due"], got["held"], got["at_limit"]) == (2, 3, 3, True)


BAD_LIMITS = (
    ("put", {"max_running": 0}, "max_running"), ("put", {"max_running": -1}, "max_running"),
    ("put", {"max_running": "5"}, "max_running"), ("put", {"max_running": 1.5}, "max_running"),
    ("put", {"max_running": 10**12}, "max_running"), ("put", {"rate": 0}, "rate"),
    ("put", {"rate": -2.5}, "rate"), ("put", {"rate": "fast"}, "rate"),
    ("put", {"rate": "20/d"}, "rate"), ("put", {"rate": True}, "rate"),
    ("put", {"rate": "0/s"}, "rate"), ("put", {"rate": [20]}, "rate"),
    ("put", {"burst": 0, "rate": 5}, "burst"), ("put", {"burst": 2.5, "rate": 5}, "burst"),
    ("put", {"weight": 0}, "weight"), ("put", {"weight": "2"}, "weight"),
    ("put", {"weight": 10**6}, "weight"), ("put", {"speed": 5}, "speed"),
    ("patch", {"max_running": 0}, "max_running"), ("patch", {"rate": "x"}, "rate"),
    ("patch", {"concurrency": 3}, "concurrency"),
)  # fmt: skip
"""Limits refused with 422: a value of the wrong type or out of range, or an unknown field."""
DISAGREEING_LIMITS: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("put", {"burst": 5}, "burst"), ("patch", {}, "body"),
    ("patch", {"rate": None, "burst": 3}, "burst"),
)  # fmt: skip
"""Limits refused with 400: each valid alone, but they do not agree (or say nothing)."""


@pytest.mark.parametrize(
    ("method", "body", "field", "status"),
    [(*case, 422) for case in BAD_LIMITS] + [(*case, 400) for case in DISAGREEING_LIMITS],
)
def test_a_bad_limit_is_refused_naming_the_field_and_changes_nothing(
    *,
    web: TestClient,
    admin_key: str,
    client: Client,
    method: str,
    body: dict[str, object],
    field: str,
    status: int,
) -> None:
    client.set_tenant_limits("acme", max_running=4, rate=10.0)
    answer = web.request(method, f"{TENANTS}/acme", json=body, headers=bearer(admin_key))
    assert answer.status_code == status, answer.text
    assert error_of(answer)["field"] == field
    assert client.tenant("acme").limits == TenantLimits("acme", max_running=4, rate=10.0)


def test_a_tenant_key_cannot_patch_limits(web: TestClient, acme_key: str, client: Client) -> None:
    answer = web.patch(f"{TENANTS}/acme", json={"rate": 100}, headers=bearer(acme_key))
    assert answer.status_code == 403
    assert client.tenant("acme").limits.rate is None


def test_a_tenant_name_with_control_characters_is_refused(web: TestClient, admin_key: str) -> None:
    answer = web.put(f"{TENANTS}/a%01b", json={"max_running": 1}, headers=bearer(admin_key))
    assert answer.status_code == 422
    error_of(answer)
