"""Clock skew on every node (issue 16, item 3), with real processes: a scheduler whose
wall clock runs 5 s fast (libfaketime) shows as about +5 s in ``tickwork cluster``, a
worker on the host's clock as about 0, and the fast scheduler, which leads, fires nothing
early: due-ness is the database's clock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.job import ONE_OFF_LEAD, JobSpec, Run
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.testing import wait_until

SKEW = 5.0  # seconds the scheduler's clock runs ahead
TOLERANCE = 0.5
DEADLINE = 60.0
"""Seconds the children may take to start, register, lead and trigger on a loaded box."""


def cluster(url: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    done = subprocess.run(
        [sys.executable, "-m", "tickwork", "cluster", "--db", url, "--json"],
        capture_output=True, text=True, timeout=60, env=env, check=True,
    )  # fmt: skip
    view: dict[str, Any] = json.loads(done.stdout)
    return view


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres"])
def test_a_node_5s_fast_shows_5s_off_and_fires_nothing_early(
    store: Store, tmp_path: Path, faketime_library: Path
) -> None:
    lib = faketime_library
    # Slots due 2 s to 8 s from now by the store's clock: a scheduler that believed its own
    # clock would trigger the early ones 5 s before their time.
    now = store.now()
    jobs = [
        store.submit(JobSpec(task="noop", schedule=Once(at=now + timedelta(seconds=s)))).job
        for s in (2, 4, 6, 8)
    ]
    base = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    base["PYTHONUNBUFFERED"] = "1"
    fast = {
        **base,
        "LD_PRELOAD": str(lib),
        "FAKETIME": f"+{int(SKEW)}s",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_DONT_RESET": "1",
    }
    tickwork = [sys.executable, "-m", "tickwork"]
    scheduler = [*tickwork, "scheduler", "--db", store.url, "--node-id", "fast-scheduler"]
    scheduler += ["--leader-renew", "0.5s"]
    worker = [*tickwork, "worker", "--db", store.url, "--node-id", "plain-worker"]
    worker += ["--run-heartbeat", "0.5s", "--queues", "nothing-here"]
    procs: list[subprocess.Popen[bytes]] = []
    logs = {name: tmp_path / f"{name}.log" for name in ("scheduler", "worker")}
    try:
        for argv, env, name in ((scheduler, fast, "scheduler"), (worker, base, "worker")):
            with logs[name].open("w") as log:
                procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env))

        def measured() -> dict[str, dict[str, float]] | None:
            nodes = cluster(store.url)["nodes"]
            clocks = {n["id"]: n["info"].get("clock") for n in nodes}
            return clocks if len(clocks) == 2 and all(clocks.values()) else None

        clocks = wait_until(measured, DEADLINE, interval=0.5)
        assert SKEW - TOLERANCE < clocks["fast-scheduler"]["offset"] < SKEW + TOLERANCE, clocks
        assert abs(clocks["plain-worker"]["offset"]) < TOLERANCE, clocks
        for clock in clocks.values():
            assert 0 <= clock["bound"] < TOLERANCE, clocks

        def all_triggered() -> list[Run] | None:
            runs = [store.list_runs(job_id=job.id).items for job in jobs]
            return [found[0] for found in runs] if all(runs) else None

        runs = wait_until(all_triggered, DEADLINE)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # The leader was the fast node, and no run was created earlier before its slot than a
    # one-off's lead (by the store's clock: 5 s fast would have been 5 s early), nor is any
    # claimable before it.
    text = logs["scheduler"].read_text()
    assert " lead epoch=" in text, text
    for run in runs:
        assert run.created_at >= run.scheduled_for - ONE_OFF_LEAD, (run.created_at, run)
        assert run.run_at == run.scheduled_for
    # One warning for the whole incident, not one per beat; none from the worker.
    warnings = [line for line in text.splitlines() if "off the database clock" in line]
    assert len(warnings) == 1, text
    assert "clock of node fast-scheduler is +5.0" in warnings[0] or "+4.9" in warnings[0]
    assert "off the database clock" not in logs["worker"].read_text()
