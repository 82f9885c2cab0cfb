"""Conformance: API keys, and the dashboard's sessions that sign in with them."""

from __future__ import annotations

from datetime import datetime, timedelta

from tickwork.store import Store
from tickwork.store.base import ApiKey


def make_key(
    store: Store, now: datetime, *, prefix: str = "aaaaaaaa", admin: bool = False
) -> ApiKey:
    return store.create_api_key(
        key_hash=prefix * 8, prefix=prefix, tenant="acme", admin=admin, label=None, now=now
    )


def test_a_revoked_key_is_kept_so_the_store_remembers_a_key_was_created(
    store: Store, t0: datetime
) -> None:
    key = make_key(store, t0)

    revoked = store.revoke_api_key(key.prefix, now=t0 + timedelta(seconds=1))

    assert store.api_key_by_hash(key.prefix * 8) is None
    assert store.list_api_keys() == [revoked]
    assert revoked.revoked_at == t0 + timedelta(seconds=1)
