"""Bulk retry and cancel, run filters, queues and the per-minute rollup through the HTTP
API (in process, with keys) and the CLI (in process): all or nothing, bounded, tenants
kept apart; bad input is a 4xx with a JSON error / exit 2 with one line, and changes
nothing."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tickwork.cli import main
from tickwork.client import Client
from tickwork.job import RunState
from tickwork.store import Store
from tickwork.web.app import create_app


@pytest.fixture
def api(client: Client, admin_key: str) -> Iterator[TestClient]:
    with TestClient(create_app(client, open_access=False)) as test_client:
        test_client.headers["Authorization"] = f"Bearer {admin_key}"
        yield test_client


def dead(client: Client, **fields: Any) -> int:
    submitted = client.submit(
        "http", args={"url": "https://example.com/"}, max_attempts=1, **fields
    )
    assert submitted.run is not None
    (claimed,) = client.store.claim("w", limit=1)
    client.store.fail(claimed.id, claimed.fencing_token, "boom")
    return claimed.id


def waiting(client: Client, **fields: Any) -> int:
    submitted = client.submit("http", args={"url": "https://example.com/"}, **fields)
    assert submitted.run is not None
    return submitted.run.id


def states(client: Client, ids: list[int]) -> set[RunState]:
    return {client.get_run(i).state for i in ids}


# -- HTTP API ------------------------------------------------------------------------------


def test_api_bulk_retry_takes_every_match(client: Client, api: TestClient) -> None:
    mail = [dead(client, queue="mail") for _ in range(2)]
    other = dead(client, queue="reports")
    answer = api.post("/api/v1/runs/bulk/retry", json={"queue": "mail", "max_count": 2})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"count": 2, "run_ids": sorted(mail)}
    assert states(client, mail) == {RunState.QUEUED}
    assert states(client, [other]) == {RunState.DEAD}


def test_api_bulk_over_max_is_400_and_changes_nothing(client: Client, api: TestClient) -> None:
    ids = [waiting(client) for _ in range(3)]
    answer = api.post("/api/v1/runs/bulk/cancel", json={"max_count": 2})
    assert answer.status_code == 400
    assert "more than 2 runs match" in answer.json()["error"]["message"]
    assert states(client, ids) == {RunState.QUEUED}


@pytest.mark.parametrize(
    "body",
    [
        {"max_count": 0},
        {"max_count": 10_001},
        {"max_count": "5"},
        {"since": "yesterday"},
        {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
        {"job": -1},
        {"task": "bad\u0000task"},
        {"queue": " padded "},
        {"colour": "red"},
    ],
)
def test_api_bulk_bad_input_is_4xx_and_changes_nothing(
    client: Client, api: TestClient, body: dict[str, Any]
) -> None:
    ids = [waiting(client)]
    answer = api.post("/api/v1/runs/bulk/cancel", json=body)
    assert 400 <= answer.status_code < 500
    assert "error" in answer.json()
    assert states(client, ids) == {RunState.QUEUED}


def test_api_tenant_key_bulk_stays_in_its_tenant(
    client: Client, api: TestClient, acme_key: str
) -> None:
    mine = waiting(client, tenant="acme")
    theirs = waiting(client, tenant="globex")
    as_acme = {"Authorization": f"Bearer {acme_key}"}
    refused = api.post("/api/v1/runs/bulk/cancel", json={"tenant": "globex"}, headers=as_acme)
    assert refused.status_code == 403
    answer = api.post("/api/v1/runs/bulk/cancel", json={}, headers=as_acme)
    assert answer.json()["run_ids"] == [mine]
    assert states(client, [theirs]) == {RunState.QUEUED}


def test_api_lists_runs_by_filters(client: Client, api: TestClient) -> None:
    mail = waiting(client, queue="mail")
    waiting(client, queue="reports")
    got = api.get("/api/v1/runs", params={"queue": "mail"}).json()["items"]
    assert [r["id"] for r in got] == [mail]
    assert api.get("/api/v1/runs", params={"since": "nope"}).status_code == 400


def test_api_queues_and_minutes(client: Client, store: Store, api: TestClient) -> None:
    run = dead(client, queue="reports")
    waiting(client, queue="mail")
    store.fold_minutes(now=store.now() + timedelta(minutes=2))
    queues = {q["queue"]: q for q in api.get("/api/v1/queues").json()}
    assert queues["mail"]["due"] == 1
    assert queues["mail"]["consumers"] == 0
    minutes = api.get("/api/v1/minutes", params={"window": 3600}).json()["items"]
    assert sum(m["dead"] for m in minutes) == 1
    assert client.get_run(run).state is RunState.DEAD
    assert api.get("/api/v1/minutes", params={"window": 10}).status_code == 422


def test_api_jobs_search(client: Client, api: TestClient) -> None:
    named = client.submit(
        "http", args={"url": "https://example.com/"}, name="Billing", delay=timedelta(hours=1)
    ).job
    got = api.get("/api/v1/jobs", params={"search": "bill"}).json()["items"]
    assert [j["id"] for j in got] == [named.id]


# -- CLI -----------------------------------------------------------------------------------


class Terminal(io.StringIO):
    """Typed answers on a stdin that says it is a terminal: a bulk command asks only there."""

    def isatty(self) -> bool:
        return True


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_retry_all_with_yes(
    capsys: pytest.CaptureFixture[str], client: Client, store: Store
) -> None:
    mail = [dead(client, queue="mail") for _ in range(2)]
    other = dead(client, queue="reports")
    code, out, err = cli(
        capsys, "retry-all", "--db", store.url, "--queue", "mail", "--yes", "--json"
    )
    assert code == 0, err
    assert json.loads(out) == {"count": 2, "run_ids": sorted(mail)}
    assert states(client, [other]) == {RunState.DEAD}


def test_cli_cancel_all_asks_and_a_no_changes_nothing(
    capsys: pytest.CaptureFixture[str],
    client: Client,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids = [waiting(client) for _ in range(2)]
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, err = cli(capsys, "cancel-all", "--db", store.url)
    assert code != 0
    assert "Cancel 2 waiting runs?" in out
    assert states(client, ids) == {RunState.QUEUED}
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, out, err = cli(capsys, "runs", "cancel-all", "--db", store.url, "--queue", "default")
    assert code == 0, err
    assert "Cancel 2 waiting runs matching queue=default?" in out
    assert out.strip().endswith("cancelled 2 runs")
    assert states(client, ids) == {RunState.CANCELLED}


def test_cli_bulk_over_max_exits_2_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], client: Client, store: Store
) -> None:
    ids = [waiting(client) for _ in range(3)]
    code, _, err = cli(capsys, "cancel-all", "--db", store.url, "--max", "2", "--yes")
    assert code == 2
    assert "more than 2 runs match" in err
    assert len(err.strip().splitlines()) == 1
    assert states(client, ids) == {RunState.QUEUED}


@pytest.mark.parametrize(
    "argv",
    [
        ["--max", "0"],
        ["--max", "20000"],
        ["--since", "last tuesday"],
        ["--since", "2026-01-02T00:00Z", "--until", "2026-01-01T00:00Z"],
    ],
)
def test_cli_bulk_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], client: Client, store: Store, argv: list[str]
) -> None:
    ids = [dead(client)]
    code, _, err = cli(capsys, "retry-all", "--db", store.url, "--yes", *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert states(client, ids) == {RunState.DEAD}


def test_cli_runs_filters_and_queues(
    capsys: pytest.CaptureFixture[str], client: Client, store: Store
) -> None:
    mail = waiting(client, queue="mail")
    waiting(client, queue="reports")
    code, out, err = cli(capsys, "runs", "--db", store.url, "--queue", "mail", "--json")
    assert code == 0, err
    assert [r["id"] for r in json.loads(out)] == [mail]
    code, out, err = cli(capsys, "queues", "--db", store.url)
    assert code == 0, err
    assert "NONE: nothing claims it" in out


def test_cli_jobs_search(capsys: pytest.CaptureFixture[str], client: Client, store: Store) -> None:
    named = client.submit(
        "http", args={"url": "https://example.com/"}, name="Billing", delay=timedelta(hours=1)
    ).job
    client.submit("http", args={"url": "https://example.com/"}, delay=timedelta(hours=1))
    code, out, err = cli(capsys, "jobs", "--db", store.url, "--search", "BILL", "--json")
    assert code == 0, err
    assert [j["id"] for j in json.loads(out)] == [named.id]


def test_api_queues_name_workers_to_admins_only(
    client: Client, store: Store, api: TestClient, acme_key: str
) -> None:
    waiting(client, queue="mail", tenant="acme")
    store.register_node("w-mail", "worker", "host", 1, {"queues": ["mail"], "beat": 3})
    [admin_view] = api.get("/api/v1/queues").json()
    assert (admin_view["consumers"], admin_view["workers"]) == (1, ["w-mail"])
    as_acme = {"Authorization": f"Bearer {acme_key}"}
    [tenant_view] = api.get("/api/v1/queues", headers=as_acme).json()
    assert (tenant_view["consumers"], tenant_view["workers"]) == (1, [])
