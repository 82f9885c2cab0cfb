"""StoreHealth: one WARNING when failures last, one INFO when the store answers again."""

from __future__ import annotations

import logging
import threading

import pytest

from tickwork.store.health import OUTAGE_AFTER, StoreHealth


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_a_failure_answered_at_once_is_no_outage(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tickwork.store")
    health = StoreHealth("db", clock=clock)

    health.failed("terminating connection due to administrator command")
    clock.now += 0.05
    health.answered()

    assert health.up
    assert health.outages == 0
    assert lines(caplog, logging.WARNING) == []
    assert lines(caplog, logging.INFO) == []


def test_failures_that_last_are_one_outage_logged_twice(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tickwork.store")
    health = StoreHealth("db", clock=clock)

    health.failed("connection refused")
    for _ in range(20):  # every service retrying, many times a second
        clock.now += 0.1
        health.failed("connection refused again")
    assert not health.up
    clock.now += 3.0
    health.failed("still refused")
    health.answered()
    health.answered()

    assert health.up
    assert health.outages == 1
    assert health.last_outage == pytest.approx(5.0)
    assert lines(caplog, logging.WARNING) == [
        "store db lost: connection refused; retrying (one line again when it answers)"
    ]
    assert lines(caplog, logging.INFO) == ["store db is back after 5.0 s (0 reconnects so far)"]


def test_an_outage_is_declared_only_once_the_failures_lasted(clock: Clock) -> None:
    health = StoreHealth("db", clock=clock)

    health.failed("refused")
    clock.now += OUTAGE_AFTER - 0.01
    health.failed("refused")
    assert health.up
    clock.now += 0.02
    health.failed("refused")
    assert not health.up
    assert health.down_for() == pytest.approx(OUTAGE_AFTER + 0.01)
    assert health.snapshot() == {"up": False, "outages": 1, "reconnects": 0}


def test_a_comeback_is_counted_and_sets_the_events_handed_in_until_their_block_ends(
    clock: Clock,
) -> None:
    health = StoreHealth("db", clock=clock)
    waiting, other = threading.Event(), threading.Event()
    with health.sets_on_comeback(waiting), health.sets_on_comeback(other):
        health.answered()  # nothing failed: no comeback
        assert (health.comebacks, waiting.is_set()) == (0, False)
        health.failed("connection refused")  # one failure is enough: no outage needed
        assert health.failing
        health.answered()
        assert not health.failing
        assert (health.comebacks, waiting.is_set(), other.is_set()) == (1, True, True)
        waiting.clear()
        health.answered()  # answering on: no second comeback
        assert (health.comebacks, waiting.is_set()) == (1, False)
    health.failed("connection refused")
    health.answered()
    assert health.comebacks == 2
    assert not waiting.is_set()  # its block ended: no longer set
