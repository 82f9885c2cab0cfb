"""``tickwork submit`` and ``tickwork runs`` in process: the job id alone on the last line;
bad input exits 2 with one line on stderr and writes nothing."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tickwork.cli import main
from tickwork.job import RunState
from tickwork.schedule import Cron, Interval, Once
from tickwork.store import Store


def submit(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> int:
    """Run ``tickwork submit``; return the job id from the last line of stdout."""
    code = main(["submit", "--db", url, *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return int(out.strip().splitlines()[-1])


def test_submit_shell_now_prints_the_job_id_last(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    job_id = submit(capsys, store.url, "shell", "--", "ls", "-la", "--color=never")

    job = store.get_job(job_id)
    assert job.task == "shell"
    assert job.args == {"argv": ["ls", "-la", "--color=never"]}
    (run,) = store.list_runs(job_id=job_id).items
    assert run.state is RunState.QUEUED


def test_submit_http_in_ten_seconds(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    before = store.now()
    job_id = submit(capsys, store.url, "--in", "10s", "http", "https://example.com/hook",
                    "--method", "post", "--args", '{"json": {"a": 1}}')  # fmt: skip

    job = store.get_job(job_id)
    assert job.args == {"url": "https://example.com/hook", "method": "POST", "json": {"a": 1}}
    assert isinstance(job.schedule, Once)
    assert job.next_run_at is not None
    assert job.next_run_at >= before


def test_submit_cron_with_policies(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    job_id = submit(
        capsys, store.url,
        "--cron", "*/5 * * * *", "--tz", "Europe/Berlin", "--name", "backup",
        "--misfire", "skip", "--overlap", "forbid", "--max-attempts", "5", "--timeout", "1m",
        "--queue", "ops", "--priority", "10", "--tenant", "acme",
        "shell", "--", "/usr/local/bin/backup.sh", "--full",
    )  # fmt: skip

    job = store.get_job(job_id)
    assert job.schedule == Cron("*/5 * * * *", "Europe/Berlin")
    assert (job.name, job.tenant, job.queue, job.priority) == ("backup", "acme", "ops", 10)
    assert (job.misfire.value, job.overlap.value) == ("skip", "forbid")
    assert job.retry.max_attempts == 5
    assert job.timeout is not None
    assert job.timeout.total_seconds() == 60


def test_submit_cron_ending_on_sunday_runs_on_sunday(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    job_id = submit(capsys, store.url, "--cron", "0 9 * * 5-7", "shell", "--", "true")

    job = store.get_job(job_id)
    assert job.schedule == Cron("0 9 * * 5-7")
    assert job.next_run_at is not None
    fires = [job.next_run_at]
    while len(fires) < 6:
        following = job.schedule.next_after(fires[-1])
        assert following is not None
        fires.append(following)
    assert {fire.isoweekday() for fire in fires} == {5, 6, 7}


def test_submit_every(capsys: pytest.CaptureFixture[str], store: Store) -> None:
    job_id = submit(capsys, store.url, "--every", "30s", "shell", "--", "true")

    schedule = store.get_job(job_id).schedule
    assert isinstance(schedule, Interval)
    assert schedule.every.total_seconds() == 30


def test_submit_a_task_of_an_app_module(
    capsys: pytest.CaptureFixture[str],
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "cli_submit_app.py").write_text(
        textwrap.dedent(
            """
            from tickwork.app import App
            app = App()

            @app.task
            def send_report(ctx, to):
                pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        job_id = submit(capsys, store.url, "--app", "cli_submit_app", "send_report",
                        "--args", '{"to": "ops@example.com"}')  # fmt: skip
    finally:
        sys.modules.pop("cli_submit_app", None)

    job = store.get_job(job_id)
    assert (job.task, job.args) == ("send_report", {"to": "ops@example.com"})


