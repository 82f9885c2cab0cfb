"""The database's opt-in to fault injection, changed under a real injecting worker process
(leases 2 s, heartbeat every 0.4 s): ``tickwork db allow-fault-injection --revoke`` stops
it injecting within seconds, a grant makes it inject again, and each change is logged once.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import timedelta

import pytest
from worker_procs import DEADLINE, Child, Cluster

from tickwork.job import JobSpec, Run, RunState
from tickwork.retry import RetryPolicy
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow

NOTICED = 5.0
"""Seconds within which the worker acts on a changed opt-in ("within seconds"; it re-reads
it every heartbeat, 0.4 s here)."""
REVOKED = r"fault injection was revoked"
GRANTED = r"fault injection is allowed again"


def cli(*argv: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tickwork", *argv],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def submit(store: Store, n: int) -> list[int]:
    """``n`` runs due now whose every attempt an injecting worker fails (``fail=1``)."""
    spec = JobSpec(
        task="work",
        schedule=Once(delay=timedelta(0)),
        retry=RetryPolicy(max_attempts=1000, backoff_base=0.1, backoff_cap=0.2),
    )
    submitted = store.submit_many([spec] * n)
    return [s.run.id for s in submitted if s.run is not None]


def finished(store: Store, ids: list[int]) -> list[Run] | None:
    runs = [store.get_run(i) for i in ids]
    return runs if all(r.state is RunState.SUCCEEDED for r in runs) else None


def injected(store: Store) -> set[int]:
    """Runs that executed again after an injected fault."""
    return {r.run.id for r in store.injected_runs(limit=1000).items}


def said(worker: Child, pattern: str) -> int:
    return len(re.findall(pattern, worker.log()))


def test_a_revoke_stops_a_running_worker_injecting_and_a_grant_makes_it_inject_again(
    store: Store, cluster: Cluster
) -> None:
    url = store.url
    cli("db", "allow-fault-injection", "--db", url)
    worker = cluster.worker("w1", "--log-level", "INFO", "--inject-faults", "fail=1")
    before = submit(store, 2)
    # Allowed: every attempt is failed on purpose, and each run executes again.
    wait_until(lambda: set(before) <= injected(store), DEADLINE)

    cli("db", "allow-fault-injection", "--revoke", "--db", url)
    wait_until(lambda: said(worker, REVOKED), NOTICED, what="the revoke logged")
    # Revoked: the runs being retried succeed at their next attempt, and new runs at their
    # first: the worker injects nothing any more.
    after = submit(store, 5)
    assert wait_until(lambda: finished(store, before), DEADLINE)
    done = wait_until(lambda: finished(store, after), DEADLINE)
    assert [r.attempt for r in done] == [1] * len(after)
    assert not injected(store) & set(after)

    cli("db", "allow-fault-injection", "--db", url)
    wait_until(lambda: said(worker, GRANTED), NOTICED, what="the grant logged")
    again = submit(store, 2)
    wait_until(lambda: set(again) <= injected(store), DEADLINE)
    assert worker.proc.poll() is None  # it ran on through both changes
    # Each change said once, however many times the worker read the opt-in.
    assert (said(worker, REVOKED), said(worker, GRANTED)) == (1, 1), worker.log()
