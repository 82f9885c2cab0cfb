"""Only ``run``, ``worker``, ``scheduler``, ``api`` and ``db migrate`` may create a store.

Every other command on a SQLite path with no database there says so (exit 1, naming the
path) and creates nothing: no file, no directory. In Python, ``Client.open`` refuses the
same way, and an ``App`` creates its store on first use (a new user's first submit works).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_support import tickwork

from tickwork import App
from tickwork.cli import main
from tickwork.client import Client
from tickwork.errors import StoreMissing
from tickwork.job import JobState

READ_AND_COMMAND_VERBS = [
    ["jobs"],
    ["jobs", "--json"],
    ["runs"],
    ["runs", "--injected"],
    ["dead"],
    ["queues"],
    ["cluster"],
    ["show", "1"],
    ["explain", "1", "--at", "2026-01-01T09:00Z"],
    ["cancel", "1"],
    ["pause", "1"],
    ["resume", "1"],
    ["trigger", "1"],
    ["retry", "1"],
    ["retry-all"],
    ["cancel-all", "--yes"],
    ["submit", "--in", "10m", "shell", "--", "true"],
    ["tenants", "show", "acme"],
    ["keys", "list"],
    ["keys", "create", "--tenant", "acme"],
    ["calendars", "list"],
    ["db", "status"],
    ["db", "allow-fault-injection"],
    ["next", "0 9 * * *", "--calendar", "de"],
]


def sqlite_url(path: Path) -> str:
    return "sqlite:///" + str(path)


def contents(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


@pytest.mark.parametrize("argv", READ_AND_COMMAND_VERBS, ids=" ".join)
def test_a_command_on_a_missing_default_store_exits_1_and_creates_nothing(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("TICKWORK_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    code = main(argv)
    out, err = capsys.readouterr()
    assert (code, out) == (1, ""), err
    assert f"no tickwork store at {tmp_path.resolve() / 'tickwork.db'}" in err
    assert contents(tmp_path) == []


@pytest.mark.parametrize("argv", [["runs"], ["jobs"], ["db", "status"]], ids=" ".join)
def test_a_command_on_a_missing_directory_creates_neither_directory_nor_file(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "t.db"
    code = main([*argv, "--db", sqlite_url(missing)])
    err = capsys.readouterr().err
    assert code == 1
    assert str(missing) in err
    assert "db migrate" in err
    assert contents(tmp_path) == []


def test_an_empty_file_is_no_store_and_stays_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "t.db"
    empty.touch()
    assert main(["jobs", "--db", sqlite_url(empty)]) == 1
    assert "no tickwork store" in capsys.readouterr().err
    assert (contents(tmp_path), empty.stat().st_size) == (["t.db"], 0)


def test_tickwork_jobs_in_another_directory_says_the_store_is_missing(tmp_path: Path) -> None:
    """As the issue's user met it: the real command, in a directory without a store."""
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = tickwork("jobs")
    finally:
        os.chdir(here)
    assert (result.code, result.out) == (1, "")
    assert result.err.strip() == (
        f"tickwork: error: no tickwork store at {tmp_path.resolve() / 'tickwork.db'} "
        "(is --db or TICKWORK_DB right? `tickwork run` or `tickwork db migrate --db "
        "sqlite:///./tickwork.db` creates one)"
    )
    assert contents(tmp_path) == []


def test_db_migrate_creates_the_store_and_then_reads_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sqlite_url(tmp_path / "new" / "t.db")
    assert main(["db", "migrate", "--db", url]) == 0
    assert main(["jobs", "--db", url]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "(none)"


def test_client_open_refuses_a_missing_store_and_an_app_creates_it(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "app" / "t.db")
    with pytest.raises(StoreMissing) as missing:
        Client.open(url)
    assert missing.value.path == str(tmp_path / "app" / "t.db")
    assert contents(tmp_path) == []
    with App(url) as app:
        app.task(name="hello")(lambda ctx: None)
        job = app.submit("hello")
    assert job.state is JobState.QUEUED
    with Client.open(url) as client:
        assert [j.id for j in client.list_jobs().items] == [job.id]
