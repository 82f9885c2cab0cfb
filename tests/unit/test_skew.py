"""Clock skew: the offset from the store's clock with the round trip halved as its bound,
and one log line per incident (issue 16, item 3)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tickwork.skew import SKEW_WARNING, Skew, SkewWatch
from tickwork.testing import FakeClock

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


class Host:
    """A node's wall clock ``ahead`` of a store that answers after ``trip`` seconds."""

    def __init__(self, ahead: float, trip: float = 0.004) -> None:
        self.ahead = ahead
        self.trip = trip
        self.real = T0
        self.down = False

    def wall(self) -> datetime:
        return self.real + timedelta(seconds=self.ahead)

    def store_now(self) -> datetime:
        if self.down:
            raise ConnectionError("database is down")
        self.real += timedelta(seconds=self.trip / 2)
        db = self.real
        self.real += timedelta(seconds=self.trip / 2)
        return db

    def watch(self) -> SkewWatch:
        return SkewWatch("w1", wall=self.wall, store_now=self.store_now)


def test_the_offset_is_the_midpoint_minus_the_store_and_the_bound_half_the_round_trip() -> None:
    skew = Host(ahead=5.01, trip=0.004).watch().measure()
    assert skew is not None
    assert skew.offset == pytest.approx(5.01)
    assert skew.bound == pytest.approx(0.002)
    assert str(skew) == "+5.01 s ±0.002"


def test_a_clock_behind_reads_negative() -> None:
    skew = Host(ahead=-0.25, trip=0.0).watch().measure()
    assert skew == Skew(offset=-0.25, bound=0.0)
    assert str(skew) == "-0.25 s ±0.000"


def test_the_reading_travels_in_the_heartbeat_info_and_reads_back() -> None:
    info = Host(ahead=5.0, trip=0.002).watch().info()
    assert info == {"clock": {"offset": pytest.approx(5.0), "bound": pytest.approx(0.001)}}
    assert Skew.from_info({"beat": 3, **info}) == Skew(info["clock"]["offset"], 0.001)


@pytest.mark.parametrize(
    "info", [{}, {"clock": None}, {"clock": {"offset": "5"}}, {"clock": {"bound": 1}}, None]
)
def test_a_node_without_a_reading_has_none(info: object) -> None:
    assert Skew.from_info(info) is None


def test_an_unanswered_store_keeps_the_last_reading() -> None:
    host = Host(ahead=2.0, trip=0.0)
    watch = host.watch()
    first = watch.info()
    host.down = True
    assert watch.measure() is None
    assert watch.info() == first


def test_no_reading_at_all_adds_nothing_to_the_info() -> None:
    host = Host(ahead=0.0)
    host.down = True
    assert host.watch().info() == {}


def test_a_node_off_by_more_than_a_second_warns_once_per_incident(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = Host(ahead=0.1, trip=0.0)
    watch = host.watch()
    caplog.set_level(logging.DEBUG, logger="tickwork.skew")

    def lines() -> list[tuple[int, str]]:
        found = [(r.levelno, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
        caplog.clear()
        return found

    watch.measure()
    assert lines() == []
    host.ahead = SKEW_WARNING + 0.5
    for _ in range(3):
        watch.measure()
    ((level, message),) = lines()
    assert level == logging.WARNING
    assert "clock of node w1 is +1.50 s ±0.000 off the database clock" in message
    host.ahead = 0.2
    watch.measure()
    watch.measure()
    assert lines() == [
        (logging.INFO, "clock of node w1 is back within 1 s: +0.20 s ±0.000"),
    ]
    host.ahead = -3.0
    watch.measure()
    ((level, message),) = lines()
    assert level == logging.WARNING
    assert "-3.00 s" in message


def test_a_test_clock_sets_the_stores_time_so_its_skew_is_zero() -> None:
    clock = FakeClock(T0)
    never: Callable[[], datetime] = lambda: T0 - timedelta(days=1)  # noqa: E731
    watch = SkewWatch.on("s1", clock, never)
    assert watch.measure() == Skew(0.0, 0.0)
    assert watch.store_now() == T0


def test_a_reading_from_a_call_made_anyway_counts_like_a_measurement() -> None:
    watch = Host(ahead=0.0).watch()
    before, after = T0 + timedelta(seconds=5), T0 + timedelta(seconds=5.004)

    skew = watch.record(before, T0, after)

    assert skew == watch.last
    assert skew.offset == pytest.approx(5.002)
    assert watch.info(measure=False) == {"clock": skew.to_info()}


def test_the_earliest_store_time_is_the_wall_clock_less_offset_and_bound() -> None:
    host = Host(ahead=5.0, trip=0.004)
    watch = host.watch()
    assert watch.earliest_store_now() is None  # no reading yet: a timer must ask the store
    watch.measure()
    earliest = watch.earliest_store_now()
    assert earliest is not None
    # The store's clock is `real`; the estimate may be early by the bound, never late.
    assert host.real - timedelta(seconds=0.0021) <= earliest <= host.real
