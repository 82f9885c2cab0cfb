"""Leader election in process: one leader, hand-over, and a leader that stops acting on
its own monotonic clock before the store would tell it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tickwork.config import Config
from tickwork.errors import LeadershipLost
from tickwork.job import JobSpec
from tickwork.schedule import Cron
from tickwork.scheduler import Scheduler
from tickwork.scheduler.election import Election
from tickwork.scheduler.trigger import Trigger
from tickwork.store import Store, open_store
from tickwork.store.base import LeaderTerm
from tickwork.testing import FakeClock, wait_until

DEADLINE = 10.0
"""Seconds a condition may take to become true; generous, so a slow box fails on behaviour."""


def fast(store: Store, node_id: str, **overrides: Any) -> Config:
    """Scaled-down timings: lease 2 s, renewed every 100 ms."""
    values: dict[str, Any] = {
        "leader_lease": timedelta(seconds=2),
        "leader_renew": timedelta(milliseconds=100),
        "leader_safety_margin": timedelta(milliseconds=200),
        "poll_interval": timedelta(milliseconds=50),
    }
    values.update(overrides)
    return Config(db_url=store.url, node_id=node_id, **values)


@pytest.fixture
def schedulers(store: Store) -> Iterator[list[Scheduler]]:
    """Schedulers a test starts; all stopped at the end."""
    started: list[Scheduler] = []
    yield started
    for node in started:
        node.stop()


def test_of_two_schedulers_exactly_one_leads(store: Store, schedulers: list[Scheduler]) -> None:
    a = Scheduler(store, fast(store, "a"))
    b = Scheduler(store, fast(store, "b"))
    schedulers += [a, b]
    a.start()
    b.start()

    wait_until(lambda: a.leading or b.leading, DEADLINE)
    leader, standby = (a, b) if a.leading else (b, a)
    assert not standby.leading
    assert standby.epoch is None
    lease = store.leader()
    assert lease is not None
    assert (lease.holder, lease.epoch) == (leader.node_id, leader.epoch)


def test_stopping_the_leader_resigns_so_the_standby_leads_without_waiting_out_the_lease(
    store: Store, schedulers: list[Scheduler]
) -> None:
    long_lease = {"leader_lease": timedelta(seconds=60)}
    a = Scheduler(store, fast(store, "a", **long_lease))
    schedulers.append(a)
    a.start()
    wait_until(lambda: a.leading, DEADLINE)
    first_epoch = a.epoch
    assert first_epoch is not None
    b = Scheduler(store, fast(store, "b", **long_lease))
    schedulers.append(b)
    b.start()

    a.stop()

    assert not a.leading
    wait_until(lambda: b.leading, timeout=5.0)  # far below the 60 s lease
    assert b.epoch is not None
    assert b.epoch > first_epoch


def test_leader_stops_acting_when_its_lease_may_have_lapsed_by_its_monotonic_clock(
    store: Store,
) -> None:
    clock = FakeClock()
    config = fast(store, "a", leader_lease=timedelta(seconds=30))
    election = Election(store, config, clock)

    election.beat()
    epoch = election.epoch()
    assert epoch is not None
    clock.advance(30 - 0.5 - 0.1)  # lease 30 s, safety margin 0.2 s: still acting
    assert election.epoch() == epoch

    clock.advance(0.5)

    assert election.epoch() is None
    # The store has not been told anything yet: by its clock the lease is still held.
    lease = store.leader()
    assert lease is not None
    assert (lease.holder, lease.epoch) == ("a", epoch)


def test_a_lapsed_leader_triggers_nothing_until_it_renews(store: Store) -> None:
    clock = FakeClock()
    config = fast(store, "a", leader_lease=timedelta(seconds=30))
    election = Election(store, config, clock)
    trigger = Trigger(store, config, election, clock)
    past = clock.now() - timedelta(minutes=5)
    job = store.submit(JobSpec(task="tests.tick", schedule=Cron("* * * * *")), now=past).job
    election.beat()
    # Lapsed locally (lease 30 s less the 0.2 s margin), still held by the store's reading
    # of this clock; the renewal that would fix it is not sent.
    clock.advance(29.9)
    lease = store.leader(now=clock.now())
    assert lease is not None
    trigger.start()
    try:
        # Three passes of the loop, each of which saw a job due: one that ignored the lapse
        # would have acted in the first.
        for _ in range(3):
            done = trigger.passes
            trigger.wake()
            trigger.wait_passes(done + 1)
        assert store.list_runs(job_id=job.id).items == []

        election.beat()  # a renewal gets through: acting again, at the same epoch
        assert election.epoch() == lease.epoch
        trigger.wake()

        wait_until(lambda: store.list_runs(job_id=job.id).items)
    finally:
        trigger.stop()


def test_a_renewal_refused_by_the_store_stops_leading_at_once(store: Store) -> None:
    election = Election(store, fast(store, "a", leader_lease=timedelta(seconds=30)))
    election.beat()
    epoch = election.epoch()
    assert epoch is not None
    # Another node takes the lease over (the store's clock moved past its expiry).
    later = store.now() + timedelta(seconds=31)
    thief = store.acquire_leadership("b", timedelta(seconds=60), now=later)
    assert thief is not None
    assert thief.epoch > epoch

    election.beat()

    assert election.epoch() is None
    with pytest.raises(LeadershipLost):
        store.trigger(epoch)


def test_a_store_error_stops_leading_at_once(store: Store) -> None:
    own = open_store(store.url)
    election = Election(own, fast(store, "a", leader_lease=timedelta(seconds=30)))
    election.beat()
    assert election.epoch() is not None

    own.close()  # every call on it now fails
    election.beat()

    assert election.epoch() is None


def test_a_healthy_leader_renews_and_keeps_its_epoch(
    store: Store, schedulers: list[Scheduler]
) -> None:
    clock = FakeClock()
    a = Scheduler(store, fast(store, "a"), clock)
    schedulers.append(a)
    a.start()
    wait_until(lambda: a.leading)
    epoch = a.epoch

    # Two lease lengths, a renewal interval at a time: without renewals the lease would
    # have expired (and the epoch moved).
    for _ in range(40):
        done = a.election.passes
        clock.advance(0.1)
        a.election.wait_passes(done + 1)
        lease = store.leader(now=clock.now())
        assert lease is not None
        assert (lease.holder, lease.epoch) == ("a", epoch)
    assert a.epoch == epoch


def test_a_registered_scheduler_shows_in_the_cluster_view_until_it_stops(store: Store) -> None:
    node = Scheduler(store, fast(store, "a"), register=True)
    node.start()
    try:
        wait_until(lambda: [n.id for n in store.list_nodes()] == ["a"], DEADLINE)
        (row,) = store.list_nodes()
        assert row.kind == "scheduler"
        seen = row.last_seen_at
        wait_until(
            lambda: store.list_nodes()[0].last_seen_at > seen, DEADLINE
        )  # marked seen each beat
    finally:
        node.stop()
    assert store.list_nodes() == []


def test_a_failover_through_the_election_records_the_leader_terms(store: Store) -> None:
    clock = FakeClock()
    ttl = timedelta(seconds=2)
    a = Election(store, fast(store, "a"), clock)
    b = Election(store, fast(store, "b"), clock)
    start = clock.now()
    a.beat()
    b.beat()  # a standby: its refused acquire writes no term
    first = a.epoch()
    assert first is not None
    assert b.epoch() is None
    clock.advance(1)
    a.beat()  # a renewal: no term either
    # "a" dies: its lease (renewed at start + 1 s) runs out at start + 3 s; "b" takes over.
    clock.advance(4)
    b.beat()
    second = b.epoch()
    assert second is not None

    terms = store.leader_terms(since=start, until=clock.now(), now=clock.now())

    assert terms == [
        LeaderTerm(first, "a", start, start + timedelta(seconds=1) + ttl),
        LeaderTerm(second, "b", clock.now(), None),
    ]
