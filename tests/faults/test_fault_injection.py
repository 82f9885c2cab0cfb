"""Fault injection with real worker processes (leases 2 s): ``tickwork worker
--inject-faults`` at the rates the docs suggest makes runs execute again, and ``tickwork
runs --injected`` lists exactly the runs that did; a database that has not opted in
makes such a worker refuse to start."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta

import pytest
from worker_procs import DEADLINE, Child, Cluster

from tickwork.faults import CRASH_AFTER_HANDLER, FAIL, STALL_PAST_LEASE
from tickwork.job import JobSpec, RunState
from tickwork.retry import RetryPolicy
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.worker.faults import CRASH_EXIT_CODE

pytestmark = pytest.mark.slow

RATES = "crash-after-handler=0.05,stall-past-lease=0.02,fail=0.1"
RUNS = 500
WORKERS = 3
TIME_LIMIT = 150.0
"""Seconds the runs may take; about 40 on a loaded 2-core box (crashed workers restart)."""


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tickwork", *argv],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )


def test_injected_faults_make_runs_execute_again_and_runs_injected_lists_exactly_them(
    store: Store, cluster: Cluster
) -> None:
    assert cli("db", "allow-fault-injection", "--db", store.url).returncode == 0
    store.submit_many(
        [
            JobSpec(
                task="counted",
                schedule=Once(delay=timedelta(0)),
                args={"seconds": 0.02},
                retry=RetryPolicy(max_attempts=20, backoff_base=0.05, backoff_cap=0.1),
            )
            for _ in range(RUNS)
        ]
    )
    cluster.scheduler()  # its reaper rescues the runs of crashed and stalled workers
    started = 0

    def start() -> Child:
        nonlocal started
        started += 1
        return cluster.worker(f"w{started}", "--concurrency", "4", "--inject-faults", RATES)

    workers = [start() for _ in range(WORKERS)]
    crashes = 0
    deadline = time.monotonic() + TIME_LIMIT
    while store.run_stats().by_state[RunState.SUCCEEDED.value] < RUNS:
        assert time.monotonic() < deadline, f"not done after {TIME_LIMIT:g} s"
        time.sleep(0.2)
        for i, child in enumerate(workers):
            code = child.proc.poll()
            if code is not None:  # it crashed (on purpose): start another, as a supervisor would
                # (Another exit: a worker that could not connect at start, on a loaded box.)
                crashes += code == CRASH_EXIT_CODE
                workers[i] = start()
    time.sleep(3.0)  # the stalled zombies run their handlers too

    executions = Counter(e["run"] for e in cluster.events("start"))
    assert len(executions) == RUNS
    again = {run for run, n in executions.items() if n > 1}
    listed = cli("runs", "--injected", "--json", "--limit", "1000", "--db", store.url)
    assert listed.returncode == 0, listed.stderr
    injected = json.loads(listed.stdout)
    assert again  # the faults made runs execute again
    assert {r["id"] for r in injected} == again
    kinds = {f["fault"] for r in injected for f in r["injected"]}
    assert kinds == {CRASH_AFTER_HANDLER, STALL_PAST_LEASE, FAIL}
    assert crashes > 0
    assert any("injected fault: fail" in child.log() for child in cluster.children)


def test_a_worker_refuses_to_inject_faults_on_a_database_that_did_not_opt_in(
    store: Store,
) -> None:
    refused = cli("worker", "--db", store.url, "--inject-faults", RATES)
    assert refused.returncode == 2
    assert "refusing to inject faults" in refused.stderr
    assert "tickwork db allow-fault-injection" in refused.stderr
    assert store.list_nodes() == []  # it never started


def test_the_environment_variable_injects_faults_too_and_is_refused_the_same(
    store: Store,
) -> None:
    import os

    refused = subprocess.run(
        [sys.executable, "-m", "tickwork", "worker", "--db", store.url],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        env={**os.environ, "TICKWORK_INJECT_FAULTS": RATES},
    )
    assert refused.returncode == 2
    assert "refusing to inject faults" in refused.stderr