def test_the_same_idempotency_key_prints_the_same_job(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    first = submit(capsys, store.url, "--idempotency-key", "k1", "shell", "--", "true")
    again = submit(capsys, store.url, "--idempotency-key", "k1", "shell", "--", "true")

    assert again == first
    assert len(store.list_jobs().items) == 1


BAD_INPUT = [
    (["--cron", "* * * * *", "--every", "5s", "shell", "--", "true"], "at most one schedule"),
    (["--cron", "61 * * * *", "shell", "--", "true"], "invalid cron expression"),
    (["--cron", "0 9 * * FRI-MON", "shell", "--", "true"], "bad day-of-week field 'FRI-MON'"),
    (["--cron", "* * * * *", "--tz", "Mars/Olympus", "shell", "--", "true"], "time zone"),
    (["--tz", "Europe/Berlin", "shell", "--", "true"], "only to a cron"),
    (["--every", "0.5s", "shell", "--", "true"], "at least 1 s"),
    (["--in", "soon", "shell", "--", "true"], "not a duration"),
    (["--at", "2030-01-01T09:00:00", "shell", "--", "true"], "no UTC offset"),
    (["send_report"], "unknown task 'send_report'"),
    (["--args", "{not json", "http", "https://example.com"], "not valid JSON"),
    (["--args", "[1, 2]", "http", "https://example.com"], "JSON object"),
    (
        ["--args", '{"json": ' + "[" * 255 + "]" * 255 + "}", "http", "https://example.com"],
        "nested deeper than 32 levels",
    ),
    (
        ["--args", '{"json": ' + "[" * 5000 + "]" * 5000 + "}", "http", "https://example.com"],
        "nested deeper than 32 levels",
    ),
    (["--at", "9999-12-31T23:59:59+00:00", "shell", "--", "true"], "out of range"),
    (["--at", "2030-01-01T09:00:00Z\x1c", "shell", "--", "true"], "only printable ASCII"),
    (["--name", "a\u202eb", "shell", "--", "true"], "bidirectional controls"),
    (["shell"], "shell needs a command"),
    (["http", "https://a.example", "https://b.example"], "one URL"),
    (["http", "ftp://example.com"], "not an absolute http"),
    (["--method", "POST", "shell", "--", "true"], "only to the http task"),
    (["--misfire", "sometimes", "--every", "5s", "shell", "--", "true"], "misfire must be"),
    (["--overlap", "never", "--every", "5s", "shell", "--", "true"], "overlap must be"),
    (["--priority", "5000", "shell", "--", "true"], "priority must be"),
    (["--max-attempts", "0", "shell", "--", "true"], "max_attempts must be"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_INPUT, ids=[m for _, m in BAD_INPUT])
def test_bad_input_exits_2_with_one_line_and_creates_no_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    db = tmp_path / "never.db"

    code = main(["submit", "--db", f"sqlite:///{db}", *argv])

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("tickwork: error: ")
    assert message in err
    assert not db.exists()


def test_bad_input_writes_nothing_to_an_existing_store(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    for argv, _ in BAD_INPUT:
        assert main(["submit", "--db", store.url, *argv]) == 2
    capsys.readouterr()

    assert store.list_jobs().items == []


def test_runs_lists_as_json_and_as_a_table(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    job_id = submit(capsys, store.url, "shell", "--", "true")

    assert main(["runs", "--db", store.url, "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert (run["job_id"], run["task"], run["state"]) == (job_id, "shell", "queued")

    assert main(["runs", "--db", store.url, "--job", str(job_id), "--state", "queued"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()
    assert header.split()[:4] == ["RUN", "JOB", "TASK", "STATE"]
    assert row.split()[1:4] == [str(job_id), "shell", "queued"]

    assert main(["runs", "--db", store.url, "--state", "succeeded", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_runs_with_a_bad_state_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "never.db"

    assert main(["runs", "--db", f"sqlite:///{db}", "--state", "done"]) == 2

    assert "state must be one of queued" in capsys.readouterr().err
    assert not db.exists()
