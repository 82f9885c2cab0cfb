"""The pytest plugin as a user's project meets it: installed with tickwork (the pytest11
entry point), no conftest, fixtures by name; SQLite by default, PostgreSQL when
TICKWORK_TESTING_PG_URL is set."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.conftest import PgServer

pytest_plugins = ["pytester"]

USER_TESTS = """
from datetime import timedelta

from tickwork import Retry


def test_my_retrying_task(tickwork_app, tickwork_kit):
    @tickwork_app.task(max_attempts=3)
    def fetch(ctx, url):
        if ctx.attempt == 1:
            raise Retry(after=60)
        return {"url": url}

    tickwork_app.submit(fetch, args={"url": "https://example.com"})
    done = tickwork_kit.drain()
    assert [d.outcome for d in done] == ["failed", "succeeded"]
    assert done[1].at - done[0].at == timedelta(seconds=60)


def test_each_test_has_its_own_store(tickwork_app, tickwork_kit):
    assert tickwork_app.client.list_jobs().items == []
    print("STORE", tickwork_app.config.db_url.split(":")[0])


def test_my_schedule(tickwork_app, tickwork_kit, tickwork_clock):
    @tickwork_app.task
    def report(ctx):
        pass

    tickwork_app.schedule(report, cron="0 9 * * MON-FRI", tz="Europe/Berlin")
    tickwork_kit.advance(days=7)
    tickwork_kit.assert_submitted(report, count=5)
"""


def test_the_plugin_gives_user_tests_a_kit_on_their_own_sqlite_store(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TICKWORK_TESTING_PG_URL", raising=False)
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=240)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*STORE sqlite*"])


def test_the_plugin_uses_postgresql_when_the_url_is_set(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, pg_server: PgServer
) -> None:
    # The suite's own server (fails under CI when PostgreSQL cannot be had, never skips).
    monkeypatch.setenv("TICKWORK_TESTING_PG_URL", pg_server.url)
    pytester.makepyfile(test_user=USER_TESTS)
    # Two of the three: each test makes and migrates a database, slow on a loaded server.
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-s", "-k", "retrying or own_store", timeout=270
    )
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*STORE postgresql*"])


DOC = Path(__file__).parents[2] / "docs" / "testing-your-tasks.md"


def doc_examples() -> dict[str, str]:
    """Every test module of docs/testing-your-tasks.md (a Python block with a test in it),
    as written, by the name of its first test."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    found = {}
    for block in blocks:
        names = re.findall(r"^(?:async )?def (test_\w+)", block, flags=re.MULTILINE)
        if names:
            found[names[0]] = block
    return found


def test_every_example_of_the_testing_doc_runs_as_written_on_sqlite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TICKWORK_TESTING_PG_URL", raising=False)
    examples = doc_examples()
    # ctx.transaction() with PostgreSQL's SQL: the doc says it needs PostgreSQL (below).
    del examples["test_a_payment_lands_with_its_run_once"]
    assert len(examples) >= 6
    pytester.makepyfile(**{f"test_doc_{i}": code for i, code in enumerate(examples.values())})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=len(examples))


def test_the_docs_transaction_example_runs_as_written_on_postgresql(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, pg_server: PgServer
) -> None:
    monkeypatch.setenv("TICKWORK_TESTING_PG_URL", pg_server.url)
    example = doc_examples()["test_a_payment_lands_with_its_run_once"]
    pytester.makepyfile(test_payments=example)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=1)
