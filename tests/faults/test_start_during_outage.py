"""A process started while its database is down waits for it, then works, unrestarted.

Real ``tickwork worker``, ``scheduler`` and ``api`` processes reach PostgreSQL through a
TCP proxy of the test's (``chaos.net.Proxy``) that refuses every connection until told to
accept: what a client sees of a database that is not up yet. Each process waits (one
WARNING once its calls have failed for a second, one INFO when the database answers), then
starts its services; ``--exit-on-unavailable`` keeps the old behaviour, exit 1 at once.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest
from worker_procs import DEADLINE, Child, Cluster

from chaos.net import Proxy
from tickwork.job import JobSpec, RunState
from tickwork.schedule import Once
from tickwork.store import Store, open_store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow

LOST = r"WARNING tickwork\.store: store \S+ lost: "
BACK = r"INFO tickwork\.store: store \S+ is back after \d+\.\d s"


@pytest.fixture
def proxy(pg_database: str) -> Iterator[Proxy]:
    with Proxy.to_url(pg_database) as opened:
        opened.refuse()  # the database is "down" before any process starts
        yield opened


@pytest.fixture
def direct(pg_database: str) -> Iterator[Store]:
    opened = open_store(pg_database)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def cluster(proxy: Proxy, tmp_path: Path) -> Iterator[Cluster]:
    nodes = Cluster(proxy.url, tmp_path)
    try:
        yield nodes
    finally:
        nodes.kill_all()


def lines(child: Child, pattern: str) -> list[str]:
    return [line for line in child.log().splitlines() if re.search(pattern, line)]


def waiting(child: Child) -> bool:
    """Whether the child has said, once, that its store is down, and is still alive."""
    assert child.proc.poll() is None, child.log()
    return bool(lines(child, LOST))


def test_a_worker_and_a_scheduler_started_before_the_database_run_runs_once_it_is_up(
    proxy: Proxy, direct: Store, cluster: Cluster
) -> None:
    worker = cluster.worker("w1", "--log-level", "INFO")
    scheduler = cluster.scheduler()
    # Both are up and waiting: each has logged the outage, and neither exited.
    wait_until(lambda: waiting(worker) and waiting(scheduler), DEADLINE)
    # One run due now (written at submit) and one that the scheduler must trigger.
    now = direct.submit(JobSpec(task="work", schedule=Once(delay=timedelta(0)))).run
    later = direct.submit(JobSpec(task="work", schedule=Once(delay=timedelta(seconds=1))))
    assert now is not None
    assert later.run is None

    proxy.accept()

    def succeeded() -> bool:
        runs = direct.list_runs(limit=10).items
        return len(runs) == 2 and all(r.state is RunState.SUCCEEDED for r in runs)

    wait_until(succeeded, DEADLINE)
    (triggered,) = [r for r in direct.list_runs(limit=10).items if r.job_id == later.job.id]
    assert triggered.worker == "w1"
    assert {e["pid"] for e in cluster.events("end")} == {worker.pid}
    for child in (worker, scheduler):
        assert child.proc.poll() is None, child.log()
        # Two lines for the whole wait, whatever the number of tries.
        assert len(lines(child, LOST)) == 1, child.log()
        wait_until(partial(lines, child, BACK), DEADLINE)
        assert len(lines(child, BACK)) == 1, child.log()
        assert lines(child, r"WARNING|ERROR") == lines(child, LOST), child.log()
    started = lines(worker, r"INFO tickwork\.worker: worker w1 started")
    assert len(started) == 1, worker.log()
    assert worker.log().index(started[0]) > worker.log().index(lines(worker, BACK)[0])


def test_a_stop_signal_while_waiting_for_the_database_exits_0_at_once(
    proxy: Proxy, cluster: Cluster
) -> None:
    worker = cluster.worker("w1", "--log-level", "INFO")
    wait_until(lambda: waiting(worker), DEADLINE)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.log()
    assert lines(worker, r"worker w1 started") == []


@pytest.mark.parametrize("command", ["worker", "scheduler", "api"])
def test_exit_on_unavailable_exits_1_at_once_naming_the_failure(proxy: Proxy, command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tickwork", command, "--db", proxy.url, "--exit-on-unavailable"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "tickwork: error: cannot connect to PostgreSQL" in done.stderr
    assert "Connection refused" in done.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_api_started_before_the_database_serves_once_it_is_up(
    proxy: Proxy, cluster: Cluster
) -> None:
    port = free_port()
    api = cluster._start("api", ["api", "--db", proxy.url, "--port", str(port)])
    wait_until(lambda: waiting(api), DEADLINE)

    proxy.accept()

    def ready() -> int | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
                return int(answer.status)
        except OSError:
            return None

    assert wait_until(ready, DEADLINE) == 200
    # The server answers as soon as it listens; its ready line follows the node's
    # registration, a moment later (a loaded box answered first).
    wait_until(lambda: lines(api, r"tickwork api: ready on"), DEADLINE, what="its ready line")
    assert len(lines(api, LOST)) == 1, api.log()
