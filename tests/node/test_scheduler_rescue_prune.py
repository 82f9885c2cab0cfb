"""The leader's housekeeping in process: rescue of expired run leases, prune of old runs;
a standby does neither."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tickwork.config import Config
from tickwork.errors import RunNotFound
from tickwork.job import JobSpec, Run, RunState
from tickwork.retry import RetryPolicy
from tickwork.schedule import Once
from tickwork.scheduler import Scheduler
from tickwork.store import Store
from tickwork.testing import wait_until

DEADLINE = 10.0
"""Seconds a condition may take to become true; generous, so a slow box fails on behaviour."""


def config(store: Store, node_id: str = "test-node", **overrides: Any) -> Config:
    values: dict[str, Any] = {
        "leader_lease": timedelta(seconds=2),
        "leader_renew": timedelta(milliseconds=100),
        "leader_safety_margin": timedelta(milliseconds=200),
        "rescue_interval": timedelta(milliseconds=100),
        "retention": timedelta(hours=1),
    }
    values.update(overrides)
    return Config(db_url=store.url, node_id=node_id, **values)


@pytest.fixture
def schedulers() -> Iterator[list[Scheduler]]:
    started: list[Scheduler] = []
    yield started
    for node in started:
        node.stop()


def claimed_run(store: Store, *, ago: timedelta, max_attempts: int = 3) -> Run:
    """A run claimed ``ago`` with a 1 s lease that nobody heartbeated since."""
    then = store.now() - ago
    spec = JobSpec(
        task="tests.work", schedule=Once(at=then), retry=RetryPolicy(max_attempts=max_attempts)
    )
    submitted = store.submit(spec, now=then)
    assert submitted.run is not None
    (run,) = store.claim("dead-worker", limit=1, lease=timedelta(seconds=1), now=then)
    assert run.id == submitted.run.id
    return run


def test_the_leader_rescues_a_run_whose_lease_expired(
    store: Store, schedulers: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    run = claimed_run(store, ago=timedelta(minutes=1))
    node = Scheduler(store, config(store))
    schedulers.append(node)

    node.start()

    wait_until(lambda: store.get_run(run.id).state is RunState.QUEUED, DEADLINE)
    rescued = store.get_run(run.id)
    assert rescued.attempt == 2
    wait_until(lambda: f"rescue run={run.id} to=queued" in caplog.messages, DEADLINE)


def test_a_run_on_its_last_attempt_is_rescued_to_dead(
    store: Store, schedulers: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    run = claimed_run(store, ago=timedelta(minutes=1), max_attempts=1)
    node = Scheduler(store, config(store))
    schedulers.append(node)

    node.start()

    wait_until(lambda: store.get_run(run.id).state is RunState.DEAD, DEADLINE)
    wait_until(lambda: f"rescue run={run.id} to=dead" in caplog.messages, DEADLINE)


def test_a_standby_rescues_nothing(store: Store, schedulers: list[Scheduler]) -> None:
    # Another node holds the lease (for a long while), so this scheduler stands by.
    assert store.acquire_leadership("other", timedelta(minutes=5)) is not None
    run = claimed_run(store, ago=timedelta(minutes=1))
    node = Scheduler(store, config(store))
    schedulers.append(node)
    node.start()

    # Five passes of the reaper: a standby that rescued would have done it in the first.
    node.reaper.wait_passes(node.reaper.passes + 5)

    assert not node.leading
    assert store.get_run(run.id).state is RunState.RUNNING


def test_the_leader_prunes_finished_runs_past_retention_as_it_takes_the_lead(
    store: Store, schedulers: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    old = claimed_run(store, ago=timedelta(hours=2))
    store.complete(old.id, old.fencing_token, now=store.now() - timedelta(hours=2))
    recent = claimed_run(store, ago=timedelta(minutes=2))
    store.complete(recent.id, recent.fencing_token, now=store.now() - timedelta(minutes=1))
    node = Scheduler(store, config(store))  # retention 1 h; prune interval 5 min
    schedulers.append(node)

    node.start()

    def pruned() -> bool:
        try:
            store.get_run(old.id)
        except RunNotFound:
            return True
        return False

    wait_until(pruned, DEADLINE)
    assert store.get_run(recent.id).state is RunState.SUCCEEDED
    wait_until(lambda: any(m.startswith("prune runs=1 ") for m in caplog.messages), DEADLINE)


def test_the_leader_folds_finished_runs_into_minutes_as_it_takes_the_lead(
    store: Store, schedulers: list[Scheduler]
) -> None:
    run = claimed_run(store, ago=timedelta(minutes=3))
    store.complete(run.id, run.fencing_token, now=store.now() - timedelta(minutes=2))
    node = Scheduler(store, config(store))
    schedulers.append(node)

    node.start()

    since = store.now() - timedelta(minutes=10)
    wait_until(lambda: sum(m.succeeded for m in store.run_minutes(since)) == 1, DEADLINE)


def test_a_standby_folds_nothing(store: Store, schedulers: list[Scheduler]) -> None:
    run = claimed_run(store, ago=timedelta(minutes=3))
    store.complete(run.id, run.fencing_token, now=store.now() - timedelta(minutes=2))
    assert store.acquire_leadership("other", timedelta(minutes=1)) is not None
    node = Scheduler(store, config(store))
    schedulers.append(node)
    node.start()
    wait_until(node.rollup.started.is_set, DEADLINE)
    assert not node.leading
    assert store.run_minutes(store.now() - timedelta(minutes=10)) == []
