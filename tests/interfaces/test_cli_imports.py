"""What the everyday commands import: only what they do (issue 26, CLI start-up).

A behaviour check that holds the start-up without timing it: each command runs in a child
process as a user runs it (``python -X importtime -m tickwork ...``), and the modules it
imported are read from its import log. ``jobs`` and ``runs`` on an embedded SQLite store
need no PostgreSQL driver, no HTTP server, no worker, no holiday tables; and none of them
needs pydantic, which typer would import to coerce their options
(:class:`tickwork.cli.app.PlainParam`), nor http.client and ssl, which only a run of the
``http`` task needs (:mod:`tickwork.tasks.connections`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import CLI_TIMEOUT, ok, tickwork

NEVER_FOR_SQLITE = (
    "pydantic",
    "pydantic_core",
    "psycopg",
    "psycopg_pool",
    "fastapi",
    "starlette",
    "jinja2",
    "uvicorn",
    "holidays",
    "tickwork.worker",
    "tickwork.store.postgres",
    "tickwork.web",
    "tickwork.node",
    # Only a run of the http task needs these (tickwork.tasks.connections).
    "http.client",
    "ssl",
)


def imported(*argv: str) -> set[str]:
    """The modules ``tickwork ARGV`` imported, from ``-X importtime``'s log (stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tickwork", *argv],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        line.rpartition("|")[2].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }


def forbidden(modules: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == r or m.startswith(f"{r}.") for r in roots))


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated SQLite store with one recurring job, as a user's first calls see it."""
    url = f"sqlite:///{tmp_path_factory.mktemp('imports') / 'tickwork.db'}"
    ok("db", "migrate", "--db", url)
    # A shell job: its submit warns that no worker runs shell tasks, and succeeds.
    assert tickwork("submit", "--db", url, "--every", "1h", "shell", "--", "true").code == 0
    return url


@pytest.mark.parametrize(
    "argv",
    [
        ("jobs",),
        ("runs",),
        ("jobs", "--limit", "5", "--json"),
        ("runs", "--job", "1", "--limit", "5"),
    ],
    ids=["jobs", "runs", "jobs --limit --json", "runs --job --limit"],
)
def test_a_listing_on_sqlite_imports_no_postgres_http_server_worker_or_pydantic(
    sqlite_db: str, argv: tuple[str, ...]
) -> None:
    modules = imported(*argv, "--db", sqlite_db)
    assert "tickwork.store.sqlite" in modules  # the log is read right
    assert forbidden(modules, NEVER_FOR_SQLITE) == []


def test_next_imports_no_store_server_worker_pydantic_or_rich() -> None:
    # It prints plain lines, which tickwork.cli.output writes without rich.
    modules = imported("next", "0 9 * * MON-FRI", "--tz", "Europe/Berlin", "-n", "3")
    assert "tickwork.cron" in modules
    roots = (*NEVER_FOR_SQLITE, "tickwork.store.sqlite", "sqlite3", "rich")
    assert forbidden(modules, roots) == []


def test_help_imports_no_command_module_and_no_rich() -> None:
    modules = imported("--help")
    assert "tickwork.cli.app" in modules
    roots = (*NEVER_FOR_SQLITE, "rich", "tickwork.client", "tickwork.cli.jobs")
    assert forbidden(modules, roots) == []


def test_a_bad_count_still_gets_typers_message(tmp_path: Path) -> None:
    # PlainParam hands what it cannot read to typer's own coercion, word for word.
    for bad, message in [
        ("abc", "Input should be a valid integer, unable to parse string as an integer"),
        ("0", "Input should be greater than or equal to 1"),
        ("1001", "Input should be less than or equal to 1000"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "tickwork", "next", "@hourly", "-n", bad],
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
            check=False,
            cwd=tmp_path,
        )
        assert done.returncode == 2, done
        assert done.stderr == f"tickwork: error: Invalid value for '-n' / '--count': {message}\n"
