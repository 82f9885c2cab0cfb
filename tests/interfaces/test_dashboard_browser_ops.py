"""The operator's pages in a real browser (Debian's Chromium, Playwright, a real ``tickwork
api`` process on a real store): the activity charts against known data, with and without
JavaScript; runs filtered and retried in bulk through the confirmation; a run's page; the
queues page calling out a queue nobody consumes. The fixtures are the dashboard browser
tests' own (``test_dashboard_browser.py``)."""

# The fixtures imported from the dashboard's browser tests are named again as parameters:
# that is how pytest passes them, not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect
from test_dashboard_browser import (  # noqa: F401 (fixtures)
    EXPECT_TIMEOUT_MS,
    Server,
    browser,
    client,
    console_errors,
    key,
    page,
    server,
    sign_in,
)

from tickwork.client import Client
from tickwork.job import JobSpec, RunState
from tickwork.retry import RetryPolicy
from tickwork.schedule import Once
from tickwork.stats import bucket_percentile, lag_bucket

pytestmark = pytest.mark.slow

SECOND = timedelta(seconds=1)


def finished(client: Client, slot: datetime, lag: timedelta, outcome: str, **fields: Any) -> None:
    """A run of slot ``slot`` started ``lag`` late and ending ``outcome`` a second later,
    written straight to the store at those times."""
    store = client.store
    attempts = 1 if outcome == "dead" else 3
    spec = JobSpec(
        task="http",
        schedule=Once(at=slot),
        retry=RetryPolicy(max_attempts=attempts),
        args={"url": "https://example.com/"},
        **fields,
    )
    run = store.submit(spec, now=slot).run
    assert run is not None
    [held] = store.claim("w-test", limit=1, now=slot + lag)
    assert held.id == run.id
    if outcome == "succeeded":
        store.complete(held.id, held.fencing_token, now=slot + lag + SECOND)
    else:
        store.fail(
            held.id,
            held.fencing_token,
            "Traceback (most recent call last):\n  ValueError: boom",
            now=slot + lag + SECOND,
        )


@pytest.fixture
def minute(client: Client) -> datetime:
    """A whole minute ten minutes ago, in which the tests' runs finish."""
    return client.now().replace(second=0, microsecond=0) - timedelta(minutes=10)


def seed(client: Client, minute: datetime) -> None:
    """Three runs in ``minute``: two succeeded (1 s and 2 s late), one dead (4 s late); and
    one succeeded two minutes later, 1 s late. Folded, as the leader would."""
    finished(client, minute, SECOND, "succeeded")
    finished(client, minute + 5 * SECOND, 2 * SECOND, "succeeded")
    finished(client, minute + 10 * SECOND, 4 * SECOND, "dead")
    finished(client, minute + 2 * timedelta(minutes=1), SECOND, "succeeded")
    client.store.fold_minutes()


def edge(ms: float) -> str:
    """How the chart writes the lag percentile of one sample of ``ms`` (its bucket's edge)."""
    value = bucket_percentile({lag_bucket(ms): 1}, 50)
    assert value is not None
    return f"{value:g}"


def test_the_charts_show_known_runs_by_outcome_and_lag(
    page: Page, client: Client, key: str, minute: datetime
) -> None:
    seed(client, minute)
    sign_in(page, key)
    page.get_by_role("link", name="Activity").click()
    expect(page.get_by_role("heading", name="Activity", level=1)).to_be_visible()

    bucket = page.locator(f'#chart-outcomes g.bucket[data-start="{minute.isoformat()}"]')
    expect(bucket).to_have_attribute("data-succeeded", "2")
    expect(bucket).to_have_attribute("data-dead", "1")
    expect(bucket).to_have_attribute("data-failed", "0")
    expect(bucket.locator("title")).to_have_text(f"{minute:%H:%M}: 2 succeeded, 0 failed, 1 dead")
    # The bars are drawn to scale: two succeeded stand twice as tall as one dead.
    ok = bucket.locator("rect.bar.succeeded").bounding_box()
    dead = bucket.locator("rect.bar.dead").bounding_box()
    assert ok is not None
    assert dead is not None
    assert ok["height"] == pytest.approx(2 * dead["height"], rel=0.05)
    later = page.locator(
        f'#chart-outcomes g.bucket[data-start="{(minute + timedelta(minutes=2)).isoformat()}"]'
    )
    expect(later).to_have_attribute("data-succeeded", "1")
    expect(
        page.locator("#chart-outcomes g.bucket[data-succeeded='0'][data-dead='0']").first
    ).to_be_attached()

    # Lag of the minute's scheduled first attempts: 1, 2 and 4 s -> p50 2 s, p99 4 s.
    point = page.locator(f'#chart-lag rect.point[data-start="{minute.isoformat()}"]')
    expect(point).to_have_attribute("data-p50", edge(2000))
    expect(point).to_have_attribute("data-p99", edge(4000))
    expect(page.locator("#chart-lag polyline.p99, #chart-lag circle.p99").first).to_be_attached()

    # The numbers behind the charts, in the page's table.
    page.get_by_text("The numbers").click()
    row = page.locator(f'#activity-data tr[data-start="{minute.isoformat()}"]')
    expect(row.locator("td")).to_have_text(
        [
            re.compile(f"{minute:%H:%M}"),
            "2",
            "0",
            "1",
            re.compile(r"2\.\d s"),
            re.compile(r"4\.\d s"),
            "0",
        ]
    )


