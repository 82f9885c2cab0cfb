"""The trigger loop in process: on time to the millisecond, woken early by new jobs,
batches back to back, skips logged with their fate."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from tickwork.config import Config
from tickwork.job import ONE_OFF_LEAD, JobSpec, MisfirePolicy, OverlapPolicy
from tickwork.schedule import Cron, Interval, Once
from tickwork.scheduler import Scheduler
from tickwork.store import Store
from tickwork.testing import wait_until

DEADLINE = 10.0
"""Seconds a condition may take to become true; generous, so a slow box fails on behaviour."""
ON_TIME = timedelta(milliseconds=500)
"""Upper bound asserted on trigger lag: half a per-second slot, far below the 30 s polls the
tests set, so only a wake-up at the slot passes; the lag itself (typically under 5 ms) is
measured by benchmarks/start_lag.py, not asserted here (a loaded box took 181 ms)."""


def config(store: Store, **overrides: Any) -> Config:
    values: dict[str, Any] = {
        "leader_lease": timedelta(seconds=2),
        "leader_renew": timedelta(milliseconds=100),
        "leader_safety_margin": timedelta(milliseconds=200),
    }
    values.update(overrides)
    return Config(db_url=store.url, node_id="test-node", **values)


@pytest.fixture
def start(store: Store) -> Iterator[Callable[..., Scheduler]]:
    """``start(**config_overrides)``: a leading scheduler on ``store``, stopped at the end."""
    started: list[Scheduler] = []

    def run(**overrides: Any) -> Scheduler:
        node = Scheduler(store, config(store, **overrides))
        started.append(node)
        node.start()
        wait_until(lambda: node.leading, DEADLINE)
        return node

    yield run
    for node in started:
        node.stop()


def test_a_per_second_cron_job_is_queued_at_each_slot_not_at_the_next_poll(
    store: Store, start: Callable[..., Scheduler]
) -> None:
    job = store.submit(JobSpec(task="tests.tick", schedule=Cron("* * * * * *"))).job
    start(poll_interval=timedelta(seconds=30))

    wait_until(lambda: len(store.list_runs(job_id=job.id).items) >= 3, DEADLINE)

    runs = sorted(store.list_runs(job_id=job.id).items, key=lambda r: r.scheduled_for)
    slots = [r.scheduled_for for r in runs]
    assert slots == [slots[0] + timedelta(seconds=i) for i in range(len(slots))]
    for run in runs:
        assert timedelta(0) <= run.created_at - run.scheduled_for < ON_TIME


def test_a_job_submitted_while_the_trigger_sleeps_wakes_it(
    store: Store, start: Callable[..., Scheduler]
) -> None:
    # A poll far longer than the test: only a wake-up can queue the run on time.
    start(poll_interval=timedelta(seconds=30))
    at = store.now() + timedelta(milliseconds=500)

    job = store.submit(JobSpec(task="tests.once", schedule=Once(at=at))).job

    wait_until(lambda: store.list_runs(job_id=job.id).items, DEADLINE)
    (run,) = store.list_runs(job_id=job.id).items
    assert run.scheduled_for == run.run_at == at
    # Triggered on time, which for a one-off is ONE_OFF_LEAD before it: claimable at `at`.
    assert timedelta(0) <= run.created_at - (at - ONE_OFF_LEAD) < ON_TIME


def test_full_batches_are_triggered_back_to_back(
    store: Store, start: Callable[..., Scheduler]
) -> None:
    past = store.now() - timedelta(seconds=30)
    jobs = [
        store.submit(
            JobSpec(task="tests.every", schedule=Interval(timedelta(hours=1), anchor=past)),
            now=past - timedelta(hours=1),
        ).job
        for _ in range(7)
    ]

    start(trigger_batch=2, poll_interval=timedelta(seconds=30))

    wait_until(lambda: all(store.list_runs(job_id=j.id).items for j in jobs), DEADLINE)
    for job in jobs:
        assert [r.scheduled_for for r in store.list_runs(job_id=job.id).items] == [past]


def test_each_skipped_range_is_logged_with_its_fate(
    store: Store, start: Callable[..., Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    past = store.now() - timedelta(minutes=10)
    spec = JobSpec(
        task="tests.tick",
        schedule=Cron("* * * * *"),
        misfire=MisfirePolicy.SKIP,
        misfire_grace=timedelta(seconds=1),
        overlap=OverlapPolicy.ALLOW,
    )
    job = store.submit(spec, now=past).job

    start()

    wait_until(lambda: store.slot_skips(job.id), DEADLINE)
    (skip,) = store.slot_skips(job.id)
    assert skip.fate == "misfire"
    wait_until(
        lambda: any(f"skip job={job.id} fate=misfire" in m for m in caplog.messages), DEADLINE
    )
    line = next(m for m in caplog.messages if f"skip job={job.id}" in m)
    assert f"slots={skip.count}" in line
