"""A worker that lacks a task never claims its runs: they wait for one that has it.

The most common deployment mistake, with real processes: a ``tickwork worker`` started
without ``--app`` (so with the built-in tasks only, and no ``--allow-shell``) beside runs
of an app's task and of ``shell``. It used to claim them and burn every attempt in half a
second ("task 'work' is not registered on worker ..."). Now its claim takes only runs of
its own tasks: the runs stay queued, on their first attempt, never claimed (fencing token
0), while ``explain`` and the queues view say why; a worker that has the task, started
later, runs each of them on that first attempt.
"""

from __future__ import annotations

import time
from datetime import timedelta
from functools import partial

import pytest
from worker_procs import DEADLINE, Cluster

from tickwork.client import Client
from tickwork.job import JobSpec, Run, RunState
from tickwork.records import NodeRecord
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow

WATCH = 2.0
"""Seconds the lacking worker is watched claiming beside the runs (40 of its polls, and
every submit's notification on PostgreSQL)."""


def node(store: Store, node_id: str) -> NodeRecord | None:
    return next((n for n in store.list_nodes() if n.id == node_id), None)


def untouched(run: Run) -> bool:
    return (run.state, run.attempt, run.fencing_token, run.worker) == (
        RunState.QUEUED,
        1,
        0,
        None,
    )


def test_a_run_waits_for_a_worker_with_its_task_and_spends_no_attempt(
    store: Store, cluster: Cluster
) -> None:
    client = Client(store)
    lacking = cluster.worker("lacking", app=None)
    wait_until(lambda: node(store, "lacking"), DEADLINE)
    now = Once(delay=timedelta(0))
    work = store.submit(JobSpec(task="work", schedule=now)).run
    shell = store.submit(JobSpec(task="shell", schedule=now, args={"argv": ["true"]})).run
    http = client.submit("http", args={"url": "http://127.0.0.1:9/"}, max_attempts=1).run
    assert work is not None
    assert shell is not None
    assert http is not None

    # The lacking worker claims what it has (http: refused by its egress policy, dead)...
    wait_until(lambda: store.get_run(http.id).state is RunState.DEAD, DEADLINE)
    # ...and, claim after claim, never the others.
    time.sleep(WATCH)
    assert untouched(store.get_run(work.id)), store.get_run(work.id)
    assert untouched(store.get_run(shell.id)), store.get_run(shell.id)
    assert cluster.executions() == []
    why = client.explain(store.get_run(work.id).job_id).text
    assert "waiting: no live worker has task work (it stays queued" in why
    why = client.explain(store.get_run(shell.id).job_id).text
    assert "waiting: no live worker runs shell tasks (start one with --allow-shell)" in why
    [queue] = client.queues()
    assert {u.task: u.reason for u in queue.unserved} == {
        "work": "no live worker has task work",
        "shell": "no live worker runs shell tasks (start one with --allow-shell)",
    }

    capable = cluster.worker("capable", "--allow-shell")

    def finished(run_id: int) -> Run | None:
        run = store.get_run(run_id)
        return run if run.state is RunState.SUCCEEDED else None

    for run_id in (work.id, shell.id):
        done = wait_until(partial(finished, run_id), DEADLINE)
        assert (done.attempt, done.fencing_token, done.worker) == (1, 1, "capable")
    [start] = cluster.events("start")
    assert (start["run"], start["attempt"], start["pid"]) == (work.id, 1, capable.pid)
    assert client.unserved() == []
    log = lacking.log()
    assert "is not registered on worker" not in log
    assert "does not run shell tasks" not in log
