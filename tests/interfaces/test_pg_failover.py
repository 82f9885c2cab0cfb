"""PostgreSQL high availability: a multi-host URL, a synchronous standby, a promotion.

A primary and a synchronous standby of the test's own (``chaos.pg``), one URL naming both
(``target_session_attrs=read-write``), and every kind of tickwork process on it: the CLI,
``tickwork api``, ``tickwork scheduler`` and ``tickwork worker``. The primary dies and the
standby is promoted, as an operator (or Patroni) does; the processes carry on without a
restart, and not one submit the API acknowledged is lost.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from api_support import child_env, serving
from cli_support import ok

from chaos import pg
from tickwork.job import RunState
from tickwork.store import open_store

pytestmark = pytest.mark.slow

FAULT_APP_DIR = Path(__file__).parent.parent / "faults"
DEADLINE = 30.0


@pytest.fixture
def replicated(
    own_postgres: tuple[pg.PgCluster, Path],
) -> Iterator[tuple[pg.PgCluster, pg.PgCluster, str]]:
    """A primary, its synchronous standby, and the URL that names both."""
    primary, base = own_postgres
    standby = pg.make_standby(primary, base / "standby", pg.free_port(), sync=True)
    try:
        hosts = f"127.0.0.1:{primary.port},127.0.0.1:{standby.port}"
        yield (
            primary,
            standby,
            f"postgresql://{pg.SUPERUSER}@{hosts}/tw?target_session_attrs=read-write",
        )
    finally:
        standby.destroy()


class Node:
    def __init__(self, argv: list[str], log: Path) -> None:
        env = {**child_env(), "PYTHONPATH": str(FAULT_APP_DIR)}
        env["TICKWORK_TEST_RECORD"] = str(log.with_suffix(".jsonl"))
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tickwork", *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def test_every_process_carries_on_through_a_promotion_and_no_acknowledged_submit_is_lost(
    replicated: tuple[pg.PgCluster, pg.PgCluster, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    primary, standby, url = replicated
    monkeypatch.setenv("PYTHONPATH", str(FAULT_APP_DIR))  # the API loads the fault app too
    ok("db", "migrate", "--db", url)
    ok("submit", "--db", url, "--app", "worker_fault_app", "--cron", "* * * * * *", "work")
    nodes = [
        Node(["scheduler", "--db", url, "--node-id", "s1", "--leader-lease", "3s",
              "--leader-renew", "0.6s", "--leader-safety-margin", "0.3s"], tmp_path / "s1.log"),
        Node(["worker", "--db", url, "--app", "worker_fault_app", "--node-id", "w1",
              "--run-lease", "4s", "--run-heartbeat", "1s"], tmp_path / "w1.log"),
    ]  # fmt: skip
    acked: list[int] = []
    failed: list[str] = []
    stop = threading.Event()
    try:
        api_argv = ["api", "--db", url, "--app", "worker_fault_app", "--port", "0"]
        with serving(api_argv) as api, httpx.Client(base_url=api.url, timeout=10) as web:

            def submit_forever() -> None:
                body = {"task": "work", "schedule": {"delay": 0}}
                while not stop.is_set():
                    try:
                        answer = web.post("/api/v1/jobs", json=body)
                    except httpx.HTTPError as exc:
                        failed.append(repr(exc))
                    else:
                        if answer.status_code == 201:
                            acked.append(answer.json()["id"])
                        else:
                            failed.append(f"{answer.status_code} {answer.text}")
                    stop.wait(0.05)

            submitter = threading.Thread(target=submit_forever, daemon=True)
            submitter.start()
            time.sleep(3)
            before = len(acked)
            promoted_at = pg.fail_over(primary, standby)
            time.sleep(5)  # the API, scheduler and worker find the new primary
            stop.set()
            submitter.join(10)
            after = len(acked) - before
            assert web.get("/readyz").status_code == 200

        # The CLI, on the same URL, now with its first host dead.
        listed = ok("jobs", "--db", url, "--json", "--limit", "1000").json()
        assert ok("cluster", "--db", url, "--json").json()["leader"]["holder"] == "s1"
        store = open_store(url)
        try:
            deadline = time.monotonic() + DEADLINE
            while True:
                states = [store.list_runs(job_id=job_id).items for job_id in acked]
                if all(runs and runs[0].state is RunState.SUCCEEDED for runs in states):
                    break
                assert time.monotonic() < deadline, "acknowledged jobs did not all run"
                time.sleep(0.2)
            jobs = store.list_jobs(limit=1000).items
            cron = next(job for job in jobs if job.schedule.kind == "cron")
            fired_after = [
                run
                for run in store.list_runs(job_id=cron.id, limit=1000).items
                if run.scheduled_for.timestamp() > promoted_at + 1
            ]
        finally:
            store.close()
        alive = [node.proc.poll() is None for node in nodes]
    finally:
        stop.set()
        codes = [node.stop() for node in nodes]

    assert before > 10
    assert after > 10, "the API took no submit after the promotion"
    # Not one acknowledged submit is lost: each is on the promoted standby, and ran.
    assert {job["id"] for job in listed} >= set(acked)
    assert fired_after, "the scheduler triggered nothing after the promotion"
    assert alive == [True, True]  # nobody restarted
    assert codes == [0, 0]
