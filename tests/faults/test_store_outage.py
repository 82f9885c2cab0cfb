"""The database goes away and comes back under a real ``tickwork worker`` process.

The worker reaches PostgreSQL through a TCP proxy of the test's (``chaos.net.Proxy``) that
refuses for a while: it closes every connection and accepts no new one, which is what a
client sees of a restarting server (a real restart, a black hole and a failover are the
chaos harness's nemeses, ``scripts/chaos``).

What must hold: one WARNING and one INFO per outage (never a line per retry), back at speed
within 2 s of the database answering, and a running handler rides out an outage shorter
than its lease: its completion is written afterwards with its claim's fencing token.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from worker_procs import DEADLINE, Cluster

from chaos.net import Proxy
from tickwork.job import JobSpec, Run, RunState
from tickwork.schedule import Once
from tickwork.store import Store, open_store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow

BACK_AT_SPEED = 2.0
"""Seconds after the database answers again within which runs start promptly again."""


@pytest.fixture
def proxy(pg_database: str) -> Iterator[Proxy]:
    with Proxy.to_url(pg_database) as opened:
        yield opened


@pytest.fixture
def cluster(proxy: Proxy, tmp_path: Path) -> Iterator[Cluster]:
    nodes = Cluster(proxy.url, tmp_path)
    try:
        yield nodes
    finally:
        nodes.kill_all()


def lines(text: str, pattern: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(pattern, line)]


def test_a_worker_rides_out_an_outage_quietly_and_is_back_at_speed(
    proxy: Proxy, pg_database: str, cluster: Cluster
) -> None:
    direct = open_store(pg_database)
    nodes = cluster
    try:
        worker = nodes.worker("w1", "--log-level", "INFO", "--run-lease", "6s")
        # A handler that runs through the whole outage (shorter than its 6 s lease).
        long = direct.submit(
            JobSpec(task="work", args={"seconds": 3.0}, schedule=Once(delay=timedelta(0)))
        )
        assert long.run is not None
        wait_until(lambda: nodes.events("start", pid=worker.pid), DEADLINE)

        proxy.refuse()
        # A real condition: the outage lasts 2.5 s (shorter than the 6 s lease) while every
        # loop of the worker process retries: claims, heartbeats, the listener.
        time.sleep(2.5)
        proxy.accept()
        back = time.monotonic()

        # The long run finishes once, with its first claim's token: completed, not rescued.
        run_id = long.run.id
        done = wait_until(lambda: _finished(direct, run_id), timeout=15)
        assert done.state is RunState.SUCCEEDED
        assert done.attempt == 1
        assert done.result == {"pid": worker.pid, "token": long_token(nodes, long.run.id)}
        # New runs start promptly again: a run due now starts within 2 s of the database
        # answering, and the next one at the speed of before.
        quick = direct.submit(JobSpec(task="work", schedule=Once(delay=timedelta(0)))).run
        assert quick is not None
        wait_until(lambda: _finished(direct, quick.id), timeout=15)
        assert _started_at(nodes, quick.id) - back < BACK_AT_SPEED + 0.5
        again = direct.submit(JobSpec(task="work", schedule=Once(delay=timedelta(0)))).run
        assert again is not None
        submitted = time.monotonic()
        wait_until(lambda: _finished(direct, again.id), timeout=15)
        assert _started_at(nodes, again.id) - submitted < 0.5
    finally:
        direct.close()
    log = worker.log()
    assert len(lines(log, r"WARNING.* lost: ")) == 1, log
    assert len(lines(log, r"INFO.* is back after \d+\.\d s")) == 1, log
    # No line per retry: nothing else at WARNING or above while it was down.
    assert lines(log, r"WARNING|ERROR") == lines(log, r"WARNING.* lost: "), log


def _finished(store: Store, run_id: int) -> Run | None:
    run = store.get_run(run_id)
    return run if run.state in (RunState.SUCCEEDED, RunState.DEAD) else None


def long_token(nodes: Cluster, run_id: int) -> int:
    (start,) = [e for e in nodes.executions() if e["event"] == "start" and e["run"] == run_id]
    return int(start["token"])


def _started_at(nodes: Cluster, run_id: int) -> float:
    """When the run's first execution started, on this process's monotonic clock."""
    starts = [e for e in nodes.executions() if e["event"] == "start" and e["run"] == run_id]
    assert starts, f"run {run_id} never started"
    return float(starts[0]["mono"])
