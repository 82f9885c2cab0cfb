"""A run's attempts, kept through a worker's crash (real ``tickwork worker`` and
``tickwork scheduler`` processes, leases 2 s): a worker SIGKILLed mid-run, its run rescued
by the leader's reaper and completed by another worker. The run shows both attempts, the
first ended by "lease lost" with the worker that lost it, its token, its start and the
rescue's time as its end: through the client, ``GET /api/v1/runs/{id}``, the run's
dashboard page and ``tickwork show --run``."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from test_worker_crash import submit_work, succeeded
from worker_procs import DEADLINE, Cluster

from tickwork.client import Client
from tickwork.records import AttemptEnd
from tickwork.store import Store
from tickwork.testing import wait_until
from tickwork.web.app import create_app

pytestmark = pytest.mark.slow

LEASE = timedelta(seconds=2)  # worker_procs.LEASE


def test_a_rescued_run_that_then_succeeds_shows_both_attempts(
    store: Store, store_url: str, cluster: Cluster
) -> None:
    run = submit_work(store, seconds=2.0)
    a = cluster.worker("a")
    wait_until(lambda: cluster.events("start", pid=a.pid), DEADLINE)
    (start_a,) = cluster.events("start", pid=a.pid)

    a.signal(signal.SIGKILL)
    a.wait()
    killed_at = store.now()
    b = cluster.worker("b")
    cluster.scheduler()
    final = wait_until(lambda: succeeded(store, run.id), DEADLINE)

    # The client: both attempts, the first lost with worker a's lease.
    client = Client(store)
    history = client.run_attempts(run.id)
    lost, won = history.attempts
    assert history.dropped == 0
    assert (lost.attempt, lost.worker, lost.ended) == (1, "a", AttemptEnd.LEASE_LOST)
    assert lost.fencing_token == start_a["token"]
    assert lost.error == "lease expired: worker a stopped heartbeating"
    assert lost.started_at is not None
    assert lost.ended_at is not None
    # Rescued once its lease had expired: after the kill, at least a lease after the
    # claim (a's last heartbeat at the latest), and before b claimed the run.
    assert lost.ended_at > killed_at
    assert lost.ended_at >= lost.started_at + LEASE
    assert won.started_at is not None
    assert lost.ended_at <= won.started_at
    assert (won.attempt, won.worker, won.ended) == (2, "b", AttemptEnd.SUCCEEDED)
    assert won.fencing_token == final.fencing_token > lost.fencing_token
    assert won.ended_at == final.finished_at
    assert final.result is not None
    assert final.result["pid"] == b.pid

    # The HTTP API and the run's page, over the same store.
    with TestClient(create_app(client, open_access=True), base_url="http://127.0.0.1") as web:
        body = web.get(f"/api/v1/runs/{run.id}").json()
        page = web.get(f"/runs/{run.id}")
    assert body["state"] == "succeeded"
    assert body["attempts_dropped"] == 0
    assert [(x["attempt"], x["worker"], x["ended"]) for x in body["attempts"]] == [
        (1, "a", "lease_lost"),
        (2, "b", "succeeded"),
    ]
    assert body["attempts"][0]["fencing_token"] == start_a["token"]
    assert datetime.fromisoformat(body["attempts"][0]["ended_at"]) == lost.ended_at
    assert page.status_code == 200
    rows = re.findall(r'<tr data-attempt="(\d+)" data-ended="(\w+)">(.*?)</tr>', page.text, re.S)
    assert [(n, ended) for n, ended, _ in rows] == [("1", "lease_lost"), ("2", "succeeded")]
    assert "lease lost" in rows[0][2]
    assert ">a<" in rows[0][2]
    assert "lease expired: worker a stopped heartbeating" in rows[0][2]
    assert ">b<" in rows[1][2]

    # The CLI's run detail.
    shown = show_run(store_url, run.id)
    lines = shown.splitlines()
    table = lines[lines.index("Attempts (oldest first)") + 1 :]
    assert table[1].split()[:3] == ["1", "a", str(start_a["token"])]
    assert "lease lost" in table[1]
    assert table[2].split()[:3] == ["2", "b", str(final.fencing_token)]
    assert "succeeded" in table[2]
    as_json = show_run(store_url, run.id, "--json")
    assert json.loads(as_json)["attempts"] == body["attempts"]


def show_run(url: str, run_id: int, *flags: str) -> str:
    """What ``tickwork show --run RUN_ID`` prints (it must exit 0)."""
    argv = [sys.executable, "-m", "tickwork", "show", "--run", str(run_id), "--db", url, *flags]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=DEADLINE)
    return done.stdout