def test_a_manual_retry_does_not_move_the_lag_chart(
    page: Page, client: Client, key: str, minute: datetime
) -> None:
    finished(client, minute, SECOND, "dead")
    client.store.fold_minutes()
    [run] = client.list_runs(state="dead").items
    client.retry_run(run.id)  # ten minutes after its slot: no ten minutes of lag
    [held] = client.store.claim("w-test", limit=1)
    client.store.complete(held.id, held.fencing_token)
    client.store.fold_minutes()
    sign_in(page, key)
    page.goto("/activity")
    lagged = page.locator("#chart-lag rect.point:not([data-p99=''])")
    expect(lagged).to_have_count(1)
    expect(lagged).to_have_attribute("data-p99", edge(1000))
    expect(page.locator("#trigger-lag")).to_have_count(0)
    page.goto("/")
    expect(page.locator("#trigger-lag .value")).to_have_text("– / –")  # only manual runs


def test_the_charts_read_without_javascript(
    browser: Browser, server: Server, client: Client, key: str, minute: datetime
) -> None:
    seed(client, minute)
    context = browser.new_context(base_url=server.url, java_script_enabled=False)
    context.set_default_timeout(EXPECT_TIMEOUT_MS)
    try:
        page = context.new_page()
        sign_in(page, key)
        page.goto("/activity?window=6h")
        expect(page.locator("#chart-outcomes")).to_be_visible()
        counts = page.locator("#chart-outcomes g.bucket").evaluate_all(
            "gs => gs.map(g => [+g.dataset.succeeded, +g.dataset.dead])"
        )
        assert len(counts) == 72  # 6 h in 5-minute buckets
        assert [sum(c[0] for c in counts), sum(c[1] for c in counts)] == [3, 1]
        page.goto("/activity?window=24h")
        expect(page.locator("#chart-outcomes g.bucket")).to_have_count(72)
    finally:
        context.close()


def test_filter_runs_then_retry_them_all_after_confirming(
    page: Page, client: Client, key: str, minute: datetime
) -> None:
    for i in range(2):
        finished(client, minute + i * SECOND, SECOND, "dead", queue="mail", name=f"mail-{i}")
    finished(client, minute + 5 * SECOND, SECOND, "dead", queue="reports")
    sign_in(page, key)
    page.get_by_role("link", name="Runs", exact=True).click()
    page.locator('#run-filters input[name="queue"]').fill("mail")
    page.locator('#run-filters select[name="state"]').select_option("dead")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("#run-list tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("mail-1")

    page.get_by_role("link", name="Retry all dead runs matching…").click()
    expect(page.locator("#bulk-count")).to_contain_text("2 dead runs match now")
    assert {r.state for r in client.list_runs(queue="mail").items} == {RunState.DEAD}
    page.get_by_role("button", name="Retry 2 runs").click()

    expect(page.locator("#bulk-notice")).to_have_text("Retry: 2 runs.")
    expect(rows).to_have_count(2)
    assert {r.state for r in client.list_runs(queue="mail").items} == {RunState.QUEUED}
    assert client.list_runs(queue="reports").items[0].state is RunState.DEAD


def test_a_run_page_shows_its_traceback_and_fencing_token(
    page: Page, client: Client, key: str, minute: datetime
) -> None:
    finished(client, minute, SECOND, "dead", name="export")
    [run] = client.list_runs().items
    sign_in(page, key)
    page.goto("/runs")
    page.locator(f'#run-list tr[data-run-id="{run.id}"]').get_by_role(
        "link", name=str(run.id), exact=True
    ).click()
    expect(page.get_by_role("heading", name=re.compile(f"Run {run.id}"))).to_be_visible()
    expect(page.locator("#run-error")).to_contain_text("ValueError: boom")
    expect(page.locator("#fencing-token")).to_have_text("1")
    expect(page.locator("#run-facts")).to_contain_text("w-test")
    expect(page.locator("#run-args")).to_contain_text("https://example.com/")


def test_the_queues_page_calls_out_a_queue_nobody_consumes(
    page: Page, client: Client, key: str
) -> None:
    client.submit("http", args={"url": "https://example.com/"}, queue="orphan")
    sign_in(page, key)
    # The overview says it first, on the due-backlog card.
    expect(page.locator("#due-backlog")).to_contain_text("No worker consumes queue orphan")
    page.get_by_role("navigation").get_by_role("link", name="Queues", exact=True).click()
    row = page.locator('#queues tr[data-queue="orphan"]')
    expect(row).to_contain_text("No worker consumes this queue")
    expect(row.locator("td").nth(1)).to_have_text("1")
