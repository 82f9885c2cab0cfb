"""Fixtures the HTTP API tests share: a client on the test's store, keys, and an app."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tickwork.client import Client
from tickwork.store import Store
from tickwork.web.app import create_app


@pytest.fixture
def client(store: Store) -> Client:
    return Client(store)


@pytest.fixture
def admin_key(client: Client) -> str:
    return client.create_api_key(tenant="ops", admin=True)[1]


@pytest.fixture
def acme_key(client: Client) -> str:
    return client.create_api_key(tenant="acme")[1]


@pytest.fixture
def web(client: Client, admin_key: str) -> Iterator[TestClient]:
    """An unauthenticated HTTP client on an app that requires keys."""
    with TestClient(create_app(client, open_access=False)) as test_client:
        yield test_client
