"""Worker faults with real OS processes (``python -m tickwork worker``), leases 2 s:

- a worker killed with SIGKILL mid-run: after its lease expires the scheduler's reaper
  rescues the run, another worker executes it, and it succeeds once;
- a zombie worker (SIGSTOP past its lease, then SIGCONT): the run was rescued and completed
  by another worker, and the zombie's late write is rejected, not applied;
- a shell task's whole process tree dies with a SIGKILLed worker: no orphan finishes it.
"""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path

import pytest
from tests.processes import alive, group_alive
from worker_procs import DEADLINE, Cluster

from tickwork.job import JobSpec, Run, RunState
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow


def submit_work(store: Store, seconds: float) -> Run:
    submitted = store.submit(
        JobSpec(task="work", schedule=Once(delay=timedelta(0)), args={"seconds": seconds})
    )
    assert submitted.run is not None
    return submitted.run


def succeeded(store: Store, run_id: int) -> Run | None:
    run = store.get_run(run_id)
    return run if run.state is RunState.SUCCEEDED else None


def test_a_run_of_a_worker_killed_mid_run_is_rescued_and_succeeds_once_elsewhere(
    store: Store, cluster: Cluster
) -> None:
    run = submit_work(store, seconds=2.0)
    a = cluster.worker("a")
    wait_until(lambda: cluster.events("start", pid=a.pid), DEADLINE)

    a.signal(signal.SIGKILL)
    a.wait()
    b = cluster.worker("b")
    cluster.scheduler()
    final = wait_until(lambda: succeeded(store, run.id), DEADLINE)

    assert final.attempt == 2  # the lost attempt counted
    assert final.worker == "b"
    assert final.result is not None
    assert final.result["pid"] == b.pid
    starts, ends = cluster.events("start"), cluster.events("end")
    assert [(e["pid"], e["attempt"]) for e in starts] == [(a.pid, 1), (b.pid, 2)]
    assert [(e["pid"], e["attempt"]) for e in ends] == [(b.pid, 2)]  # executed to the end once


def test_a_zombie_workers_completion_is_rejected_after_its_run_was_completed_elsewhere(
    store: Store, cluster: Cluster
) -> None:
    run = submit_work(store, seconds=1.0)
    zombie = cluster.worker("zombie")
    wait_until(lambda: cluster.events("start", pid=zombie.pid), DEADLINE)

    zombie.signal(signal.SIGSTOP)  # past its lease: no heartbeat, no completion
    other = cluster.worker("other")
    cluster.scheduler()
    final = wait_until(lambda: succeeded(store, run.id), DEADLINE)
    assert final.worker == "other"

    zombie.signal(signal.SIGCONT)  # its handler finishes; its write must be fenced out
    wait_until(lambda: "rejected" in zombie.log(), DEADLINE)
    wait_until(lambda: cluster.events("end", pid=zombie.pid), DEADLINE)  # it did finish, locally

    after = store.get_run(run.id)
    assert after.state is RunState.SUCCEEDED
    assert after.worker == "other"
    assert after.result is not None
    assert after.result["pid"] == other.pid
    assert after.fencing_token == final.fencing_token
    assert "the lease was taken over" in zombie.log() or "it was taken over" in zombie.log()


def test_a_shell_commands_process_tree_dies_with_its_sigkilled_worker(
    store: Store, cluster: Cluster, tmp_path: Path
) -> None:
    started, child_done, grandchild_done = (
        tmp_path / "started",
        tmp_path / "child-done",
        tmp_path / "grandchild-done",
    )
    # The shell leads its own process group: its pid is the group's id.
    script = (
        f"echo $$ > {started}; (sleep 5; touch {grandchild_done}) & sleep 5; touch {child_done}"
    )
    submitted = store.submit(
        JobSpec(
            task="shell", schedule=Once(delay=timedelta(0)), args={"argv": ["sh", "-c", script]}
        )
    )
    assert submitted.run is not None
    worker = cluster.worker("shell-worker", "--allow-shell")
    wait_until(lambda: started.exists() and started.read_text().strip(), DEADLINE)
    shell_pid = int(started.read_text())

    worker.signal(signal.SIGKILL)
    worker.wait()
    wait_until(lambda: not alive(shell_pid), timeout=5)
    # Nothing of the group is left to write a file later.
    wait_until(lambda: not group_alive(shell_pid), timeout=5)

    assert not child_done.exists()
    assert not grandchild_done.exists()
    assert store.get_run(submitted.run.id).state is RunState.RUNNING  # until rescued
