"""The triage views in a real browser (Debian's Chromium, Playwright, a real ``tickwork
api`` process on a real store): the dead letter's exception line, the job page's order,
the runs table at a narrow width, a silent node on the cluster page. The fixtures are the
dashboard browser tests' own (``test_dashboard_browser.py``)."""

# The fixtures imported from the dashboard's browser tests are named again as parameters:
# that is how pytest passes them, not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import Locator, Page, expect
from test_dashboard_browser import (  # noqa: F401 (fixtures)
    browser,
    client,
    colour,
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


def test_the_job_page_shows_its_definition_before_its_runs(
    page: Page, client: Client, key: str
) -> None:
    job = client.schedule(
        "http", name="every-5s", cron="*/5 * * * * *", args={"url": "https://e.x/"}
    ).job
    for _ in range(30):
        client.trigger_job(job.id)
        (claimed,) = client.store.claim("test-worker", limit=1)
        result = {"status": 200, "body": "ok", "slot": "2026-12-01T09:00:00Z", "note": "x" * 80}
        client.store.complete(claimed.id, claimed.fencing_token, result=result)
    sign_in(page, key)

    page.goto(f"/jobs/{job.id}")

    definition = page.get_by_role("heading", name="Definition")
    fire_times = page.get_by_role("heading", name="Next fire times")
    runs = page.get_by_role("heading", name="Runs", exact=True)
    expect(definition).to_be_visible()
    tops = [_top(h) for h in (definition, fire_times, page.locator("#explain"), runs)]
    assert tops == sorted(tops), tops
    viewport = page.viewport_size
    assert viewport is not None
    assert _top(definition) < viewport["height"], "the definition is on the first screen"


def _top(locator: Locator) -> float:
    box = locator.bounding_box()
    assert box is not None
    return box["y"]


def test_the_runs_table_fits_a_700_px_window(page: Page, client: Client, key: str) -> None:
    long_name = "nightly-warehouse-export-of-every-tenant-" + "x" * 40
    for _ in range(3):
        python_dead_run(client)
    submitted = client.submit(
        "http", name=long_name, args={"url": "https://e.x/"}, queue="a-rather-long-queue-name"
    )
    assert submitted.run is not None
    (claimed,) = client.store.claim("test-worker", limit=1)
    client.store.complete(claimed.id, claimed.fencing_token, result={"status": 200})
    page.set_viewport_size({"width": 700, "height": 900})
    sign_in(page, key)

    page.goto("/runs")

    table = page.locator("#run-list")
    expect(table).to_be_visible()
    expect(table.get_by_role("columnheader", name="Started")).to_be_visible()
    expect(table.get_by_role("columnheader", name="Duration")).to_be_visible()
    box = table.bounding_box()
    assert box is not None
    assert box["x"] >= 0, box
    assert box["x"] + box["width"] <= 700, box
    widths = page.evaluate("[document.documentElement.scrollWidth, document.body.scrollWidth]")
    assert max(widths) <= 700, widths
    expect(page.locator("#state-tabs a[data-state=dead] .count")).to_have_text("3")


def test_a_silent_node_is_marked_and_its_running_count_is_not_shown_as_live(
    page: Page, client: Client
) -> None:
    store = client.store
    store.register_node("worker-up", "worker", "host-a", 1)
    store.node_heartbeat("worker-up", running=4)
    quiet_since = store.now() - timedelta(seconds=20)
    store.register_node("worker-quiet", "worker", "host-b", 2, now=quiet_since)
    store.node_heartbeat("worker-quiet", running=3, now=quiet_since)
    admin = client.create_api_key(tenant="default", admin=True)[1]
    sign_in(page, admin)

    page.goto("/cluster")

    quiet = page.locator('tr[data-node-id="worker-quiet"]')
    expect(quiet.locator(".state", has_text="silent")).to_be_visible()
    expect(quiet).to_contain_text("(3 last seen)")
    up = page.locator('tr[data-node-id="worker-up"]')
    expect(up.locator(".state", has_text="up")).to_be_visible()
    assert colour(quiet.locator(".state", has_text="silent")) != colour(
        up.locator(".state", has_text="up")
    )
