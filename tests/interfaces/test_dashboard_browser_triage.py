"""The triage views in a real browser (Debian's Chromium, Playwright, a real ``tickwork
api`` process on a real store): the dead letter's exception line, the job page's order,
the runs table at a narrow width, a silent node on the cluster page. The fixtures are the
dashboard browser tests' own (``test_dashboard_browser.py``)."""

# The fixtures imported from the dashboard's browser tests are named again as parameters:
# that is how pytest passes them, not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from test_dashboard_browser import (  # noqa: F401 (fixtures)
    browser,
    client,
    console_errors,
    key,
    page,
    server,
    sign_in,
)

from tickwork.client import Client
from tickwork.job import RunState

pytestmark = pytest.mark.slow

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/site-packages/tickwork/worker/executor.py", line 460, in _call\n'
    "    result = handler(ctx, **args)\n"
    "RuntimeError: flaky 15 failed"
)


def python_dead_run(client: Client) -> int:
    """A dead run as a worker leaves one whose handler raised."""
    submitted = client.submit("http", args={"url": "https://e.x/"}, max_attempts=1)
    assert submitted.run is not None
    (claimed,) = client.store.claim("test-worker", limit=1)
    error = "RuntimeError: flaky 15 failed"
    client.store.fail(claimed.id, claimed.fencing_token, error, traceback=TRACEBACK)
    assert client.get_run(claimed.id).state is RunState.DEAD
    return claimed.id


def test_the_dead_letter_row_shows_the_exception_and_the_traceback_on_a_click(
    page: Page, client: Client, key: str
) -> None:
    run_id = python_dead_run(client)
    sign_in(page, key)

    page.goto("/dead")

    row = page.locator(f"#run-{run_id}")
    expect(row.locator("code.exception")).to_have_text("RuntimeError: flaky 15 failed")
    expect(row.locator("code.exception")).to_be_visible()
    traceback = row.locator("details pre")
    expect(traceback).to_be_hidden()
    row.get_by_text("Traceback", exact=True).click()
    expect(traceback).to_be_visible()
    expect(traceback).to_contain_text("executor.py")
