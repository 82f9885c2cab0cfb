"""Leader election in process: one leader, hand-over, and a leader that stops acting on
its own monotonic clock before the store would tell it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
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

DEADLINE = 10.0
"""Seconds a condition may take to become true; generous, so a slow box fails on behaviour."""


def eventually(condition: Callable[[], object], timeout: float = DEADLINE) -> None:
    """Poll ``condition`` until it is truthy, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout:g} s")
        time.sleep(0.01)


class SteppedClock:
    """Real wall time; a monotonic clock that tests can jump forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


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

    eventually(lambda: a.leading or b.leading)
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
    eventually(lambda: a.leading)
    first_epoch = a.epoch
    assert first_epoch is not None
    b = Scheduler(store, fast(store, "b", **long_lease))
    schedulers.append(b)
    b.start()

    a.stop()

    assert not a.leading
    eventually(lambda: b.leading, timeout=5.0)  # far below the 60 s lease
    assert b.epoch is not None
    assert b.epoch > first_epoch


def test_leader_stops_acting_when_its_lease_may_have_lapsed_by_its_monotonic_clock(
    store: Store,
) -> None:
    clock = SteppedClock()
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
    clock = SteppedClock()
    config = fast(store, "a", leader_lease=timedelta(seconds=30))
    election = Election(store, config, clock)
    trigger = Trigger(store, config, election, clock)
    past = store.now() - timedelta(minutes=5)
    job = store.submit(JobSpec(task="tests.tick", schedule=Cron("* * * * *")), now=past).job
    election.beat()
    clock.advance(30)  # lapsed locally; the renewal that would fix it is not sent
    trigger.start()
    try:
        # Several poll intervals: a trigger loop that ignored the lapse would have acted.
        time.sleep(0.5)
        assert store.list_runs(job_id=job.id).items == []

        election.beat()  # a renewal gets through: acting again, at the same epoch

        eventually(lambda: store.list_runs(job_id=job.id).items)
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
    a = Scheduler(store, fast(store, "a"))
    schedulers.append(a)
    a.start()
    eventually(lambda: a.leading)
    epoch = a.epoch

    # Two lease lengths: without renewals the lease would have expired (and the epoch moved).
    until = time.monotonic() + 4.0
    while time.monotonic() < until:
        lease = store.leader()
        assert lease is not None
        assert (lease.holder, lease.epoch) == ("a", epoch)
        time.sleep(0.05)
    assert a.epoch == epoch


def test_a_registered_scheduler_shows_in_the_cluster_view_until_it_stops(store: Store) -> None:
    node = Scheduler(store, fast(store, "a"), register=True)
    node.start()
    try:
        eventually(lambda: [n.id for n in store.list_nodes()] == ["a"])
        (row,) = store.list_nodes()
        assert row.kind == "scheduler"
        seen = row.last_seen_at
        eventually(lambda: store.list_nodes()[0].last_seen_at > seen)  # marked seen each beat
    finally:
        node.stop()
    assert store.list_nodes() == []
