"""The nemesis run: a cluster, a workload, one window per nemesis, a drain, the check.

::

    set up    PostgreSQL primary + synchronous standby; 2 schedulers and 3 workers, each in
              its own network namespace; the cron jobs; the submitter
    windows   for each nemesis: baseline (quiet), fault (inject ... heal), after (recovery);
              the cluster is made whole again (every node running) before each baseline
    drain     the submitter stops, the cron jobs are cancelled, every run finishes
    check     final.json is taken from the database, and checker.py reads the directory

The workload: ``CRON_JOBS`` per-second cron jobs (misfire ``all`` with the default 60 s
grace, and ``once`` / ``skip`` with a 2 s grace so that an outage exercises the slot
ledger), and a stream of one-off jobs (``ONE_OFF_RATE`` a second, half due at once, half
1 to 5 s ahead), all on handlers that sleep 0.5 to 3 s (``workload.py``).

Modes: ``--quick`` (CI: every nemesis, short windows, under 6 minutes in all) and the full
run (every window at least 60 s: baseline 15 s, fault 30 s, after 30 s, lag measured over
the last 15 s).
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from chaos import checker, nemesis
from chaos.cluster import WORKERS, Cluster, Timings
from tickwork.job import JobSpec, MisfirePolicy
from tickwork.retry import RetryPolicy
from tickwork.schedule import Cron, Once
from tickwork.store import Store, open_store

log = logging.getLogger("chaos")

CRON_JOBS = (
    ("cron-all-sync", "sleepy", MisfirePolicy.ALL, 60.0),
    ("cron-all-async", "sleepy_async", MisfirePolicy.ALL, 60.0),
    ("cron-once", "sleepy", MisfirePolicy.ONCE, 2.0),
    ("cron-skip", "sleepy_async", MisfirePolicy.SKIP, 2.0),
)
"""(name, task, misfire policy, grace in seconds): every one fires every second."""
ONE_OFF_RATE = 4.0
"""One-off jobs submitted a second."""
RETRY = RetryPolicy(max_attempts=20, backoff_base=0.5, backoff_cap=2.0)
"""Faults spend attempts; no run of the workload may end dead."""
WHOLE_TIMEOUT_S = 60.0
"""Seconds the cluster gets to be whole again (every node registered, a leader) between
windows."""
DRAIN_TIMEOUT_S = 90.0
CRON_MARGIN_S = 2.0
"""Cron slots up to this long before the cron jobs were cancelled must be accounted for."""


@dataclass(frozen=True)
class Mode:
    name: str
    baseline: float
    fault: float
    after: float
    lag_window: float


QUICK = Mode("quick", baseline=4.0, fault=6.0, after=10.0, lag_window=6.0)
FULL = Mode("full", baseline=15.0, fault=30.0, after=30.0, lag_window=15.0)


class Submitter:
    """A client that submits one-off jobs at ``ONE_OFF_RATE`` a second and records every
    acknowledged one (``submits.jsonl``). It reaches the database directly, not through a
    node's link: it is the user whose acknowledged jobs must never be lost."""

    def __init__(self, store: Store, path: Path) -> None:
        self.store = store
        self.out = path.open("a")
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="submitter", daemon=True)
        self.acked = 0
        self.failed = 0
        self._random = random.Random(7)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.out.close()

    def _run(self) -> None:
        period = 1.0 / ONE_OFF_RATE
        next_at = time.monotonic()
        while not self.stopping.is_set():
            delay = 0.0 if self._random.random() < 0.5 else self._random.uniform(1.0, 5.0)
            task = "sleepy" if self._random.random() < 0.5 else "sleepy_async"
            spec = JobSpec(task=task, schedule=Once(delay=timedelta(seconds=delay)), retry=RETRY)
            try:
                submitted = self.store.submit(spec)
            except Exception as exc:  # not acknowledged: it may or may not exist
                self.failed += 1
                log.debug("submit failed: %s", exc)
            else:
                job = submitted.job
                slot = submitted.run.scheduled_for if submitted.run else job.next_run_at
                assert slot is not None
                line = {"job": job.id, "slot": slot.timestamp(), "acked": time.time()}
                self.out.write(json.dumps(line) + "\n")
                self.out.flush()
                self.acked += 1
            next_at += period
            self.stopping.wait(max(0.0, next_at - time.monotonic()))


