"""tickwork.testing: a FakeClock moves the services, pass counters say when they moved, and
wait_until waits for the rest."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tickwork.app import App
from tickwork.config import Config
from tickwork.job import JobSpec, RunState
from tickwork.retry import RetryPolicy
from tickwork.schedule import Cron, Once
from tickwork.scheduler import Scheduler
from tickwork.service import Service
from tickwork.store import Store, open_store
from tickwork.tasks import Context
from tickwork.testing import FakeClock, wait_until
from tickwork.worker import Worker

START = datetime(2030, 1, 7, 8, 58, 30, tzinfo=UTC)
PROMPT = 2.0
"""Real seconds within which a moved clock must have woken a wait: far more than it
takes, far less than the hour the fake clock moved."""


class Ticker(Service):
    """A service that does nothing but wait an hour per pass."""

    name = "ticker"

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.clock: FakeClock = clock  # the test moves it
        self.woke = threading.Event()

    def run(self) -> None:
        self.started.set()
        while not self.pause(self.stopping, 3600):
            self.woke.set()


@pytest.fixture
def ticker() -> Iterator[Ticker]:
    service = Ticker(FakeClock(START))
    service.start()
    yield service
    service.stop()


def test_the_clock_stands_still_until_advanced() -> None:
    clock = FakeClock(START)
    assert clock.now() == START
    assert clock.monotonic() == 0.0
    assert clock.advance(timedelta(minutes=1)) == START + timedelta(minutes=1)
    assert clock.monotonic() == 60.0
    assert clock.set(START + timedelta(hours=1)) == START + timedelta(hours=1)
    assert clock.monotonic() == 3600.0
    assert clock.store_now() == clock.now()


def test_the_clock_does_not_go_backwards() -> None:
    clock = FakeClock(START)
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="backwards"):
        clock.set(START - timedelta(seconds=1))


def test_advancing_past_a_deadline_wakes_a_waiting_service_promptly(ticker: Ticker) -> None:
    wait_until(lambda: ticker.clock.deadlines() == [3600.0], what="the ticker to wait its hour")
    ticker.clock.advance(3599)
    # A second short of its deadline: that wait has not ended.
    assert ticker.clock.deadlines() == [3600.0]
    assert ticker.passes == 1
    assert not ticker.woke.is_set()

    began = time.monotonic()
    ticker.clock.advance(1)

    assert ticker.woke.wait(PROMPT)
    assert time.monotonic() - began < PROMPT
    assert ticker.wait_passes(2) == 2  # back to waiting its next hour


def test_stop_interrupts_a_fake_clock_wait_at_once(ticker: Ticker) -> None:
    ticker.wait_passes(1)
    began = time.monotonic()
    ticker.stop(PROMPT)
    assert not ticker.running
    assert time.monotonic() - began < PROMPT


def test_wait_passes_counts_in_all_and_times_out_with_a_message(ticker: Ticker) -> None:
    assert ticker.wait_passes(1) >= 1
    with pytest.raises(TimeoutError, match=r"ticker: 1 passes ended within 0\.05 s, not 2"):
        ticker.wait_passes(2, timeout=0.05)


def test_wait_until_returns_the_first_true_value() -> None:
    answers = iter([None, 0, "", "ready"])
    assert wait_until(lambda: next(answers), interval=0) == "ready"


def test_wait_until_fails_the_test_naming_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match=r"not within 0.05 s: the door to open \(last: 0\)"):
        wait_until(lambda: 0, 0.05, what="the door to open")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(f"sqlite:///{tmp_path}/testing.db")
    yield opened
    opened.close()


def test_a_scheduler_on_a_fake_clock_triggers_a_cron_slot_once_advanced_past_it(
    store: Store,
) -> None:
    clock = FakeClock(START)  # 08:58:30
    config = Config(db_url=store.url, node_id="fake-time", poll_interval=timedelta(seconds=5))
    job = store.submit(
        JobSpec(task="report", schedule=Cron("0 9 * * *", "UTC")), now=clock.now()
    ).job
    slot = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)
    assert job.next_run_at == slot
    scheduler = Scheduler(store, config, clock)
    scheduler.start()
    try:
        wait_until(lambda: scheduler.leading)
        trigger = scheduler.trigger
        # A minute and a half of fake time, a poll interval at a time, and the slot is not due.
        while clock.now() + config.poll_interval < slot:
            done, beats = trigger.passes, scheduler.election.passes
            clock.advance(config.poll_interval)
            trigger.wait_passes(done + 1)
            scheduler.election.wait_passes(beats + 1)  # renewed its lease on the way
        assert store.list_runs(job_id=job.id).items == []

        done = trigger.passes
        clock.set(slot)
        trigger.wait_passes(done + 1)

        (run,) = wait_until(lambda: store.list_runs(job_id=job.id).items)
        assert run.scheduled_for == slot
        assert run.created_at == slot  # the store was told the clock's time, not its own
        assert store.get_job(job.id).next_run_at == slot + timedelta(days=1)
    finally:
        scheduler.stop()


def test_a_worker_on_a_fake_clock_times_a_run_out_once_advanced_past_its_timeout(
    store: Store,
) -> None:
    clock = FakeClock(START)
    app = App(
        config=Config(
            db_url=store.url,
            node_id="fake-time-worker",
            run_lease=timedelta(minutes=10),
            run_heartbeat=timedelta(minutes=1),
        )
    )
    stopped = threading.Event()

    @app.task
    def stuck(ctx: Context) -> None:
        ctx.cancelled.wait(PROMPT * 5)  # real seconds: only a timeout (or a bug) ends it
        stopped.set()

    spec = JobSpec(
        task="stuck",
        schedule=Once(delay=timedelta(0)),
        timeout=timedelta(seconds=30),
        retry=RetryPolicy(max_attempts=1),
    )
    run = store.submit(spec, now=clock.now()).run
    assert run is not None
    worker = Worker(store, app.registry, app.config, clock)
    worker.start()
    try:
        wait_until(lambda: worker.held == [run.id])
        wait_until(lambda: 30.0 in clock.deadlines(), what="the watchdog to wait for 30 s")
        clock.advance(29)
        # A second short of its timeout: the watchdog's wait has not ended, the run runs.
        assert 30.0 in clock.deadlines()
        assert store.get_run(run.id).state is RunState.RUNNING
        assert not stopped.is_set()

        clock.advance(1)

        assert stopped.wait(PROMPT)
        dead = wait_until(
            lambda: r if (r := store.get_run(run.id)).state is RunState.DEAD else None
        )
        assert dead.error == "timed out after 30 s"
        assert dead.finished_at == START + timedelta(seconds=30)  # the clock's time
    finally:
        worker.stop()
        app.close()
