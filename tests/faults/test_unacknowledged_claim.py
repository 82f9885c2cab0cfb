"""No handler starts on a claim the database did not acknowledge.

A PostgreSQL of the test's own waits, at every commit, for a synchronous standby that does
not exist (``synchronous_standby_names``): a claim's commit is then written locally but
never acknowledged, the state a client is in when the server or the link dies before
answering. The worker must start nothing on it. Once commits are acknowledged again (the
server releases the waiting commit), the run executes once.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from worker_procs import DEADLINE, Cluster

from chaos import pg
from tickwork.job import JobSpec, Run, RunState
from tickwork.schedule import Once
from tickwork.store import Store, open_store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow


def test_a_worker_starts_nothing_on_a_claim_whose_commit_was_not_acknowledged(
    own_postgres: tuple[pg.PgCluster, Path], tmp_path: Path
) -> None:
    server, _ = own_postgres
    url = server.url("tw")
    store = open_store(url, migrate=True)
    try:
        # Commits wait for a standby that never comes: the run, due now, is submitted first.
        run = store.submit(JobSpec(task="work", schedule=Once(delay=timedelta(0)))).run
        assert run is not None
        server.set_system("synchronous_standby_names", "nobody")

        nodes = Cluster(url, tmp_path)
        try:
            worker = nodes.worker("w1")
            # The claim is written and its commit waits for an acknowledgement (invisible to
            # everyone else meanwhile); the handler must wait too.
            wait_until(lambda: _waiting_commits(server) > 0, DEADLINE)
            # A real condition: the claim stays unacknowledged for 2 s, as long as a stalled
            # commit can last while a client gives up on it. The worker is another process
            # with its claim blocked in that commit: it has no pass to count meanwhile.
            time.sleep(2.0)
            assert _waiting_commits(server) > 0, "the claim was acknowledged meanwhile"
            assert nodes.executions() == [], "a handler started on an unacknowledged claim"

            # Commits are acknowledged again: the claim's answer arrives, or (had the worker
            # given up on it) the scheduler rescues the run when its lease expires.
            server.set_system("synchronous_standby_names", None)
            nodes.scheduler()
            done = wait_until(lambda: _finished(store, run.id), timeout=30)
        finally:
            nodes.kill_all()
    finally:
        store.close()

    assert done.state is RunState.SUCCEEDED
    starts = [e for e in nodes.executions() if e["event"] == "start"]
    assert [e["run"] for e in starts] == [run.id]  # once
    assert worker.pid == starts[0]["pid"]


def _waiting_commits(server: pg.PgCluster) -> int:
    """Sessions whose commit waits for the synchronous standby."""
    rows = server.sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
    return int(rows[0][0])


def _finished(store: Store, run_id: int) -> Run | None:
    found = store.get_run(run_id)
    return found if found.state in (RunState.SUCCEEDED, RunState.DEAD) else None
