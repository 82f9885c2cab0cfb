"""The dashboard's runs, run, bulk, queues and activity pages in process (TestClient on a
real store): filters, job names in run tables, bulk commands behind a confirmation, all
or nothing; queues without a consumer called out; charts drawn from the rollup. The same
pages in Chromium are in ``test_dashboard_browser.py``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tickwork.client import Client
from tickwork.job import RunState
from tickwork.records import DEFAULT_BULK
from tickwork.store import Store
from tickwork.web.app import create_app

ORIGIN = {"Origin": "http://127.0.0.1:8765"}


@pytest.fixture
def open_web(client: Client) -> Iterator[TestClient]:
    app = create_app(client, open_access=True)
    with TestClient(app, base_url="http://127.0.0.1:8765") as test_client:
        yield test_client


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def dead_run(client: Client, *, task: str = "http", name: str | None = None, **fields: Any) -> int:
    submitted = client.submit(
        "http", args={"url": "https://example.com/"}, max_attempts=1, name=name, **fields
    )
    assert submitted.run is not None
    (claimed,) = client.store.claim("test-worker", limit=1)
    client.store.fail(
        claimed.id, claimed.fencing_token, "Traceback (most recent call last):\n  boom"
    )
    return claimed.id


def queued_run(client: Client, **fields: Any) -> int:
    submitted = client.submit("http", args={"url": "https://example.com/"}, **fields)
    assert submitted.run is not None
    return submitted.run.id


def test_runs_page_filters_and_names_jobs(client: Client, open_web: TestClient) -> None:
    dead = dead_run(client, name="nightly-export", queue="exports")
    queued = queued_run(client, queue="mail")
    page = open_web.get("/runs?state=dead")
    assert page.status_code == 200
    assert f'data-run-id="{dead}"' in page.text
    assert f'data-run-id="{queued}"' not in page.text
    assert "nightly-export" in text_of(page.text)
    by_queue = open_web.get("/runs?queue=mail")
    assert f'data-run-id="{queued}"' in by_queue.text
    assert f'data-run-id="{dead}"' not in by_queue.text
    assert "nightly-export" in text_of(open_web.get("/").text)


@pytest.mark.parametrize(
    "query",
    [
        "state=bogus",
        "since=yesterday",
        "range=3w",
        "after=x",
        "since=2026-01-02T00:00Z&until=2026-01-01T00:00Z",
    ],
)
def test_runs_page_bad_filters_are_a_400_page(open_web: TestClient, query: str) -> None:
    assert open_web.get(f"/runs?{query}").status_code == 400


def test_run_page_shows_error_traceback_and_fencing_token(
    client: Client, open_web: TestClient
) -> None:
    run_id = dead_run(client, name="export")
    page = open_web.get(f"/runs/{run_id}")
    assert page.status_code == 200
    text = text_of(page.text)
    assert "Traceback (most recent call last)" in text
    assert "https://example.com/" in text
    assert re.search(r'id="fencing-token">1<', page.text)
    assert "test-worker" in text
    assert open_web.get("/runs/999999").status_code == 404
    assert open_web.get("/runs/abc").status_code == 404


def test_bulk_retry_asks_first_then_retries_every_match(
    client: Client, open_web: TestClient
) -> None:
    mail = [dead_run(client, queue="mail") for _ in range(3)]
    other = dead_run(client, queue="reports")
    confirm = open_web.get("/bulk/retry?queue=mail")
    assert confirm.status_code == 200
    assert "3 dead runs match now" in text_of(confirm.text)
    assert {client.get_run(i).state for i in mail} == {RunState.DEAD}  # a GET changes nothing
    done = open_web.post(
        "/bulk/retry", data={"queue": "mail"}, headers=ORIGIN, follow_redirects=False
    )
    assert done.status_code == 303
    assert {client.get_run(i).state for i in mail} == {RunState.QUEUED}
    assert client.get_run(other).state is RunState.DEAD
    assert "Retry: 3 runs." in text_of(open_web.get(done.headers["location"]).text)


def test_bulk_cancel_over_the_limit_changes_nothing(
    client: Client, store: Store, open_web: TestClient
) -> None:
    ids = [queued_run(client, queue="flood") for _ in range(DEFAULT_BULK + 1)]
    confirm = open_web.get("/bulk/cancel?queue=flood")
    assert "more than the 1000 one action may change" in text_of(confirm.text)
    refused = open_web.post("/bulk/cancel", data={"queue": "flood"}, headers=ORIGIN)
    assert refused.status_code == 400
    assert "nothing was changed" in text_of(refused.text)
    assert store.run_stats().by_state["queued"] == len(ids)


def test_bulk_post_from_another_site_is_refused(client: Client, open_web: TestClient) -> None:
    run_id = dead_run(client)
    refused = open_web.post("/bulk/retry", data={}, headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403
    assert client.get_run(run_id).state is RunState.DEAD


def test_queues_page_says_when_nobody_consumes_a_due_queue(
    client: Client, store: Store, open_web: TestClient
) -> None:
    queued_run(client, queue="orphan")
    queued_run(client, queue="mail")
    store.register_node("w-mail", "worker", "host", 1, {"queues": ["mail"], "beat": 3})
    page = open_web.get("/queues")
    text = text_of(page.text)
    assert re.search(r"orphan 1 0 .*No worker consumes this queue", text)
    mail_row = re.search(r'<tr data-queue="mail".*?</tr>', page.text, re.S)
    assert mail_row is not None
    assert "w-mail" in mail_row.group(0)
    assert "No worker" not in mail_row.group(0)


def test_overview_backlog_card_names_a_due_queue_nobody_consumes(
    client: Client, store: Store, open_web: TestClient
) -> None:
    queued_run(client, queue="mail")
    store.register_node("w-mail", "worker", "host", 1, {"queues": ["mail"], "beat": 3})
    card = re.compile(r'<div class="card" id="due-backlog">.*?</div>\s*</div>', re.S)
    found = card.search(open_web.get("/").text)
    assert found is not None
    assert "No worker" not in found.group(0)  # its one queue is consumed

    queued_run(client, queue="orphan")
    found = card.search(open_web.get("/fragments/overview").text)
    assert found is not None
    assert re.search(r"No worker consumes queue\s+<a[^>]*>orphan</a>", found.group(0))
    assert "mail" not in found.group(0)


def test_activity_page_draws_the_rollup(client: Client, store: Store, open_web: TestClient) -> None:
    for _ in range(2):
        queued_run(client)
    for run in store.claim("w", limit=2):
        store.complete(run.id, run.fencing_token)
    store.fold_minutes(now=store.now() + timedelta(minutes=2))
    page = open_web.get("/activity?window=1h")
    assert page.status_code == 200
    bars = re.findall(r'data-succeeded="(\d+)"', page.text)
    assert sum(int(b) for b in bars) == 2
    assert '<svg id="chart-lag"' in page.text
    assert '<svg id="chart-depth"' in page.text
    for window in ("6h", "24h"):
        assert open_web.get(f"/activity?window={window}").status_code == 200
    assert open_web.get("/activity?window=2d").status_code == 400


def test_jobs_search_finds_names_and_tasks(client: Client, open_web: TestClient) -> None:
    client.submit(
        "http", args={"url": "https://example.com/"}, name="Billing sync", delay=timedelta(hours=1)
    )
    client.submit("shell", args={"argv": ["true"]}, delay=timedelta(hours=1))
    found = text_of(open_web.get("/jobs?q=billing").text)
    assert "Billing sync" in found
    assert "shell" not in found.split("Schedule", 1)[1]