def run(
    mode: Mode, out: Path, only: list[str] | None = None, tickwork_src: Path | None = None
) -> checker.Report:
    """One nemesis run into ``out``; returns the checker's report. ``tickwork_src``: the
    nodes run the tickwork of that source tree instead of the installed one (to show that
    the nemeses catch an older build's faults)."""
    out.mkdir(parents=True, exist_ok=True)
    timings = Timings()
    cluster = Cluster(out, timings, tickwork_src=tickwork_src)
    nemeses = [nemesis.BY_NAME[name] for name in only] if only else list(nemesis.ALL)
    started = time.time()
    meta: dict[str, Any] = {
        "mode": mode.name,
        "started": started,
        "mono_offset": time.time() - time.monotonic(),
        "run_lease": timings.run_lease,
        "leader_lease": timings.leader_lease,
        "leader_renew": timings.leader_renew,
        "misfire_grace": 60.0,
        "lag_window": mode.lag_window,
        "recovery": 2.0,
        "early_tolerance": 0.01,
        "nemeses": [n.name for n in nemeses],
    }
    store: Store | None = None
    submitter: Submitter | None = None
    try:
        say(f"PostgreSQL primary :{cluster.ports[0]} and synchronous standby :{cluster.ports[1]}")
        cluster.start_database()
        store = open_store(cluster.direct_url(), application_name="chaos harness")
        cron_ids = [
            store.submit(
                JobSpec(
                    task=task,
                    name=name,
                    schedule=Cron("* * * * * *"),
                    misfire=policy,
                    misfire_grace=timedelta(seconds=grace),
                    retry=RETRY,
                )
            ).job.id
            for name, task, policy, grace in CRON_JOBS
        ]
        say("nodes: " + ", ".join(f"{n}" for n in ("s1", "s2", *WORKERS)))
        cluster.start_nodes()
        wait_whole(cluster)
        submitter = Submitter(store, out / "submits.jsonl")
        submitter.start()
        with (out / "nemeses.jsonl").open("a") as windows:
            for each in nemeses:
                window = run_window(cluster, each, mode)
                windows.write(json.dumps(window) + "\n")
                windows.flush()
        say("drain: stop submitting, cancel the cron jobs, let every run finish")
        submitter.stop()
        cancelled_at = store.now().timestamp()
        for job_id in cron_ids:
            store.cancel_job(job_id)
        cron_until = float(int(cancelled_at - CRON_MARGIN_S))
        drain(cluster)
        for node in cluster.nodes.values():
            if node.alive:
                node.terminate()
        snapshot(cluster, out / "final.json", cron_until)
    finally:
        if submitter is not None and submitter.thread.is_alive():
            submitter.stop()
        if store is not None:
            store.close()
        cluster.close()
        meta["ended"] = time.time()
        (out / "meta.json").write_text(json.dumps(meta, indent=1))
    cluster.remove_database_files()
    return checker.check(out)


def run_window(cluster: Cluster, each: nemesis.Nemesis, mode: Mode) -> dict[str, Any]:
    wait_whole(cluster)
    load = load_per_core()  # before this window's fault: its harm cannot raise its own bar
    baseline_start = time.time()
    time.sleep(mode.baseline)
    fault_start = time.time()
    state, targets = each.inject(cluster)
    hold = each.hold(cluster, mode.fault)
    say(f"{each.name}: {', '.join(targets)}; holding {hold:g} s")
    time.sleep(hold)
    each.heal(cluster, state)
    healed = time.time()
    time.sleep(mode.after)
    end = time.time()
    return {
        "name": each.name,
        "targets": targets,
        "baseline": [baseline_start, fault_start],
        "fault": [fault_start, healed],
        "end": end,
        "leader": each.leader,
        "database": each.database,
        "load": load,
    }


