"""Scheduler faults with real OS processes (``python -m tickwork scheduler``).

- The leader dies (SIGKILL): the standby triggers within lease TTL + renew interval, and a
  per-second cron job has no missing and no duplicated slot across the hand-over.
- The leader is paused (SIGSTOP) past its lease, then resumed: it stops acting on its own
  monotonic clock, and the store's epoch fence backs that up; still no slot twice.
- A scheduler outage: misfire ``skip`` / ``once`` / ``all`` and overlap ``forbid`` decide
  what the missed slots become, and every slot is accounted for exactly once, by a run or
  by a slot-ledger entry.

Timings are scaled down through flags: lease 2 s, renewed every 0.4 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.job import JobSpec, MisfirePolicy, OverlapPolicy, Run, RunState
from tickwork.schedule import Cron
from tickwork.store import Store
from tickwork.store.base import SlotFate, SlotSkip
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow

LEASE = timedelta(seconds=2)
RENEW = timedelta(milliseconds=400)
SLACK = timedelta(milliseconds=500)
"""Process scheduling and one trigger transaction, on top of the protocol's bound."""
SECOND = timedelta(seconds=1)
START_DEADLINE = 30.0
"""Seconds a child may take to start and act; generous for a loaded CI box."""
STOP_TIMEOUT = 15.0


