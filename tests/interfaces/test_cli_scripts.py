"""The CLI for scripts: ``--json`` on submit, ``db`` and ``keys``; bulk commands that say how
many runs match, and never ask where no one can answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import CLI_TIMEOUT, Result, assert_error, ok, submit, tickwork

from tickwork.job import RunState
from tickwork.store import Store


def without_terminal(*argv: str) -> Result:
    """``tickwork ARGV`` with stdin on /dev/null: a cron job's or a CI step's view."""
    return tickwork(*argv, stdin=subprocess.DEVNULL)


def test_submit_json_is_one_document_with_the_job(store: Store) -> None:
    db = ("--db", store.url)
    made = ok(
        "submit", *db, "--json", "--in", "10m", "--idempotency-key", "k1", "shell", "--", "true"
    )
    first = made.json()
    assert first["created"] is True
    assert first["job"]["task"] == "shell"
    assert first["job"]["args"] == {"argv": ["true"]}
    assert isinstance(first["warnings"], list)
    again = ok(
        "submit", *db, "--json", "--in", "10m", "--idempotency-key", "k1", "shell", "--", "true"
    )
    assert again.json()["created"] is False
    assert again.json()["job"]["id"] == first["job"]["id"]


def test_submit_file_json_counts_and_names_the_jobs(store: Store, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    lines = [
        {"task": "shell", "args": {"argv": ["true"]}, "delay": "10m"},
        {"task": "shell", "args": {"argv": ["true"]}, "delay": "5m", "idempotency_key": "a"},
    ]
    jobs.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    done = ok("submit", "--db", store.url, "--file", str(jobs), "--json").json()
    assert done["created"] == 2
    assert done["matched"] == 0
    assert len(done["job_ids"]) == 2
    again = ok("submit", "--db", store.url, "--file", str(jobs), "--json").json()
    assert (again["created"], again["matched"]) == (1, 1)
    assert again["job_ids"][1] == done["job_ids"][1]


def test_db_status_and_migrate_json(store: Store) -> None:
    status = ok("db", "status", "--db", store.url, "--json").json()
    assert status["version"] == status["latest"]
    assert status["behind"] is False
    migrated = ok("db", "migrate", "--db", store.url, "--json").json()
    assert migrated == {"applied": [], "version": status["version"], "latest": status["latest"]}


def test_keys_json_everywhere(store: Store) -> None:
    db = ("--db", store.url)
    created = ok("keys", "create", *db, "--tenant", "acme", "--json").json()
    assert created["prefix"] in created["key"]
    assert created["tenant"] == "acme"
    listed = ok("keys", "list", *db, "--json").json()
    assert [k["id"] for k in listed] == [created["id"]]
    assert "key" not in listed[0]
    revoked = ok("keys", "revoke", created["prefix"], *db, "--json").json()
    assert revoked["id"] == created["id"]
    assert revoked["revoked_at"] is not None


def waiting_runs(store: Store, count: int) -> list[int]:
    ids = []
    for _ in range(count):
        job = submit(store, task="shell", queue="mail")
        (run,) = store.list_runs(job_id=job.id, limit=1).items
        ids.append(run.id)
    return ids


@pytest.mark.parametrize("noun", [(), ("runs",)], ids=["alias", "noun"])
def test_a_bulk_command_without_a_terminal_refuses_naming_the_count(
    store: Store, noun: tuple[str, ...]
) -> None:
    ids = waiting_runs(store, 3)
    result = without_terminal(*noun, "cancel-all", "--db", store.url, "--queue", "mail")
    assert_error(result, 2, "cancel-all would cancel 3 waiting runs matching queue=mail")
    assert "--yes" in result.err
    assert {store.get_run(i).state for i in ids} == {RunState.QUEUED}


def test_a_bulk_command_with_json_never_asks(store: Store) -> None:
    ids = waiting_runs(store, 2)
    result = without_terminal("runs", "cancel-all", "--db", store.url, "--json")
    assert_error(result, 2, "--json never asks")
    assert {store.get_run(i).state for i in ids} == {RunState.QUEUED}
    done = without_terminal("runs", "cancel-all", "--db", store.url, "--json", "--yes")
    assert done.code == 0, done.err
    assert json.loads(done.out) == {"count": 2, "run_ids": sorted(ids)}
    assert {store.get_run(i).state for i in ids} == {RunState.CANCELLED}


def test_a_bulk_command_with_yes_acts_without_a_terminal(store: Store) -> None:
    ids = waiting_runs(store, 1)
    done = without_terminal("cancel-all", "--db", store.url, "--yes")
    assert done.code == 0, done.err
    assert done.out == "cancelled 1 runs\n"
    assert store.get_run(ids[0]).state is RunState.CANCELLED


@pytest.mark.parametrize("argv", [["runs"], ["jobs"], ["queues"], ["cluster"]], ids=" ".join)
def test_watch_draws_again_every_second_until_ctrl_c(store: Store, argv: list[str]) -> None:
    submit(store, every="1h")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    with subprocess.Popen(
        [sys.executable, "-m", "tickwork", *argv, "--db", store.url, "--watch", "--json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as child:
        assert child.stdout is not None
        frames = [json.loads(child.stdout.readline()) for _ in range(2)]
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=CLI_TIMEOUT)
    assert frames[0] == frames[1] or argv == ["cluster"]  # the cluster's "now" moves on
    assert child.returncode == 0, err
    assert err == ""
