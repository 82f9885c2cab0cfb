"""The HTTP API's tenants: list, read, and set limits (admin keys only); a tenant key reads
its own tenant only; bad input is a 4xx with the JSON error body and changes nothing."""

from __future__ import annotations

import pytest
from api_support import bearer, error_of
from fastapi.testclient import TestClient

from tickwork.client import Client

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


@pytest.mark.parametrize(
    "body", [{"max_running": 0}, {"max_running": -1}, {"max_running": "5"},
             {"max_running": 1.5}, {"max_running": 10**12}, {"rate": 5}, {}]
)  # fmt: skip
def test_a_bad_limit_is_a_422_and_changes_nothing(
    web: TestClient, admin_key: str, client: Client, body: dict[str, object]
) -> None:
    client.set_tenant_limits("acme", max_running=4)
    answer = web.put(f"{TENANTS}/acme", json=body, headers=bearer(admin_key))
    assert answer.status_code == 422, answer.text
    error_of(answer)
    assert client.tenant("acme").limits.max_running == 4


def test_a_tenant_name_with_control_characters_is_refused(web: TestClient, admin_key: str) -> None:
    answer = web.put(f"{TENANTS}/a%01b", json={"max_running": 1}, headers=bearer(admin_key))
    assert answer.status_code == 422
    error_of(answer)