class Node:
    """One ``tickwork scheduler`` child process, its output in a log file."""

    def __init__(self, url: str, node_id: str, log_dir: Path) -> None:
        self.node_id = node_id
        self.log_path = log_dir / f"{node_id}.log"
        argv = [
            sys.executable, "-m", "tickwork", "scheduler",
            "--db", url,
            "--node-id", node_id,
            "--leader-lease", f"{LEASE.total_seconds()}s",
            "--leader-renew", f"{RENEW.total_seconds()}s",
            "--leader-safety-margin", "0.3s",
            "--rescue-interval", "0.5s",
            "--poll-interval", "0.1s",
        ]  # fmt: skip
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def log(self) -> str:
        return self.log_path.read_text()

    def terminate(self) -> None:
        """SIGTERM, and the node must stop cleanly: exit code 0."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(STOP_TIMEOUT)
        assert code == 0, f"{self.node_id} exited {code}:\n{self.log()}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)


@pytest.fixture
def nodes(store_url: str, tmp_path: Path) -> Iterator[Callable[[str], Node]]:
    """``nodes(node_id)`` starts a scheduler process; every one is killed at the end."""
    started: list[Node] = []

    def start(node_id: str) -> Node:
        node = Node(store_url, node_id, tmp_path)
        started.append(node)
        return node

    try:
        yield start
    finally:
        for node in started:
            if node.proc.poll() is None:
                node.proc.send_signal(signal.SIGCONT)  # a stopped child cannot die otherwise
            node.kill()


def per_second(**policies: Any) -> JobSpec:
    return JobSpec(task="tests.tick", schedule=Cron("* * * * * *"), **policies)


def runs_of(store: Store, job_id: int) -> list[Run]:
    return sorted(store.list_runs(job_id=job_id, limit=1000).items, key=lambda r: r.scheduled_for)


def slots(runs: Sequence[Run]) -> list[datetime]:
    return [r.scheduled_for for r in runs]


def accounted(runs: Sequence[Run], skips: Sequence[SlotSkip]) -> Counter[datetime]:
    """How many times each per-second slot got a run or a ledger entry."""
    seen = Counter(slots(runs))
    for skip in skips:
        assert not skip.more
        covered = [skip.first_slot + i * SECOND for i in range(skip.count)]
        assert covered[-1] == skip.last_slot, skip
        seen.update(covered)
    return seen


def assert_each_slot_once(counts: Counter[datetime]) -> None:
    """Every second from the first slot to the last appears exactly once."""
    first, last = min(counts), max(counts)
    expected = [first + i * SECOND for i in range(int((last - first) / SECOND) + 1)]
    doubled = sorted(slot for slot, n in counts.items() if n > 1)
    missing = [slot for slot in expected if slot not in counts]
    assert doubled == [], f"slots accounted twice: {doubled}"
    assert missing == [], f"slots never accounted for: {missing}"


def leader_of(store: Store, among: Sequence[Node]) -> Node | None:
    lease = store.leader()
    return next((n for n in among if lease is not None and n.node_id == lease.holder), None)


def test_standby_takes_over_from_a_killed_leader_without_missing_or_doubling_a_slot(
    store: Store, nodes: Callable[[str], Node]
) -> None:
    job = store.submit(per_second()).job
    pair = [nodes("a"), nodes("b")]
    wait_until(lambda: leader_of(store, pair) is not None, START_DEADLINE)
    wait_until(lambda: len(runs_of(store, job.id)) >= 3, START_DEADLINE)
    leader = leader_of(store, pair)
    assert leader is not None
    standby = next(n for n in pair if n is not leader)

    leader.proc.kill()  # SIGKILL: no resignation, the lease must run out
    killed_at = store.now()
    leader.proc.wait(STOP_TIMEOUT)

    def triggered_since_kill() -> list[Run]:
        return [r for r in runs_of(store, job.id) if r.created_at > killed_at]

    wait_until(triggered_since_kill, timeout=(LEASE + RENEW + SLACK).total_seconds() + 5)
    first_new = min(triggered_since_kill(), key=lambda r: r.created_at)
    takeover = first_new.created_at - killed_at
    assert takeover <= LEASE + RENEW + SLACK, f"standby took {takeover} to trigger"
    lease = store.leader()
    assert lease is not None
    assert lease.holder == standby.node_id
    # A few slots led by the new leader, then a clean stop.
    wait_until(
        lambda: runs_of(store, job.id)[-1].scheduled_for >= first_new.scheduled_for + 3 * SECOND,
        START_DEADLINE,
    )
    standby.terminate()

    runs = runs_of(store, job.id)
    assert_each_slot_once(accounted(runs, store.slot_skips(job.id)))
    assert store.slot_skips(job.id) == []  # within the misfire grace: every slot ran
    assert "resign" in standby.log()


def test_a_paused_leader_resumed_after_losing_its_lease_triggers_nothing_twice(
    store: Store, nodes: Callable[[str], Node]
) -> None:
    job = store.submit(per_second()).job
    pair = [nodes("a"), nodes("b")]
    wait_until(lambda: leader_of(store, pair) is not None, START_DEADLINE)
    wait_until(lambda: len(runs_of(store, job.id)) >= 2, START_DEADLINE)
    zombie = leader_of(store, pair)
    assert zombie is not None
    standby = next(n for n in pair if n is not zombie)
    old = store.leader()
    assert old is not None

    zombie.proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: leader_of(store, pair) is standby, START_DEADLINE)
        new = store.leader()
        assert new is not None
        assert new.epoch > old.epoch
        took_over_at = store.now()
        wait_until(
            lambda: len([r for r in runs_of(store, job.id) if r.created_at > took_over_at]) >= 2,
            START_DEADLINE,
        )
    finally:
        zombie.proc.send_signal(signal.SIGCONT)

    # The resumed node finds its lease lapsed by its own clock, and the store refuses its
    # epoch: it becomes a standby. Let slots pass with both processes alive.
    resumed_at = store.now()
    wait_until(
        lambda: runs_of(store, job.id)[-1].scheduled_for >= resumed_at + 3 * SECOND, START_DEADLINE
    )
    assert leader_of(store, pair) is standby
    standby.terminate()
    zombie.terminate()

    assert_each_slot_once(accounted(runs_of(store, job.id), store.slot_skips(job.id)))
    assert "resign epoch=" in zombie.log()


OUTAGE = timedelta(seconds=6)
GRACE = timedelta(seconds=2)
"""Misfire grace of the outage tests: wide enough that a slow process start or a loaded
box does not make a slot misfire outside the outage."""


def run_with_outage(
    store: Store, nodes: Callable[[str], Node], spec: JobSpec
) -> tuple[int, datetime]:
    """Submit ``spec`` once a scheduler leads; stop that scheduler after a few slots, stay
    down for OUTAGE, then schedule again with another until a few slots passed, and stop
    it. Returns the job id and when the second scheduler started."""
    before = nodes("before")
    wait_until(lambda: store.leader() is not None, START_DEADLINE)
    job_id = store.submit(spec).job.id
    wait_until(lambda: len(runs_of(store, job_id)) >= 2 or store.slot_skips(job_id), START_DEADLINE)
    before.terminate()
    stopped_at = store.now()
    # The outage itself; nothing is timed on it.
    wait_until(lambda: store.now() >= stopped_at + OUTAGE, START_DEADLINE, 0.05)
    restarted_at = store.now()
    after = nodes("after")
    wait_until(lambda: due_after(store, job_id, restarted_at + 2 * SECOND), START_DEADLINE)
    after.terminate()
    return job_id, restarted_at


def due_after(store: Store, job_id: int, at: datetime) -> bool:
    next_run_at = store.get_job(job_id).next_run_at
    return next_run_at is not None and next_run_at > at


def late(runs: Sequence[Run]) -> list[Run]:
    """Runs triggered more than the misfire grace after their slot: catch-up runs."""
    return [r for r in runs if r.created_at - r.scheduled_for > GRACE]


@pytest.mark.parametrize("policy", [MisfirePolicy.SKIP, MisfirePolicy.ONCE, MisfirePolicy.ALL])
def test_misfire_policy_decides_the_slots_missed_during_a_scheduler_outage(
    store: Store, nodes: Callable[[str], Node], policy: MisfirePolicy
) -> None:
    spec = per_second(misfire=policy, misfire_grace=GRACE)

    job_id, restarted_at = run_with_outage(store, nodes, spec)

    runs = runs_of(store, job_id)
    skips = store.slot_skips(job_id)
    assert_each_slot_once(accounted(runs, skips))
    if policy is MisfirePolicy.SKIP:
        (skip,) = skips
        assert skip.fate is SlotFate.MISFIRE
        assert skip.count >= 2
        assert skip.recorded_at is not None
        assert skip.recorded_at >= restarted_at
        assert late(runs) == []
    elif policy is MisfirePolicy.ONCE:
        (skip,) = skips
        assert skip.fate is SlotFate.COALESCED
        assert skip.count >= 1
        (catch_up,) = late(runs)
        assert catch_up.id == skip.run_id
        assert catch_up.scheduled_for == skip.last_slot + SECOND
    else:
        assert skips == []
        assert len(late(runs)) >= 2


def test_overlap_forbid_skips_slots_while_the_previous_run_is_unfinished_across_an_outage(
    store: Store, nodes: Callable[[str], Node]
) -> None:
    spec = per_second(overlap=OverlapPolicy.FORBID, misfire_grace=GRACE)

    job_id, restarted_at = run_with_outage(store, nodes, spec)

    (first,) = runs_of(store, job_id)  # nobody works it: it stays queued, the rest skip
    assert first.state is RunState.QUEUED
    skips = store.slot_skips(job_id)
    assert {s.fate for s in skips} <= {SlotFate.OVERLAP, SlotFate.COALESCED}
    assert any(s.fate is SlotFate.OVERLAP and s.last_slot >= restarted_at for s in skips)
    assert_each_slot_once(accounted([first], skips))

    # Once that run has finished, the next slot runs again.
    (claimed,) = store.claim("tests", limit=1)
    store.complete(claimed.id, claimed.fencing_token)
    again = nodes("again")
    wait_until(lambda: len(runs_of(store, job_id)) == 2, START_DEADLINE)
    again.terminate()
    runs = runs_of(store, job_id)
    assert_each_slot_once(accounted(runs, store.slot_skips(job_id)))
