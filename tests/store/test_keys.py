"""Conformance: API keys, and the dashboard's sessions that sign in with them."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tickwork.errors import ApiKeyNotFound
from tickwork.store import Store
from tickwork.store.base import SESSION_FORGET_AFTER, SESSION_SEEN_EVERY, ApiKey, Session


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


# -- sessions ------------------------------------------------------------------------------

IDLE = timedelta(hours=1)
LIFETIME = timedelta(hours=3)


def sign_in(store: Store, key: ApiKey, now: datetime, token_hash: str = "h" * 64) -> Session:
    return store.sign_in(
        key_id=key.id, token_hash=token_hash, idle_timeout=IDLE, lifetime=LIFETIME, now=now
    )


def test_a_session_signs_in_with_a_live_key_and_is_found_by_its_hash(
    store: Store, t0: datetime
) -> None:
    key = make_key(store, t0)

    session = sign_in(store, key, t0)
    found = store.session_by_hash("h" * 64, now=t0 + timedelta(seconds=10))

    assert session == Session(session.id, key.id, t0, t0, IDLE, t0 + LIFETIME, None)
    assert found == (session, key)
    assert store.session_by_hash("x" * 64, now=t0) is None


def test_a_revoked_key_cannot_sign_in(store: Store, t0: datetime) -> None:
    key = make_key(store, t0)
    store.revoke_api_key(key.prefix, now=t0)

    with pytest.raises(ApiKeyNotFound):
        sign_in(store, key, t0)
    with pytest.raises(ApiKeyNotFound):
        store.sign_in(
            key_id=key.id + 1000, token_hash="i" * 64, idle_timeout=IDLE, lifetime=LIFETIME
        )
    assert store.session_by_hash("h" * 64, now=t0) is None


def test_a_session_left_idle_for_its_idle_timeout_ends(store: Store, t0: datetime) -> None:
    key = make_key(store, t0)
    sign_in(store, key, t0)
    used = t0 + IDLE - timedelta(seconds=1)

    assert store.session_by_hash("h" * 64, now=used) is not None  # marked seen at `used`
    assert store.session_by_hash("h" * 64, now=used + IDLE - timedelta(seconds=1)) is not None
    assert store.session_by_hash("h" * 64, now=used + IDLE + IDLE) is None


def test_a_session_is_marked_seen_at_most_once_a_minute(store: Store, t0: datetime) -> None:
    key = make_key(store, t0)
    sign_in(store, key, t0)
    soon = t0 + SESSION_SEEN_EVERY - timedelta(seconds=1)
    later = t0 + SESSION_SEEN_EVERY + timedelta(seconds=1)

    store.session_by_hash("h" * 64, now=soon)
    after_soon = store.session_by_hash("h" * 64, now=soon)
    store.session_by_hash("h" * 64, now=later)
    after_later = store.session_by_hash("h" * 64, now=later)

    assert after_soon is not None
    assert after_soon[0].last_seen_at == t0
    assert after_later is not None
    assert after_later[0].last_seen_at == later


def test_a_session_ends_at_the_end_of_its_lifetime_however_busy(store: Store, t0: datetime) -> None:
    key = make_key(store, t0)
    sign_in(store, key, t0)
    busy = [t0 + timedelta(minutes=m) for m in range(0, 180, 30)]

    assert all(store.session_by_hash("h" * 64, now=at) is not None for at in busy)
    assert store.session_by_hash("h" * 64, now=t0 + LIFETIME) is None


def test_signing_out_ends_the_session_once(store: Store, t0: datetime) -> None:
    key = make_key(store, t0)
    sign_in(store, key, t0)
    sign_in(store, key, t0, token_hash="o" * 64)

    first = store.sign_out("h" * 64, now=t0 + timedelta(seconds=1))
    again = store.sign_out("h" * 64, now=t0 + timedelta(seconds=2))

    assert (first, again) == (True, False)
    assert store.sign_out("x" * 64, now=t0) is False
    assert store.session_by_hash("h" * 64, now=t0 + timedelta(seconds=3)) is None
    assert store.session_by_hash("o" * 64, now=t0 + timedelta(seconds=3)) is not None


def test_revoking_a_key_ends_its_sessions_and_no_others(store: Store, t0: datetime) -> None:
    mine = make_key(store, t0)
    theirs = make_key(store, t0, prefix="bbbbbbbb")
    sign_in(store, mine, t0)
    sign_in(store, theirs, t0, token_hash="t" * 64)

    store.revoke_api_key(mine.prefix, now=t0 + timedelta(seconds=1))

    assert store.session_by_hash("h" * 64, now=t0 + timedelta(seconds=2)) is None
    assert store.session_by_hash("t" * 64, now=t0 + timedelta(seconds=2)) is not None
    # The session itself was ended, not only hidden behind its key: it stays signed out.
    assert store.sign_out("h" * 64, now=t0 + timedelta(seconds=3)) is False


def test_the_rows_of_sessions_ended_over_a_day_ago_are_deleted(store: Store, t0: datetime) -> None:
    key = make_key(store, t0)
    sign_in(store, key, t0)
    store.sign_out("h" * 64, now=t0)
    sign_in(store, key, t0, token_hash="e" * 64)  # expires at t0 + LIFETIME
    later = t0 + LIFETIME + SESSION_FORGET_AFTER + timedelta(seconds=1)
    sign_in(store, key, later - timedelta(minutes=10), token_hash="l" * 64)

    # A token hash is unique among stored sessions: taking one again shows the row is gone.
    sign_in(store, key, later, token_hash="h" * 64)
    sign_in(store, key, later, token_hash="e" * 64)

    assert store.session_by_hash("h" * 64, now=later) is not None
    assert store.session_by_hash("l" * 64, now=later) is not None  # live: kept
