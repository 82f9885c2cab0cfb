"""A run's attempts on every face: ``GET /api/v1/runs/{id}`` (``attempts``,
``attempts_dropped``, in the OpenAPI document), the dashboard's run page and ``tickwork show
--run RUN_ID``; on a real store, with attempts ended by a rescue, a failure with a
traceback and a success."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from api_support import bearer
from cli_support import assert_error, ok, tickwork
from fastapi.testclient import TestClient

from tickwork.client import Client
from tickwork.job import JobSpec, Run
from tickwork.records import ATTEMPTS_KEPT, AttemptEnd
from tickwork.retry import RetryPolicy
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.web.app import create_app

S = timedelta(seconds=1)
LEASE = timedelta(seconds=10)
TRACE = 'Traceback (most recent call last):\n  File "billing.py", line 9, in charge\n<boom>'


def three_attempts(store: Store, tenant: str = "default") -> tuple[Run, list[int]]:
    """A run whose first attempt (w1) lost its lease, whose second (w2) raised, and whose
    third (w1) succeeded; with the tokens of the three claims."""
    t0 = store.now().replace(microsecond=0)
    submitted = store.submit(
        JobSpec(task="charge", tenant=tenant, schedule=Once(at=t0)), now=t0
    ).run
    assert submitted is not None
    first = store.claim("w1", limit=1, lease=LEASE, now=t0)[0]
    store.rescue(now=t0 + LEASE + S)
    second = store.claim("w2", limit=1, lease=LEASE, now=t0 + LEASE + 2 * S)[0]
    failed = store.fail(
        second.id,
        second.fencing_token,
        "ValueError: card <4242> declined",
        traceback=TRACE,
        retry_after=S,
        now=t0 + LEASE + 3 * S,
    )
    third = store.claim("w1", limit=1, lease=LEASE, now=failed.run_at)[0]
    done = store.complete(third.id, third.fencing_token, now=failed.run_at + S)
    return done, [first.fencing_token, second.fencing_token, third.fencing_token]


@pytest.fixture
def open_web(client: Client) -> Iterator[TestClient]:
    with TestClient(create_app(client, open_access=True), base_url="http://127.0.0.1") as web:
        yield web


# -- the API ------------------------------------------------------------------------------


def test_a_run_read_by_id_carries_its_attempts(store: Store, open_web: TestClient) -> None:
    run, tokens = three_attempts(store)

    body = open_web.get(f"/api/v1/runs/{run.id}").json()

    assert (body["id"], body["state"], body["attempt"]) == (run.id, "succeeded", 3)
    assert body["attempts_dropped"] == 0
    attempts = body["attempts"]
    assert [(a["attempt"], a["worker"], a["fencing_token"], a["ended"]) for a in attempts] == [
        (1, "w1", tokens[0], "lease_lost"),
        (2, "w2", tokens[1], "failed"),
        (3, "w1", tokens[2], "succeeded"),
    ]
    assert attempts[0]["error"] == "lease expired: worker w1 stopped heartbeating"
    assert attempts[1]["error"] == "ValueError: card <4242> declined"
    assert attempts[1]["traceback"] == TRACE
    assert attempts[2]["error"] is None
    assert attempts[2]["ended_at"] == body["finished_at"]
    for a in attempts:
        assert datetime.fromisoformat(a["ended_at"]) > datetime.fromisoformat(a["started_at"])


def test_a_running_attempt_has_no_end_yet(client: Client, open_web: TestClient) -> None:
    submitted = client.submit("http", args={"url": "https://example.com/"})
    assert submitted.run is not None
    (held,) = client.store.claim("w9", limit=1)
    [attempt] = open_web.get(f"/api/v1/runs/{held.id}").json()["attempts"]
    assert (attempt["worker"], attempt["ended"], attempt["ended_at"]) == ("w9", None, None)


def test_another_tenants_key_cannot_read_a_runs_attempts(
    store: Store, web: TestClient, acme_key: str
) -> None:
    run, _ = three_attempts(store, tenant="globex")
    answer = web.get(f"/api/v1/runs/{run.id}", headers=bearer(acme_key))
    assert answer.status_code == 404
    assert "attempts" not in answer.text


def test_the_openapi_document_describes_a_runs_attempts(open_web: TestClient) -> None:
    document = open_web.get("/api/v1/openapi.json").json()
    answer = document["paths"]["/api/v1/runs/{run_id}"]["get"]["responses"]["200"]
    ref = answer["content"]["application/json"]["schema"]["$ref"]
    detail = document["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert {"attempts", "attempts_dropped", "state", "fencing_token"} <= set(detail["properties"])
    item = detail["properties"]["attempts"]["items"]["$ref"].rsplit("/", 1)[-1]
    attempt = document["components"]["schemas"][item]
    assert set(attempt["properties"]) == {
        "attempt",
        "fencing_token",
        "worker",
        "started_at",
        "ended_at",
        "ended",
        "error",
        "traceback",
    }
    ended = document["components"]["schemas"]["AttemptEnd"]["enum"]
    assert ended == [e.value for e in AttemptEnd]


# -- the dashboard ------------------------------------------------------------------------


def test_the_run_page_lists_each_attempt_and_its_traceback(
    store: Store, open_web: TestClient
) -> None:
    run, tokens = three_attempts(store)

    page = open_web.get(f"/runs/{run.id}")

    assert page.status_code == 200
    rows = re.findall(r'<tr data-attempt="(\d+)" data-ended="(\w+)">(.*?)</tr>', page.text, re.S)
    assert [(n, ended) for n, ended, _ in rows] == [
        ("1", "lease_lost"),
        ("2", "failed"),
        ("3", "succeeded"),
    ]
    lost, failed, won = (cells for _, _, cells in rows)
    assert "lease lost" in lost
    assert f">{tokens[0]}<" in lost
    assert "ValueError: card &lt;4242&gt; declined" in failed  # escaped
    assert "<details><summary>Traceback</summary>" in failed
    assert "&lt;boom&gt;" in failed
    assert "<details>" not in won
    assert "attempts-dropped" not in page.text


def test_the_run_page_says_how_many_older_attempts_were_dropped(
    store: Store, open_web: TestClient
) -> None:
    t0 = store.now().replace(microsecond=0)
    total = ATTEMPTS_KEPT + 2
    spec = JobSpec(task="t", schedule=Once(at=t0), retry=RetryPolicy(max_attempts=total))
    run = store.submit(spec, now=t0).run
    assert run is not None
    for i in range(total):
        held = store.claim("w", limit=1, now=t0 + i * S)[0]
        store.fail(held.id, held.fencing_token, f"failure {i}", retry_after=S / 2, now=t0 + i * S)

    page = open_web.get(f"/runs/{run.id}")

    assert "2 older attempts no longer kept." in page.text
    assert page.text.count("<tr data-attempt=") == ATTEMPTS_KEPT
    assert open_web.get(f"/api/v1/runs/{run.id}").json()["attempts_dropped"] == 2


def test_a_queued_runs_page_says_no_attempt_yet(client: Client, open_web: TestClient) -> None:
    submitted = client.submit("http", args={"url": "https://example.com/"})
    assert submitted.run is not None
    assert 'id="attempts-none"' in open_web.get(f"/runs/{submitted.run.id}").text


# -- the CLI ------------------------------------------------------------------------------


def test_show_run_prints_the_run_and_its_attempts(store: Store) -> None:
    run, tokens = three_attempts(store)

    out = ok("show", "--run", str(run.id), "--db", store.url).out

    lines = out.splitlines()
    assert lines[0] == f"Run {run.id} of job {run.job_id} (charge): succeeded, attempt 3 of 3"
    table = lines[lines.index("Attempts (oldest first)") + 1 :]
    assert table[0].split()[:3] == ["TRY", "WORKER", "TOKEN"]
    assert table[1].split()[:3] == ["1", "w1", str(tokens[0])]
    assert "lease lost" in table[1]
    assert "lease expired: worker w1 stopped heartbeating" in table[1]
    assert table[2].split()[:3] == ["2", "w2", str(tokens[1])]
    assert "failed" in table[2]
    assert "ValueError: card <4242> declined" in table[2]
    assert table[3].split()[:3] == ["3", "w1", str(tokens[2])]
    assert "succeeded" in table[3]
    assert "Traceback of attempt 2 (failed):" in out
    assert '    File "billing.py", line 9, in charge' in out


def test_show_run_json_is_the_apis_answer(store: Store, client: Client) -> None:
    run, _ = three_attempts(store)
    with TestClient(create_app(client, open_access=True), base_url="http://127.0.0.1") as web:
        api = web.get(f"/api/v1/runs/{run.id}").json()
    assert ok("show", "--run", str(run.id), "--db", store.url, "--json").json() == api


def test_show_run_of_an_unknown_or_bad_id_says_so(store: Store) -> None:
    assert_error(tickwork("show", "--run", "999", "--db", store.url), 1, "run 999 not found")
    too_big = str(2**64)
    assert_error(tickwork("show", "--run", too_big, "--db", store.url), 2, "out of range")
