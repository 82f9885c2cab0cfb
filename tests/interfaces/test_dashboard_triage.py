"""The dashboard's triage views in process (TestClient on a real store): the dead letter
shows each run's exception line with its traceback a click away, filters by task, queue,
tenant and error text, and retries all that match through a confirmation with the count.
The same in Chromium is in ``test_dashboard_browser_triage.py``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from tickwork.client import Client
from tickwork.job import JobSpec, RunState
from tickwork.records import NODE_GONE_AFTER
from tickwork.schedule import Once
from tickwork.web.app import create_app

ORIGIN = {"Origin": "http://127.0.0.1:8765"}
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/site-packages/tickwork/worker/executor.py", line 460, in _call\n'
    "    result = handler(ctx, **args)\n"
    '  File "/srv/app/tasks.py", line 12, in flaky\n'
    '    raise RuntimeError(f"flaky {n} failed")\n'
    "RuntimeError: flaky 15 failed"
)


@pytest.fixture
def open_web(client: Client) -> Iterator[TestClient]:
    app = create_app(client, open_access=True)
    with TestClient(app, base_url="http://127.0.0.1:8765") as test_client:
        yield test_client


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def dead_run(
    client: Client,
    error: str = "RuntimeError: flaky 15 failed",
    traceback: str | None = TRACEBACK,
    **fields: object,
) -> int:
    """A dead run made as a worker makes one from a handler that raised."""
    submitted = client.submit("http", args={"url": "https://e.x/"}, max_attempts=1, **fields)
    assert submitted.run is not None
    (claimed,) = client.store.claim("test-worker", limit=1)
    client.store.fail(claimed.id, claimed.fencing_token, error, traceback=traceback)
    assert client.get_run(claimed.id).state is RunState.DEAD
    return claimed.id


def row_of(html: str, run_id: int) -> str:
    found = re.search(rf'<tr id="run-{run_id}".*?</tr>', html, re.S)
    assert found is not None, html
    return found.group(0)


def test_a_dead_letter_row_shows_the_exception_line_and_the_traceback_behind_a_click(
    open_web: TestClient, client: Client
) -> None:
    run_id = dead_run(client)

    row = row_of(open_web.get("/dead").text, run_id)

    exception = re.search(r'<code class="exception">(.*?)</code>', row, re.S)
    assert exception is not None
    assert exception.group(1).strip() == "RuntimeError: flaky 15 failed"
    details = re.search(r"<details><summary>Traceback</summary>(.*?)</details>", row, re.S)
    assert details is not None
    assert "executor.py" in details.group(1)
    assert "executor.py" not in row[: row.index("<details>")]


def test_an_error_that_is_a_bare_traceback_shows_its_last_line(
    open_web: TestClient, client: Client
) -> None:
    run_id = dead_run(client, error=TRACEBACK, traceback=None)

    row = row_of(open_web.get("/dead").text, run_id)

    assert '<code class="exception">RuntimeError: flaky 15 failed</code>' in row


def test_the_dead_letter_filters_by_task_queue_and_error_text(
    open_web: TestClient, client: Client
) -> None:
    flaky = dead_run(client, queue="etl")
    other = dead_run(client, error="HTTP 503 from example.com", traceback=None)

    def listed(query: str) -> list[int]:
        page = open_web.get("/dead?" + query)
        assert page.status_code == 200, page.text
        return [int(i) for i in re.findall(r'<tr id="run-(\d+)"', page.text)]

    assert listed("") == [other, flaky]
    assert listed("error=FLAKY+15") == [flaky]
    assert listed("queue=etl") == [flaky]
    assert listed("queue=default&error=503") == [other]
    assert listed("task=shell") == []
    assert 'hx-get="/fragments/dead?error=503"' in open_web.get("/dead?error=503").text


@pytest.mark.parametrize("query", ["error=%00", "task=" + "x" * 201, "after=abc", "queue=%1b"])
def test_a_bad_dead_letter_filter_is_a_400_page_not_a_500(
    open_web: TestClient, client: Client, query: str
) -> None:
    dead_run(client)

    answer = open_web.get("/dead?" + query)

    assert answer.status_code == 400
    assert "text/html" in answer.headers["content-type"]


def test_retry_all_matching_confirms_with_the_count_and_retries_only_those(
    open_web: TestClient, client: Client
) -> None:
    flaky = [dead_run(client), dead_run(client)]
    other = dead_run(client, error="HTTP 503 from example.com", traceback=None)

    page = open_web.get("/dead?error=flaky")
    link = re.search(r'href="(/bulk/retry\?[^"]*)" id="retry-matching"', page.text)
    assert link is not None
    assert link.group(1) == "/bulk/retry?error=flaky"
    confirm = open_web.get(link.group(1).replace("&amp;", "&"))
    assert "2 dead runs match now." in text_of(confirm.text)
    assert ">Retry 2 runs</button>" in confirm.text
    assert '<input type="hidden" name="error" value="flaky">' in confirm.text

    done = open_web.post(
        "/bulk/retry", data={"error": "flaky"}, headers=ORIGIN, follow_redirects=False
    )

    assert done.status_code == 303
    assert [client.get_run(i).state for i in flaky] == [RunState.QUEUED] * 2
    assert client.get_run(other).state is RunState.DEAD


def test_retry_all_with_nothing_matching_is_a_disabled_button(
    open_web: TestClient, client: Client
) -> None:
    dead_run(client)

    confirm = open_web.get("/bulk/retry?error=nothing+like+this")

    assert re.search(r"<button[^>]*disabled[^>]*>Retry 0 runs</button>", confirm.text)


# -- a job's page --------------------------------------------------------------------------


def finished_run(client: Client, task: str, result: dict[str, object]) -> int:
    """A run of a new one-off job of ``task``, completed with ``result`` (the store takes
    any task name: no worker runs it here)."""
    spec = JobSpec(task=task, schedule=Once(at=client.now()))
    submitted = client.store.submit(spec)
    assert submitted.run is not None
    (claimed,) = client.store.claim("test-worker", limit=1)
    client.store.complete(claimed.id, claimed.fencing_token, result=result)
    return submitted.job.id


def test_a_job_page_shows_its_definition_fire_times_and_explain_before_its_runs(
    open_web: TestClient, client: Client
) -> None:
    job_id = finished_run(client, "http", {"status": 200, "body": "ok"})

    html = open_web.get(f"/jobs/{job_id}").text

    order = [
        html.index(mark)
        for mark in (
            "<h2>Definition</h2>",
            "<h2>Next fire times</h2>",
            '<h2 id="explain">',
            '<h2 id="runs-heading">',
        )
    ]
    assert order == sorted(order)
    assert 'id="job-state"' in html[: order[0]]
    head = open_web.get(f"/fragments/jobs/{job_id}/head")
    assert head.status_code == 200
    assert 'id="job-state"' in head.text
    assert "<h2" not in head.text
    assert open_web.get("/fragments/jobs/abc/head").status_code == 404


def test_a_job_page_shows_output_tails_only_for_tasks_with_output(
    open_web: TestClient, client: Client
) -> None:
    report = finished_run(
        client, "reports.build", {"slot": "2026-12-01T09:00", "summary": "x" * 50}
    )
    shell = finished_run(client, "shell", {"exit_code": 0, "stdout": "backed up\n", "stderr": ""})

    quiet = open_web.get(f"/jobs/{report}").text
    loud = open_web.get(f"/jobs/{shell}").text

    assert "(tail)" not in quiet
    assert "data-run-detail" not in quiet
    assert "stdout (tail)" in loud
    assert "backed up" in loud


# -- runs --------------------------------------------------------------------------------


def test_the_runs_page_has_state_tabs_with_counts_and_started_and_duration_columns(
    open_web: TestClient, client: Client
) -> None:
    dead_run(client)
    dead_run(client)
    finished_run(client, "http", {"status": 200})

    html = open_web.get("/runs").text

    tabs = dict(re.findall(r'data-state="(\w+)">\w+ <span class="count">(\d+)</span>', html))
    assert tabs["all"] == "3"
    assert tabs["dead"] == "2"
    assert tabs["succeeded"] == "1"
    assert tabs["queued"] == "0"
    assert "<th>Started</th>" in html
    assert '<th class="num">Duration</th>' in html
    dead_tab = open_web.get("/runs?state=dead").text
    assert 'aria-current="page" data-state="dead"' in dead_tab
    narrowed = open_web.get("/runs?task=http").text
    assert 'class="count"' not in narrowed  # a narrower filter: the totals would mislead
    assert 'href="/runs?task=http&amp;state=dead"' in narrowed


# -- cluster -------------------------------------------------------------------------------


def node_row(html: str, node_id: str) -> str:
    found = re.search(rf'<tr data-node-id="{node_id}".*?</tr>', html, re.S)
    assert found is not None, html
    return found.group(0)


def test_the_cluster_page_marks_silent_and_gone_nodes_and_their_counts_as_not_live(
    open_web: TestClient, client: Client
) -> None:
    store = client.store
    now = store.now()
    store.register_node("worker-up", "worker", "host-a", 1)
    store.node_heartbeat("worker-up", running=4)
    store.register_node("worker-quiet", "worker", "host-b", 2, now=now - timedelta(seconds=20))
    store.node_heartbeat("worker-quiet", running=3, now=now - timedelta(seconds=20))
    store.register_node("worker-gone", "worker", "host-c", 3, now=now - 2 * NODE_GONE_AFTER)

    html = open_web.get("/cluster").text

    up, quiet, gone = (node_row(html, n) for n in ("worker-up", "worker-quiet", "worker-gone"))
    assert 'data-status="up"' in up
    assert '<td class="num">4</td>' in up
    assert "Forget" not in up
    assert 'data-status="silent"' in quiet
    assert "(3 last seen)" in quiet
    assert "Forget" not in quiet
    assert 'data-status="gone"' in gone
    assert "Forget" in gone


def test_a_gone_node_is_forgotten_from_the_page_and_a_live_one_refused(
    open_web: TestClient, client: Client
) -> None:
    store = client.store
    store.register_node("worker-up", "worker", "host-a", 1)
    store.register_node("worker-gone", "worker", "host-c", 3, now=store.now() - 2 * NODE_GONE_AFTER)

    refused = open_web.post("/cluster/forget", data={"node": "worker-up"}, headers=ORIGIN)
    cross = open_web.post("/cluster/forget", data={"node": "worker-gone"})
    done = open_web.post(
        "/cluster/forget", data={"node": "worker-gone"}, headers=ORIGIN, follow_redirects=False
    )

    assert refused.status_code == 409
    assert "Cannot forget node" in refused.text
    assert cross.status_code == 403
    assert done.status_code == 303
    assert [n.id for n in client.cluster().nodes] == ["worker-up"]


# -- jobs ----------------------------------------------------------------------------------


def test_the_recurring_tab_finds_the_cron_job_under_many_one_offs(
    open_web: TestClient, client: Client
) -> None:
    cron = client.schedule("http", name="nightly", cron="0 3 * * *", args={"url": "https://e.x/"})
    for _ in range(60):
        client.submit("http", args={"url": "https://e.x/"}, delay=3600)

    every = open_web.get("/jobs").text
    recurring = open_web.get("/jobs?kind=recurring").text
    one_off = open_web.get("/jobs?kind=one-off").text

    assert f'data-job-id="{cron.job.id}"' not in every  # buried past the first page
    assert re.findall(r'data-job-id="(\d+)"', recurring) == [str(cron.job.id)]
    assert f'data-job-id="{cron.job.id}"' not in one_off
    assert 'aria-current="page" data-kind="recurring"' in recurring
    assert open_web.get("/jobs?kind=sometimes").status_code == 400


# -- overview and tenants ------------------------------------------------------------------


def test_the_overview_has_the_last_hours_charts_linking_to_activity_and_says_what_lag_leaves_out(
    open_web: TestClient, client: Client
) -> None:
    html = open_web.get("/").text

    outcomes = re.search(
        r'<a class="card chart-card" href="/activity" id="overview-outcomes">\s*<svg', html
    )
    lag = re.search(r'<a class="card chart-card" href="/activity" id="overview-lag">\s*<svg', html)
    assert outcomes is not None
    assert lag is not None
    assert "runs of tenants and tasks with limits" in text_of(html)
    fragment = open_web.get("/fragments/overview").text
    assert 'id="overview-lag"' in fragment


def test_a_tenant_page_links_to_its_runs_jobs_and_dead_letter_and_the_jobs_filter_by_tenant(
    open_web: TestClient, client: Client
) -> None:
    mine = client.submit("http", args={"url": "https://e.x/"}, tenant="acme", delay=3600).job
    other = client.submit("http", args={"url": "https://e.x/"}, delay=3600).job
    client.set_tenant_limits("acme", max_running=2)

    html = open_web.get("/tenants/acme").text

    assert 'href="/runs?tenant=acme"' in html
    assert 'href="/jobs?tenant=acme"' in html
    assert 'href="/dead?tenant=acme"' in html
    jobs = open_web.get("/jobs?tenant=acme").text
    assert re.findall(r'data-job-id="(\d+)"', jobs) == [str(mine.id)]
    assert str(other.id) not in re.findall(r'data-job-id="(\d+)"', jobs)
    assert open_web.get("/jobs?tenant=%00").status_code == 400
