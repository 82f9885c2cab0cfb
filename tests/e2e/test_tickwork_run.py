"""`tickwork run` as a newcomer runs it: one real process, jobs submitted from outside."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.client import Client
from tickwork.job import FINISHED_RUN_STATES, Job, JobState, RunState
from tickwork.store import Store, open_store
from tickwork.testing import wait_until

sys.path.insert(0, str(Path(__file__).parent))

from run_app import app as run_app

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
DEADLINE = 30.0


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "executions.jsonl"


@pytest.fixture
def node(store_url: str, record: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ, TICKWORK_TEST_RECORD=str(record), PYTHONPATH=str(HERE))
    log = (tmp_path / "run.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tickwork",
            "run",
            "--db",
            store_url,
            "--app",
            "run_app",
            "--no-api",
        ],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(
            lambda: b"tickwork run: ready" in (tmp_path / "run.log").read_bytes(),
            DEADLINE,
            what="tickwork run to come up",
        )
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


@pytest.fixture
def db(store_url: str) -> Iterator[Store]:
    store = open_store(store_url)
    yield store
    store.close()


def submit(store: Store, task: str, **options: Any) -> Job:
    """Submit as an application would: through the client, with the task's defaults."""
    return Client(store, run_app.registry).submit(task, **options).job


def executions(record: Path, task: str) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    lines = [json.loads(line) for line in record.read_text().splitlines() if line]
    return [line for line in lines if line["task"] == task]


def test_a_one_off_job_runs_once_on_time(
    node: subprocess.Popen[bytes], db: Store, record: Path
) -> None:
    at = db.now() + timedelta(seconds=1)
    job = submit(db, "tick", at=at)
    wait_until(lambda: len(executions(record, "tick")) == 1, DEADLINE, what="the one-off run")
    run = db.list_runs(job_id=job.id).items[0]
    assert run.scheduled_for == at
    assert run.started_at is not None
    # On time: started after its slot, not before (the store's clock decides).
    assert run.started_at >= at
    wait_until(lambda: db.get_run(run.id).state is RunState.SUCCEEDED, DEADLINE, what="success")
    # Nothing can run it again: its one run is finished (no claim takes a succeeded run) and
    # the job has no slot left. The record line was written before the run succeeded.
    assert db.get_job(job.id).state is JobState.SUCCEEDED
    assert [r.id for r in db.list_runs(job_id=job.id).items] == [run.id]
    assert len(executions(record, "tick")) == 1


def test_a_per_second_cron_job_runs_every_second_without_gaps_or_duplicates(
    node: subprocess.Popen[bytes], db: Store, record: Path
) -> None:
    job = submit(db, "tick", cron="* * * * * *")
    wait_until(lambda: len(executions(record, "tick")) >= 5, DEADLINE, what="five ticks")
    db.pause_job(job.id)
    # A run triggered just before the pause finishes.
    wait_until(
        lambda: all(r.state in FINISHED_RUN_STATES for r in db.list_runs(job_id=job.id).items),
        DEADLINE,
        what="the last runs to finish",
    )
    runs = sorted(db.list_runs(job_id=job.id, limit=1000).items, key=lambda r: r.scheduled_for)
    slots = [r.scheduled_for for r in runs]
    assert len(slots) == len(set(slots))
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(slots))
    assert all(r.state is RunState.SUCCEEDED for r in runs)
    starts = [r.started_at for r in runs if r.started_at is not None]
    assert all(s >= r.scheduled_for for s, r in zip(starts, runs, strict=True))
    ran = sorted(datetime.fromisoformat(e["slot"]) for e in executions(record, "tick"))
    assert ran == slots


def test_a_job_failing_twice_succeeds_on_its_third_attempt_after_backoff(
    node: subprocess.Popen[bytes], db: Store, record: Path
) -> None:
    job = submit(db, "flaky")
    wait_until(
        lambda: db.list_runs(job_id=job.id).items[0].state is RunState.SUCCEEDED,
        DEADLINE,
        what="success",
    )
    attempts = executions(record, "flaky")
    assert [a["attempt"] for a in attempts] == [1, 2, 3]
    assert len({a["run"] for a in attempts}) == 1
    gaps = [b["at"] - a["at"] for a, b in itertools.pairwise(attempts)]
    # Full jitter: each wait is drawn from [0, bound]; bounds 0.5 s then 1.0 s.
    assert gaps[0] <= 0.5 + 1.0
    assert gaps[1] <= 1.0 + 1.0
    run = db.list_runs(job_id=job.id).items[0]
    assert run.attempt == 3


def test_a_retry_after_is_waited_out_before_the_next_attempt(
    node: subprocess.Popen[bytes], db: Store, record: Path
) -> None:
    job = submit(db, "polite")
    wait_until(
        lambda: db.list_runs(job_id=job.id).items[0].state is RunState.SUCCEEDED,
        DEADLINE,
        what="success",
    )
    first, second = executions(record, "polite")
    assert second["at"] - first["at"] >= 0.6


def test_a_job_that_always_fails_ends_dead_with_its_error(
    node: subprocess.Popen[bytes], db: Store, record: Path
) -> None:
    job = submit(db, "hopeless")
    wait_until(
        lambda: db.list_runs(job_id=job.id).items[0].state is RunState.DEAD, DEADLINE, what="dead"
    )
    run = db.list_runs(job_id=job.id).items[0]
    assert run.attempt == 2
    assert run.error is not None
    assert "always fails" in run.error
    assert [e["attempt"] for e in executions(record, "hopeless")] == [1, 2]
    assert [r.id for r in db.list_runs(state=RunState.DEAD).items] == [run.id]