def load_per_core() -> float:
    """The machine's 1-minute load average (runnable tasks and those waiting on I/O) over
    its cores: how busy the box was (the cluster, PostgreSQL and anything else on it); 0
    where the system does not tell."""
    try:
        return round(os.getloadavg()[0] / (os.cpu_count() or 1), 2)
    except OSError:
        return 0.0


def wait_whole(cluster: Cluster) -> None:
    """Every node running and registered, and a leader: the state each baseline starts in."""
    deadline = time.monotonic() + WHOLE_TIMEOUT_S
    for node in cluster.nodes.values():
        if not node.alive:
            code = node.proc.returncode if node.proc is not None else None
            say(f"{node.name} exited unasked (code {code}): restarting it")
            if node.proc is not None:
                cluster.event("exit", node, pid=node.pid, code=code)
            node.start()
    while True:
        try:
            if cluster.leader() is not None and cluster.registered() >= set(cluster.nodes):
                return
        except Exception as exc:  # the database may still be coming back
            log.debug("not whole yet: %s", exc)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cluster was not whole again within {WHOLE_TIMEOUT_S:g} s")
        time.sleep(0.2)


def drain(cluster: Cluster) -> None:
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while True:
        (waiting,) = cluster.sql(
            "SELECT count(*) FROM tickwork_runs WHERE state NOT IN ('succeeded', 'dead', "
            "'cancelled')"
        )[0:1]
        (due,) = cluster.sql(
            "SELECT count(*) FROM tickwork_jobs WHERE state = 'active' AND next_run_at IS NOT NULL"
        )[0:1]
        if waiting[0] == 0 and due[0] == 0:
            return
        if time.monotonic() > deadline:
            say(f"drain: {waiting[0]} runs unfinished, {due[0]} jobs due; going on")
            return
        time.sleep(0.5)


def snapshot(cluster: Cluster, path: Path, cron_until: float) -> None:
    """The database's jobs, runs and slot ledger, as ``final.json`` (README.md)."""
    (db_now,) = cluster.sql("SELECT extract(epoch FROM now())::float8")[0]
    jobs = [
        {
            "id": r[0],
            "name": r[1],
            "kind": r[2],
            "misfire": r[3],
            "overlap": r[4],
            "misfire_grace": r[5],
            "created_at": r[6],
            "state": r[7],
            "next_run_at": r[8],
        }
        for r in cluster.sql(
            "SELECT id, name, schedule->>'kind', misfire, overlap, misfire_grace, "
            "extract(epoch FROM created_at)::float8, state, "
            "extract(epoch FROM next_run_at)::float8 FROM tickwork_jobs ORDER BY id"
        )
    ]
    runs = [
        {
            "id": r[0],
            "job_id": r[1],
            "scheduled_for": r[2],
            "state": r[3],
            "attempt": r[4],
            "fencing_token": r[5],
            "result": r[6],
            "worker": r[7],
        }
        for r in cluster.sql(
            "SELECT id, job_id, extract(epoch FROM scheduled_for)::float8, state, attempt, "
            "fencing_token, result, worker FROM tickwork_runs ORDER BY id"
        )
    ]
    skips = [
        {
            "job_id": r[0],
            "first_slot": r[1],
            "last_slot": r[2],
            "count": r[3],
            "fate": r[4],
            "run_id": r[5],
            "more": r[6],
        }
        for r in cluster.sql(
            "SELECT job_id, extract(epoch FROM first_slot)::float8, "
            "extract(epoch FROM last_slot)::float8, count, fate, run_id, more "
            "FROM tickwork_slot_skips ORDER BY id"
        )
    ]
    document = {"db_now": db_now, "jobs": jobs, "runs": runs, "skips": skips}
    document["cron_until"] = cron_until
    path.write_text(json.dumps(document))


def say(message: str) -> None:
    print(f"chaos {time.strftime('%H:%M:%S')} {message}", flush=True)
