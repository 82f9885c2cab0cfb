"""Running the real ``tickwork`` command in a child process, as a user does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tickwork.inputs import make_spec
from tickwork.job import Job, JobSpec, Run
from tickwork.store import Store
from tickwork.tasks.registry import Registry

CLI_TIMEOUT = 60.0


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    @property
    def last_line(self) -> str:
        return self.out.strip().splitlines()[-1]


def tickwork(*argv: str, cwd: Path | None = None, stdin: int | None = None) -> Result:
    """``python -m tickwork ARGV`` with no TICKWORK_DB inherited, so ``--db`` decides; run
    from ``cwd`` (whose modules ``--app`` can name) and with ``stdin`` (DEVNULL: no
    terminal, as a cron job or a CI step runs it) when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env["COLUMNS"] = "200"
    done = subprocess.run(
        [sys.executable, "-m", "tickwork", *argv],
        cwd=cwd,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        env=env,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def ok(*argv: str) -> Result:
    """Run a command that must succeed, with nothing on stderr."""
    result = tickwork(*argv)
    assert result.code == 0, f"tickwork {' '.join(argv)} exited {result.code}: {result.err}"
    return result


def assert_error(result: Result, code: int, message: str = "") -> None:
    """Exit ``code``, nothing on stdout, one ``tickwork: error:`` line on stderr."""
    assert result.code == code, (result.code, result.out, result.err)
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("tickwork: error: "), result.err
    assert message in lines[0], (message, lines[0])


def spec(task: str = "shell", **options: Any) -> JobSpec:
    """A validated job spec, as the CLI and the API would build it."""
    options.setdefault("args", {"argv": ["true"]} if task == "shell" else {})
    return make_spec(Registry(), task, **options)


def submit(store: Store, *, now: datetime | None = None, **options: Any) -> Job:
    return store.submit(spec(**options), now=now).job


def lead(store: Store, now: datetime, node: str = "test-leader") -> int:
    """Take the leader lease at ``now`` for a few seconds (it has lapsed by the real now)."""
    lease = store.acquire_leadership(node, timedelta(seconds=5), now=now)
    assert lease is not None
    return lease.epoch


def trigger_at(store: Store, now: datetime) -> list[Run]:
    """Trigger everything due at ``now``, as a leader at ``now`` would."""
    return store.trigger(lead(store, now), now=now).runs


def dead_run(store: Store, job_id: int | None = None) -> Run:
    """A run in the dead-letter list: submitted now, claimed, failed for good."""
    if job_id is None:
        submitted = store.submit(spec())
        assert submitted.run is not None
        run_id = submitted.run.id
    else:
        run_id = store.trigger_job(job_id).id
    (claimed,) = store.claim("test-worker", limit=1)
    assert claimed.id == run_id
    return store.fail(claimed.id, claimed.fencing_token, "boom\nTraceback ...", discard=True)


def snapshot(store: Store) -> tuple[Any, ...]:
    """Everything a command could write, to compare before and after a refused one."""
    jobs = store.list_jobs(limit=1000).items
    return (
        jobs,
        store.list_runs(limit=1000).items,
        [store.slot_skips(job.id) for job in jobs],
        store.list_api_keys(),
    )
