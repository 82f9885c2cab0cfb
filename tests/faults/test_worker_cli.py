"""The CLI as a user drives it, in real processes: ``tickwork submit`` prints the job id on
its last line, a ``tickwork worker`` runs it, ``tickwork runs --json`` shows it; bad input
exits 2 with one line on stderr and writes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from worker_procs import DEADLINE, HERE, Cluster

from tickwork.testing import wait_until

pytestmark = pytest.mark.slow


def tickwork(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    return subprocess.run(
        [sys.executable, "-m", "tickwork", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
        check=False,
    )


def runs_json(url: str, *argv: str) -> list[dict[str, Any]]:
    done = tickwork("runs", "--db", url, "--json", *argv)
    assert done.returncode == 0, done.stderr
    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result


def test_submitted_jobs_run_on_a_worker_and_show_in_runs(
    store_url: str, cluster: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "out.txt"
    shell = tickwork("submit", "--db", store_url, "shell", "--", "sh", "-c", f"echo hi > {out}")
    work = tickwork("submit", "--db", store_url, "--app", "worker_fault_app", "work",
                    "--args", '{"seconds": 0}')  # fmt: skip
    assert shell.returncode == 0, shell.stderr
    assert work.returncode == 0, work.stderr
    shell_job = int(shell.stdout.strip().splitlines()[-1])
    work_job = int(work.stdout.strip().splitlines()[-1])

    worker = cluster.worker("w", "--allow-shell")
    wait_until(lambda: all(r["state"] == "succeeded" for r in runs_json(store_url)), DEADLINE)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0

    assert out.read_text() == "hi\n"
    (shell_run,) = runs_json(store_url, "--job", str(shell_job))
    (work_run,) = runs_json(store_url, "--job", str(work_job))
    assert shell_run["result"]["exit_code"] == 0
    assert work_run["result"]["pid"] == worker.pid


def test_bad_input_exits_2_with_one_line_on_stderr_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    url = f"sqlite:///{db}"

    for argv in (
        ["--cron", "* * * * * * *", "shell", "--", "true"],
        ["--in", "10s", "no_such_task"],
        ["--args", "{oops", "http", "https://example.com"],
        ["--at", "tomorrow", "shell", "--", "true"],
        ["--every", "30s", "--cron", "* * * * *", "shell", "--", "true"],
    ):
        done = tickwork("submit", "--db", url, *argv)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith("tickwork: error: ")
    assert not db.exists()


def test_without_db_the_default_is_tickwork_db_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TICKWORK_DB", raising=False)
    # A submit does not create a store (only run, worker, scheduler, api and db migrate do):
    # it names the one it looked for, here.
    refused = tickwork("submit", "shell", "--", "true", cwd=tmp_path)
    assert refused.returncode == 1
    assert f"no tickwork store at {tmp_path.resolve() / 'tickwork.db'}" in refused.stderr
    assert not (tmp_path / "tickwork.db").exists()

    assert tickwork("db", "migrate", cwd=tmp_path).returncode == 0
    done = tickwork("submit", "shell", "--", "true", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "tickwork.db").exists()
