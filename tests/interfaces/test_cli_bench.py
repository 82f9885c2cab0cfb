"""``tickwork bench``, run as users run it: a child process with real worker processes.

Small numbers, and no assertion on speed: a loaded CI box may be slow, never wrong. What
must hold is that every run the bench made was executed exactly once (claimed once,
succeeded) and that it reports what it measured.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import assert_error, submit, tickwork

from tickwork.job import RunState
from tickwork.store import open_store
from tickwork.store.base import MAX_PAGE

pytestmark = pytest.mark.slow  # each bench starts worker processes

RUNS = 300
LAG_RATE = 50
LAG_SECONDS = 1
SMALL = ("--runs", str(RUNS), "--workers", "2", "--lag-rate", str(LAG_RATE))
FIGURES = ("submit_per_s", "runs_per_s", "lag_p50_ms", "lag_p95_ms", "lag_p99_ms", "lag_max_ms")


def test_bench_reports_every_figure_and_runs_each_run_exactly_once(
    store_url: str, backend: str
) -> None:
    result = tickwork(
        "bench", "--db", store_url, *SMALL, "--lag-seconds", str(LAG_SECONDS), "--json"
    )

    assert result.code == 0, result.err
    report = result.json()
    assert report["store"] == backend
    assert (report["runs"], report["workers"], report["concurrency"]) == (RUNS, 2, 10)
    assert report["lag_runs"] == LAG_RATE * LAG_SECONDS
    for key in FIGURES:
        assert report[key] > 0, (key, report)
    assert report["lag_p50_ms"] <= report["lag_p95_ms"] <= report["lag_p99_ms"]
    assert report["lag_p99_ms"] <= report["lag_max_ms"]

    store = open_store(store_url)
    try:
        counts = store.run_stats().by_state
        assert counts == {**dict.fromkeys(RunState, 0), RunState.SUCCEEDED: RUNS + LAG_RATE}
        runs, after = [], None
        while True:
            page = store.list_runs(after=after, limit=MAX_PAGE)
            runs.extend(page.items)
            if page.next_cursor is None:
                break
            after = page.next_cursor
        # Token 1 and attempt 1: each run was claimed once, so executed once.
        assert len(runs) == RUNS + LAG_RATE
        assert {(r.attempt, r.fencing_token) for r in runs} == {(1, 1)}
        assert store.list_nodes() == []  # the workers stopped and deregistered
    finally:
        store.close()


def test_bench_prints_a_table_by_default_on_a_temporary_file_it_removes(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env.update(TMPDIR=str(scratch), COLUMNS="200", TICKWORK_DB=str(tmp_path / "not-this.db"))
    done = subprocess.run(
        [sys.executable, "-m", "tickwork", "bench", "--runs", "50", "--lag-rate", "20",
         "--lag-seconds", "0.5"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "tickwork bench: sqlite (a temporary file), 1 worker process x concurrency 10" in (
        done.stdout
    )
    for measure in ("submit", "drain", "start lag p50", "start lag p99", "start lag max"):
        assert measure in done.stdout
    assert "runs/s" in done.stdout
    assert "drain: 50 runs" in done.stderr  # progress goes to stderr
    # Neither ./tickwork.db nor TICKWORK_DB was touched, and the temporary file is gone.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]
    assert list(scratch.iterdir()) == []


def test_bench_refuses_a_database_that_holds_jobs_and_changes_nothing(store_url: str) -> None:
    store = open_store(store_url)
    try:
        job = submit(store, delay="1h")
        result = tickwork("bench", "--db", store_url, "--runs", "10", "--json")
        assert_error(result, 2, "already holds tickwork jobs")
        assert [j.id for j in store.list_jobs().items] == [job.id]
        assert store.list_runs().items == []
    finally:
        store.close()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--runs", "0"), "--runs"),
        (("--workers", "0"), "--workers"),
        (("--concurrency", "0"), "--concurrency"),
        (("--lag-rate", "0"), "lag_rate must be a positive number"),
        (("--lag-rate", "nan"), "lag_rate must be a positive number"),
        (("--lag-seconds", "-1"), "lag_seconds must be a positive number"),
        (("--lag-rate", "1", "--lag-seconds", "0.1"), "at least one run"),
        (("--db", "mysql://localhost/x"), "unsupported database URL"),
        (("--db", ""), "--db"),
        (("--runs", "many"), "--runs"),
    ],
)
def test_bench_bad_input_exits_2_with_one_line(flags: tuple[str, ...], message: str) -> None:
    assert_error(tickwork("bench", *flags), 2, message)
