"""Conformance: the scheduler's leader lease and its epoch (the trigger's fencing token)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from tickwork.errors import LeadershipLost
from tickwork.store import Store, open_store
from tickwork.store.base import Lease

Children = Callable[..., list[dict[str, Any]]]
TTL = timedelta(seconds=30)


def acquire(store: Store, node: str, now: datetime, ttl: timedelta = TTL) -> Lease:
    lease = store.acquire_leadership(node, ttl, now=now)
    assert lease is not None, f"{node} did not get the free lease at {now}"
    return lease


def test_a_free_lease_is_acquired(store: Store, t0: datetime) -> None:
    assert store.leader(now=t0) is None
    lease = acquire(store, "a", t0)
    assert lease.holder == "a"
    assert lease.expires_at == t0 + TTL
    assert store.leader(now=t0 + timedelta(seconds=1)) == lease


def test_a_held_lease_is_not_acquired_by_another_node(store: Store, t0: datetime) -> None:
    lease = acquire(store, "a", t0)
    assert store.acquire_leadership("b", TTL, now=t0 + timedelta(seconds=29)) is None
    assert store.leader(now=t0 + timedelta(seconds=29)) == lease


def test_the_holder_acquiring_again_renews_at_the_same_epoch(store: Store, t0: datetime) -> None:
    first = acquire(store, "a", t0)
    again = acquire(store, "a", t0 + timedelta(seconds=10))
    assert again.epoch == first.epoch
    assert again.expires_at == t0 + timedelta(seconds=10) + TTL


def test_an_expired_lease_goes_to_another_node_at_a_higher_epoch(
    store: Store, t0: datetime
) -> None:
    first = acquire(store, "a", t0)
    assert store.leader(now=t0 + TTL + timedelta(seconds=1)) is None
    second = acquire(store, "b", t0 + TTL + timedelta(seconds=1))
    assert second.holder == "b"
    assert second.epoch > first.epoch
    assert store.leader(now=t0 + TTL + timedelta(seconds=2)) == second


def test_epoch_increases_on_every_change_of_holder(store: Store, t0: datetime) -> None:
    epochs = []
    now = t0
    for node in ("a", "b", "a", "c", "b"):
        epochs.append(acquire(store, node, now).epoch)
        now += TTL + timedelta(seconds=1)
    assert epochs == sorted(set(epochs))


def test_the_holder_taking_back_its_expired_lease_gets_a_new_epoch(
    store: Store, t0: datetime
) -> None:
    first = acquire(store, "a", t0)
    again = acquire(store, "a", t0 + TTL + timedelta(seconds=1))
    assert again.epoch > first.epoch


def test_renew_extends_an_unexpired_lease(store: Store, t0: datetime) -> None:
    lease = acquire(store, "a", t0)
    renewed = store.renew_leadership(
        "a", lease.epoch, timedelta(seconds=60), now=t0 + timedelta(seconds=20)
    )
    assert renewed.epoch == lease.epoch
    assert renewed.holder == "a"
    assert renewed.expires_at == t0 + timedelta(seconds=80)
    assert store.acquire_leadership("b", TTL, now=t0 + timedelta(seconds=70)) is None


def test_a_renewal_is_seen_by_another_connection_at_once(
    store: Store, store_url: str, t0: datetime
) -> None:
    lease = acquire(store, "a", t0)
    renewed = store.renew_leadership("a", lease.epoch, TTL, now=t0 + timedelta(seconds=10))
    other = open_store(store_url)
    try:
        assert other.leader(now=t0 + TTL + timedelta(seconds=5)) == renewed
        assert other.acquire_leadership("b", TTL, now=t0 + TTL + timedelta(seconds=5)) is None
    finally:
        other.close()


def test_renew_after_expiry_raises_leadership_lost(store: Store, t0: datetime) -> None:
    lease = acquire(store, "a", t0)
    with pytest.raises(LeadershipLost):
        store.renew_leadership("a", lease.epoch, TTL, now=t0 + TTL + timedelta(seconds=1))
    assert store.leader(now=t0 + TTL + timedelta(seconds=1)) is None


def test_renew_after_a_takeover_raises_leadership_lost(store: Store, t0: datetime) -> None:
    old = acquire(store, "a", t0)
    new = acquire(store, "b", t0 + TTL + timedelta(seconds=1))
    with pytest.raises(LeadershipLost):
        store.renew_leadership("a", old.epoch, TTL, now=t0 + TTL + timedelta(seconds=2))
    assert store.leader(now=t0 + TTL + timedelta(seconds=2)) == new


def test_renew_with_a_wrong_epoch_or_node_raises_leadership_lost(
    store: Store, t0: datetime
) -> None:
    lease = acquire(store, "a", t0)
    with pytest.raises(LeadershipLost):
        store.renew_leadership("a", lease.epoch + 1, TTL, now=t0 + timedelta(seconds=1))
    with pytest.raises(LeadershipLost):
        store.renew_leadership("b", lease.epoch, TTL, now=t0 + timedelta(seconds=1))
    assert store.leader(now=t0 + timedelta(seconds=1)) == lease


def test_resign_frees_the_lease_at_once(store: Store) -> None:
    # resign_leadership takes no `now`: it acts on the store's clock, so this test does too.
    lease = store.acquire_leadership("a", timedelta(minutes=5))
    assert lease is not None
    store.resign_leadership("a", lease.epoch)
    assert store.leader() is None
    successor = store.acquire_leadership("b", timedelta(minutes=5))
    assert successor is not None
    assert successor.epoch > lease.epoch


def test_resign_by_a_non_holder_changes_nothing(store: Store, t0: datetime) -> None:
    lease = acquire(store, "a", t0)
    store.resign_leadership("b", lease.epoch)
    store.resign_leadership("a", lease.epoch - 1)
    assert store.leader(now=t0 + timedelta(seconds=1)) == lease


def test_leader_without_now_uses_the_store_clock(store: Store) -> None:
    lease = store.acquire_leadership("a", timedelta(minutes=5))
    assert lease is not None
    assert store.leader() == lease
    now = store.now()
    assert now < lease.expires_at <= now + timedelta(minutes=5)


def test_threads_racing_for_a_free_lease_elect_exactly_one(
    store: Store, store_url: str, t0: datetime
) -> None:
    threads = 6
    barrier = threading.Barrier(threads)
    won: list[tuple[str, int]] = []
    errors: list[BaseException] = []

    def race(node: str) -> None:
        own = open_store(store_url)
        try:
            barrier.wait()
            lease = own.acquire_leadership(node, TTL, now=t0)
            if lease is not None:
                won.append((node, lease.epoch))
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()

    workers = [threading.Thread(target=race, args=(f"n{i}",)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert len(won) == 1
    leader = store.leader(now=t0)
    assert leader is not None
    assert (leader.holder, leader.epoch) == won[0]


def test_processes_racing_for_a_free_lease_elect_exactly_one(
    store: Store, store_url: str, children: Children
) -> None:
    results = children(
        [{"op": "acquire", "url": store_url, "node": f"n{i}", "ttl": 60} for i in range(4)]
    )
    epochs = [r["epoch"] for r in results]
    winners = [i for i, epoch in enumerate(epochs) if epoch is not None]
    assert len(winners) == 1, f"epochs per process: {epochs}"
    leader = store.leader()
    assert leader is not None
    assert (leader.holder, leader.epoch) == (f"n{winners[0]}", epochs[winners[0]])
