"""An outage of the database costs no run whose worker lives through it.

A real ``tickwork scheduler`` (its reaper rescues expired leases) and a real ``tickwork
worker`` (lease 2 s, heartbeat every 0.4 s) reach PostgreSQL through one TCP proxy of the
test's (``chaos.net.Proxy``), which refuses for a while: it drops every connection and
accepts none, what every node sees of a restart or a promotion (the chaos harness's
``pg-restart`` and ``promote`` nemeses, ``scripts/chaos``). Some handlers return during the
outage (their completions wait in the worker), others run on past it (their leases need
heartbeats when it ends). Leases expire meanwhile; the outage ends; the reaper must rescue
none of them, and no run may execute twice (docs/reliability.md, "Outages").

What makes it so: the reaper holds its rescues back for RESCUE_HOLD after its own calls
are answered again (the last test here), and each of the worker's loops tries again the
moment any of its calls is answered, so that its heartbeat and completions land well
inside that hold.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest
from worker_procs import DEADLINE, Cluster

from chaos.net import Proxy
from tickwork.job import JobSpec, Run, RunState
from tickwork.schedule import Once
from tickwork.scheduler.reaper import RESCUE_HOLD
from tickwork.store import Store, open_store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow

ROUNDS = 3
"""Outages per test: the race the fix closes was lost about one time in two before it."""


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


@pytest.mark.parametrize(
    "outage", [1.8, 3.0], ids=["shorter-than-the-lease", "longer-than-the-lease"]
)
def test_an_outage_of_the_database_costs_no_run(
    proxy: Proxy, pg_database: str, cluster: Cluster, outage: float
) -> None:
    direct = open_store(pg_database)
    try:
        scheduler = cluster.scheduler()
        worker = cluster.worker("w1")
        wait_until(direct.leader, DEADLINE, what="a leader")
        ids: list[int] = []
        for _ in range(ROUNDS):
            # Two handlers return early in the outage, two late in it, two after it.
            lengths = [0.3 * outage] * 2 + [0.7 * outage] * 2 + [outage + 0.6] * 2
            batch = [_submit(direct, seconds) for seconds in lengths]
            wait_until(partial(_started, cluster, batch), DEADLINE, what="every handler started")
            proxy.refuse()
            time.sleep(outage)  # the outage itself: every node's calls fail meanwhile
            proxy.accept()
            wait_until(partial(_finished, direct, batch), DEADLINE, what="every run finished")
            ids += batch
        runs = {run_id: direct.get_run(run_id) for run_id in ids}
    finally:
        direct.close()
    executions = Counter(e["run"] for e in cluster.events("start"))
    again = {run_id: executions[run_id] for run_id in ids if executions[run_id] != 1}
    assert not again, f"runs executed more (or less) than once, of {len(ids)}: {again}"
    for run in runs.values():
        # Completed by its first and only attempt, with that claim's token: never rescued.
        assert (run.state, run.attempt) == (RunState.SUCCEEDED, 1), run
        assert run.result == {"pid": worker.pid, "token": run.fencing_token}
    assert not re.findall(r"rescue run=\d+", scheduler.log()), scheduler.log()
    assert worker.proc.poll() is None


def _submit(store: Store, seconds: float) -> int:
    submitted = store.submit(
        JobSpec(task="work", args={"seconds": seconds}, schedule=Once(delay=timedelta(0)))
    )
    assert submitted.run is not None
    return submitted.run.id


def _started(cluster: Cluster, ids: list[int]) -> bool:
    return set(ids) <= {e["run"] for e in cluster.events("start")}


def _finished(store: Store, ids: list[int]) -> list[Run] | None:
    runs = [store.get_run(run_id) for run_id in ids]
    done = (RunState.SUCCEEDED, RunState.DEAD)
    return runs if all(r.state in done for r in runs) else None


def test_the_leader_rescues_nothing_until_a_while_after_the_store_answers_again(
    proxy: Proxy, pg_database: str, cluster: Cluster
) -> None:
    direct = open_store(pg_database)
    try:
        scheduler = cluster.scheduler()
        wait_until(direct.leader, DEADLINE, what="a leader")
        proxy.refuse()
        # Its calls fail long enough to count as an outage (one WARNING line says so).
        wait_until(lambda: " lost: " in scheduler.log(), DEADLINE, what="the outage logged")
        # Meanwhile a run's lease expires (a worker that claimed it a minute ago, and died).
        then = direct.now() - timedelta(minutes=1)
        submitted = direct.submit(JobSpec(task="work", schedule=Once(at=then)), now=then)
        assert submitted.run is not None
        (run,) = direct.claim("dead-worker", limit=1, lease=timedelta(seconds=1), now=then)
        proxy.accept()
        back = time.monotonic()

        def rescued() -> float | None:
            state = direct.get_run(run.id).state
            return time.monotonic() if state is RunState.QUEUED else None

        # Rescued in the end (a hold, not a refusal), and not before the hold is over.
        rescued_at = wait_until(rescued, DEADLINE, interval=0.01, what="the rescue")
        assert rescued_at - back >= RESCUE_HOLD
        assert f"rescue run={run.id} to=queued" in scheduler.log()
    finally:
        direct.close()
