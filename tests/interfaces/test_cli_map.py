"""The command map: ``tickwork --help`` reads everyday commands, operations, servers; jobs
and runs are noun groups; the verbs of before keep working; help shows no typer types or
reST; ``--version``."""

from __future__ import annotations

import importlib
import re

import pytest
from cli_support import ok, submit, tickwork

from tickwork import __version__
from tickwork.cli import main
from tickwork.cli.app import COMMANDS, MAP, app, registered
from tickwork.store import Store


def test_help_lists_everyday_commands_then_operations_then_servers() -> None:
    out = ok("--help").out
    panels = [out.index(f"\n{title}:\n") for title in ("Everyday", "Operations", "Servers")]
    assert panels == sorted(panels)
    everyday = out[panels[0] : panels[1]]
    names = [line.split()[0] for line in everyday.splitlines()[2:] if line.startswith("  ")]
    assert names == ["submit", "jobs", "runs", "show", "explain", "next"]
    servers = out[panels[2] :]
    for server in ("run", "scheduler", "worker", "api"):
        assert f"\n  {server} " in servers
    # the old verbs run but are not listed as commands
    assert "\n  retry-all " not in out
    assert "\n  pause " not in out


def test_every_registered_command_is_in_the_map_and_every_entry_resolves() -> None:
    for entry in COMMANDS:
        for module in entry.modules:
            importlib.import_module(f"tickwork.cli.{module}")
    names = {info.name for info in app.registered_commands} | {
        group.name for group in app.registered_groups
    }
    assert names == set(MAP)
    for entry in COMMANDS:
        command = registered(entry.name)
        assert command is not None, entry.name
        assert command.hidden == (entry.panel is None), entry.name


HELPS = [
    [],
    *([entry.name] for entry in COMMANDS),
    ["jobs", "pause"],
    ["jobs", "list"],
    ["runs", "retry"],
    ["runs", "retry-all"],
    ["runs", "show"],
    ["db", "status"],
    ["keys", "list"],
]


@pytest.mark.parametrize("argv", HELPS, ids=lambda argv: " ".join(argv) or "tickwork")
def test_help_shows_no_typer_types_and_no_rest_markup(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Usage: tickwork {' '.join(argv)}".rstrip() + " ")
    assert "``" not in out
    assert ":func:" not in out
    assert not re.search(r"<(bool|int|str|float|list|text|integer)", out), out
    assert "range>" not in out
    assert "x>=" not in out


def test_version_prints_the_version() -> None:
    assert ok("--version").out == f"tickwork {__version__}\n"


def test_old_job_verbs_and_the_noun_group_do_the_same(store: Store) -> None:
    job = submit(store, every="1h")
    db = ("--db", store.url)

    assert ok("pause", str(job.id), *db).out == f"job {job.id} is paused\n"
    assert ok("jobs", "resume", str(job.id), *db).out == f"job {job.id} is active\n"
    assert ok("jobs", "pause", str(job.id), *db, "--json").json()["state"] == "paused"
    assert ok("resume", str(job.id), *db, "--json").json()["state"] == "active"
    old = ok("trigger", str(job.id), *db).last_line
    new = ok("jobs", "trigger", str(job.id), *db).last_line
    assert int(new) > int(old)
    assert ok("jobs", "show", str(job.id), *db, "--json").json()["job"]["id"] == job.id
    assert ok("show", str(job.id), *db, "--json").json()["job"]["id"] == job.id
    assert [j["id"] for j in ok("jobs", "list", *db, "--json").json()] == [job.id]
    assert ok("jobs", "cancel", str(job.id), *db).out == f"job {job.id} is cancelled\n"
    assert ok("cancel", str(job.id), *db, "--json").json()["state"] == "cancelled"


def test_old_run_verbs_and_the_noun_group_do_the_same(store: Store) -> None:
    job = submit(store, every="1h")
    db = ("--db", store.url)
    first = int(ok("jobs", "trigger", str(job.id), *db).last_line)
    second = int(ok("jobs", "trigger", str(job.id), *db).last_line)

    assert ok("runs", "cancel", str(first), *db, "--json").json()["state"] == "cancelled"
    assert ok("cancel", "--run", str(second), *db, "--json").json()["state"] == "cancelled"
    assert ok("runs", "show", str(first), *db, "--json").json()["id"] == first
    assert ok("show", "--run", str(first), *db, "--json").json()["id"] == first
    listed = [r["id"] for r in ok("runs", "list", *db, "--json").json()]
    assert listed == [r["id"] for r in ok("runs", *db, "--json").json()] == [second, first]
    assert ok("runs", "dead", *db, "--json").json() == ok("dead", *db, "--json").json() == []
    assert ok("runs", "retry-all", *db, "--yes", "--json").json()["count"] == 0
    assert ok("retry-all", *db, "--yes", "--json").json()["count"] == 0
    assert ok("runs", "cancel-all", *db, "--yes", "--json").json()["count"] == 0


def test_run_without_s_is_still_the_all_in_one_server() -> None:
    out = ok("run", "--help").out
    assert out.startswith("Usage: tickwork run [OPTIONS]\n")
    assert "--allow-shell" in out


def test_an_unknown_subcommand_of_a_noun_exits_2() -> None:
    result = tickwork("jobs", "pasue", "1")
    assert result.code == 2
    assert result.err.startswith("tickwork: error: No such command 'pasue'")
