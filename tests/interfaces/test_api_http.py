"""The HTTP API in process (FastAPI's TestClient over a real store, SQLite and PostgreSQL):
every endpoint's answer, cursor paging, tenancy and keys. Bad input is in
``test_api_bad_input.py``; a real server process in ``test_api_server.py``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from api_support import LOCAL, bearer, counts, dead_run, error_of
from fastapi.testclient import TestClient

from tickwork.client import Client
from tickwork.job import JobState, RunState
from tickwork.store import Store
from tickwork.web import auth
from tickwork.web.app import create_app

HTTP_ARGS = {"url": "https://example.com/hook"}


@pytest.fixture
def globex_key(client: Client) -> str:
    return client.create_api_key(tenant="globex")[1]


@pytest.fixture
def admin(web: TestClient, admin_key: str) -> TestClient:
    web.headers.update(bearer(admin_key))
    return web


def submit(web: TestClient, key: str | None = None, **body: Any) -> dict[str, Any]:
    payload = {"task": "http", "args": HTTP_ARGS, **body}
    answer = web.post("/api/v1/jobs", json=payload, headers=bearer(key) if key else None)
    assert answer.status_code == 201, answer.text
    job: dict[str, Any] = answer.json()
    return job


# -- submit ----------------------------------------------------------------------------------


def test_submit_answers_201_with_the_job_and_its_location(
    admin: TestClient, client: Client
) -> None:
    answer = admin.post(
        "/api/v1/jobs",
        json={
            "task": "http",
            "args": HTTP_ARGS,
            "name": "hook",
            "schedule": {"cron": "*/5 * * * *", "tz": "Europe/Berlin"},
            "queue": "ops",
            "priority": 10,
            "max_attempts": 5,
            "timeout": 60,
            "misfire": "skip",
            "misfire_grace": 30,
            "overlap": "forbid",
        },
    )

    assert answer.status_code == 201, answer.text
    job = answer.json()
    assert answer.headers["location"] == f"/api/v1/jobs/{job['id']}"
    assert job["schedule"] == {"kind": "cron", "expr": "*/5 * * * *", "tz": "Europe/Berlin"}
    assert (job["name"], job["queue"], job["priority"]) == ("hook", "ops", 10)
    assert (job["misfire"], job["overlap"], job["timeout"]) == ("skip", "forbid", 60.0)
    assert job["retry"]["max_attempts"] == 5
    assert job["state"] == "active"
    stored = client.get_job(job["id"])
    assert stored.misfire_grace == timedelta(seconds=30)
    assert stored.tenant == "ops"  # an admin's job goes to its key's tenant by default


@pytest.mark.parametrize(
    ("schedule", "kind"),
    [
        ({"at": "2099-01-01T09:00:00+01:00"}, "once"),
        ({"delay": 3600}, "once"),
        ({"cron": "0 9 * * MON-FRI", "tz": "America/New_York"}, "cron"),
        ({"cron": "*/10 * * * * *"}, "cron"),
        ({"every": 90}, "interval"),
        ({"every": 60, "anchor": "2026-01-01T00:00:30Z"}, "interval"),
    ],
)
def test_each_kind_of_schedule_is_accepted(
    admin: TestClient, schedule: dict[str, Any], kind: str
) -> None:
    job = submit(admin, schedule=schedule)

    assert job["schedule"]["kind"] == kind
    assert job["next_run_at"] is not None


def test_a_one_off_at_is_stored_in_utc(admin: TestClient) -> None:
    job = submit(admin, schedule={"at": "2099-01-01T09:00:00+01:00"})

    assert job["next_run_at"] == "2099-01-01T08:00:00+00:00"


def test_a_job_due_now_is_queued_with_its_run(admin: TestClient) -> None:
    job = submit(admin)

    assert job["state"] == "queued"
    runs = admin.get("/api/v1/runs", params={"job": job["id"]}).json()["items"]
    assert [run["state"] for run in runs] == ["queued"]


def test_a_repeated_idempotency_key_answers_200_with_the_same_job(
    admin: TestClient, client: Client
) -> None:
    first = submit(admin, idempotency_key="order-42", schedule={"delay": 60})
    before = counts(client)

    again = admin.post(
        "/api/v1/jobs",
        json={"task": "http", "args": HTTP_ARGS, "idempotency_key": "order-42"},
    )

    assert again.status_code == 200
    assert again.json()["id"] == first["id"]
    assert counts(client) == before


# -- reading jobs ----------------------------------------------------------------------------


def test_a_job_comes_with_its_schedule_explained_and_next_fire_times(admin: TestClient) -> None:
    job = submit(admin, schedule={"every": 3600, "anchor": "2026-01-01T00:00:00Z"})

    answer = admin.get(f"/api/v1/jobs/{job['id']}", params={"n": 3})

    assert answer.status_code == 200
    detail = answer.json()
    assert detail["id"] == job["id"]
    assert detail["schedule_description"].startswith("every 1 hour")
    times = [datetime.fromisoformat(t) for t in detail["next_fire_times"]]
    assert len(times) == 3
    assert all(t.minute == 0 and t.second == 0 for t in times)
    assert times == sorted(times)
    assert times[1] - times[0] == timedelta(hours=1)


def test_jobs_are_listed_newest_first_a_page_at_a_time(admin: TestClient) -> None:
    ids = [submit(admin, schedule={"delay": 600})["id"] for _ in range(5)]

    seen: list[int] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor is not None:
            params["after"] = cursor
        page = admin.get("/api/v1/jobs", params=params).json()
        seen += [job["id"] for job in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert seen == sorted(ids, reverse=True)
    assert pages == 3


def test_jobs_are_filtered_by_state_and_task(admin: TestClient) -> None:
    waiting = submit(admin, schedule={"delay": 600})
    done = submit(admin)

    scheduled = admin.get("/api/v1/jobs", params={"state": "scheduled"}).json()["items"]
    queued = admin.get("/api/v1/jobs", params={"state": "queued"}).json()["items"]
    shell = admin.get("/api/v1/jobs", params={"task": "shell"}).json()["items"]

    assert [job["id"] for job in scheduled] == [waiting["id"]]
    assert [job["id"] for job in queued] == [done["id"]]
    assert shell == []


def test_the_retired_state_completed_is_refused_naming_the_states(admin: TestClient) -> None:
    answer = admin.get("/api/v1/jobs", params={"state": "completed"})

    assert answer.status_code == 422
    assert "scheduled" in answer.text
    assert "succeeded" in answer.text


# -- commands on jobs --------------------------------------------------------------------------


def test_pause_resume_and_cancel_a_job(admin: TestClient) -> None:
    job = submit(admin, schedule={"cron": "*/5 * * * *"})
    path = f"/api/v1/jobs/{job['id']}"

    paused = admin.post(f"{path}/pause")
    resumed = admin.post(f"{path}/resume")
    cancelled = admin.post(f"{path}/cancel")

    assert (paused.status_code, paused.json()["state"]) == (200, "paused")
    assert (resumed.status_code, resumed.json()["state"]) == (200, "active")
    assert (cancelled.status_code, cancelled.json()["state"]) == (200, "cancelled")
    assert admin.get(path).json()["next_fire_times"] == []


def test_resuming_a_cancelled_job_is_a_conflict(admin: TestClient, client: Client) -> None:
    job = submit(admin, schedule={"cron": "*/5 * * * *"})
    admin.post(f"/api/v1/jobs/{job['id']}/cancel")

    answer = admin.post(f"/api/v1/jobs/{job['id']}/resume")

    assert answer.status_code == 409
    error = error_of(answer)
    assert error["code"] == "invalid_transition"
    assert "cancelled" in error["message"]
    assert client.get_job(job["id"]).state is JobState.CANCELLED


def test_trigger_queues_one_run_now_and_answers_201(admin: TestClient) -> None:
    job = submit(admin, schedule={"cron": "0 0 1 1 *"})

    answer = admin.post(f"/api/v1/jobs/{job['id']}/trigger")

    assert answer.status_code == 201
    run = answer.json()
    assert answer.headers["location"] == f"/api/v1/runs/{run['id']}"
    assert (run["job_id"], run["state"], run["attempt"]) == (job["id"], "queued", 1)
    assert admin.get(f"/api/v1/jobs/{job['id']}").json()["state"] == "active"


def test_explain_answers_in_one_paragraph(admin: TestClient) -> None:
    job = submit(admin, schedule={"cron": "0 9 * * *", "tz": "Europe/Berlin"})

    answer = admin.get(f"/api/v1/jobs/{job['id']}/explain", params={"at": "2099-12-01T09:00"})

    assert answer.status_code == 200
    body = answer.json()
    assert body["job_id"] == job["id"]
    assert body["at"] == "2099-12-01T09:00"
    assert body["slot"] == "2099-12-01T08:00:00+00:00"
    assert (body["run_id"], body["fate"]) == (None, None)
    assert "has not reached" in body["explanation"]
    assert "\n" not in body["explanation"]


def test_explain_without_at_speaks_of_the_latest_slot(admin: TestClient) -> None:
    job = submit(admin, schedule={"cron": "0 9 * * *"})

    answer = admin.get(f"/api/v1/jobs/{job['id']}/explain")

    assert answer.status_code == 200
    assert answer.json()["at"] is None
    assert f"Job {job['id']}" in answer.json()["explanation"]


def test_the_ledger_lists_slots_skipped_while_paused(
    admin: TestClient, client: Client, store: Store
) -> None:
    job = submit(admin, schedule={"every": 60})
    admin.post(f"/api/v1/jobs/{job['id']}/pause")
    # Resume ten minutes from now: the slots in between fell while the job was paused.
    store.resume_job(job["id"], now=store.now() + timedelta(minutes=10))

    answer = admin.get(f"/api/v1/jobs/{job['id']}/ledger")

    assert answer.status_code == 200
    (entry,) = answer.json()["items"]
    assert entry["fate"] == "paused"
    assert entry["job_id"] == job["id"]
    assert entry["count"] >= 9


# -- runs --------------------------------------------------------------------------------------


def test_runs_are_filtered_by_job_and_state_and_paged(admin: TestClient, client: Client) -> None:
    job = submit(admin, schedule={"cron": "0 0 1 1 *"})
    triggered = [admin.post(f"/api/v1/jobs/{job['id']}/trigger").json()["id"] for _ in range(3)]
    other = submit(admin)
    dead = dead_run(client, tenant="ops")

    first = admin.get("/api/v1/runs", params={"job": job["id"], "limit": 2}).json()
    second = admin.get(
        "/api/v1/runs", params={"job": job["id"], "limit": 2, "after": first["next_cursor"]}
    ).json()
    dead_only = admin.get("/api/v1/runs", params={"state": "dead"}).json()

    assert [r["id"] for r in first["items"] + second["items"]] == sorted(triggered, reverse=True)
    assert first["next_cursor"] == first["items"][-1]["id"]
    assert second["next_cursor"] is None
    assert [r["id"] for r in dead_only["items"]] == [dead]
    assert other["id"] not in {r["job_id"] for r in first["items"] + second["items"]}


def test_a_run_is_read_by_id(admin: TestClient) -> None:
    job = submit(admin)
    (run,) = admin.get("/api/v1/runs", params={"job": job["id"]}).json()["items"]

    answer = admin.get(f"/api/v1/runs/{run['id']}")

    assert answer.status_code == 200
    detail = answer.json()
    assert (detail.pop("attempts"), detail.pop("attempts_dropped")) == ([], 0)
    assert detail == run


def test_retrying_a_dead_run_queues_it_with_fresh_attempts(
    admin: TestClient, client: Client
) -> None:
    run_id = dead_run(client, tenant="ops")

    dead = admin.get("/api/v1/dead").json()
    answer = admin.post(f"/api/v1/runs/{run_id}/retry")

    assert [r["id"] for r in dead["items"]] == [run_id]
    assert answer.status_code == 200
    assert (answer.json()["state"], answer.json()["attempt"]) == ("queued", 1)
    assert admin.get("/api/v1/dead").json()["items"] == []


def test_retrying_a_queued_run_is_a_conflict(admin: TestClient, client: Client) -> None:
    job = submit(admin)
    (run,) = admin.get("/api/v1/runs", params={"job": job["id"]}).json()["items"]

    answer = admin.post(f"/api/v1/runs/{run['id']}/retry")

    assert answer.status_code == 409
    assert error_of(answer)["code"] == "invalid_transition"
    assert client.get_run(run["id"]).state is RunState.QUEUED


def test_cancelling_a_queued_run(admin: TestClient) -> None:
    job = submit(admin)
    (run,) = admin.get("/api/v1/runs", params={"job": job["id"]}).json()["items"]

    answer = admin.post(f"/api/v1/runs/{run['id']}/cancel")
    again = admin.post(f"/api/v1/runs/{run['id']}/cancel")

    assert (answer.status_code, answer.json()["state"]) == (200, "cancelled")
    assert again.status_code == 409


def test_the_dead_letter_list_pages_newest_first(admin: TestClient, client: Client) -> None:
    ids = [dead_run(client, tenant="ops") for _ in range(3)]

    first = admin.get("/api/v1/dead", params={"limit": 2}).json()
    rest = admin.get("/api/v1/dead", params={"after": first["next_cursor"]}).json()

    assert [r["id"] for r in first["items"] + rest["items"]] == sorted(ids, reverse=True)
    assert rest["next_cursor"] is None


# -- cluster and stats -------------------------------------------------------------------------


def test_the_cluster_view_shows_the_leader_and_nodes(admin: TestClient, store: Store) -> None:
    store.register_node("worker-1", "worker", "host-a", 123, {"concurrency": 4})
    lease = store.acquire_leadership("sched-1", timedelta(seconds=30))
    assert lease is not None

    answer = admin.get("/api/v1/cluster")

    assert answer.status_code == 200
    view = answer.json()
    assert view["leader"]["holder"] == "sched-1"
    assert view["leader"]["epoch"] == lease.epoch
    (node,) = view["nodes"]
    assert (node["id"], node["kind"], node["info"]) == ("worker-1", "worker", {"concurrency": 4})


def test_stats_count_the_callers_runs_by_state(
    admin: TestClient, client: Client, acme_key: str
) -> None:
    dead_run(client, tenant="acme")
    submit(admin)

    everyone = admin.get("/api/v1/stats").json()
    acme = admin.get("/api/v1/stats", headers=bearer(acme_key)).json()

    assert (everyone["by_state"]["dead"], everyone["by_state"]["queued"]) == (1, 1)
    assert (acme["by_state"]["dead"], acme["by_state"]["queued"]) == (1, 0)


# -- keys and tenants --------------------------------------------------------------------------


def test_no_key_is_401_with_a_bearer_challenge(web: TestClient) -> None:
    answer = web.get("/api/v1/jobs")

    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    error = error_of(answer)
    assert error["code"] == "unauthorized"
    assert "tickwork keys create" in error["message"]


@pytest.mark.parametrize(
    "header",
    [
        "Bearer tw_aaaaaaaa_" + "A" * 43,  # well-formed, unknown
        "Bearer not-a-key",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
    ],
)
def test_a_wrong_key_is_401(web: TestClient, header: str) -> None:
    answer = web.get("/api/v1/jobs", headers={"Authorization": header})

    assert answer.status_code == 401
    assert error_of(answer)["code"] == "unauthorized"


def test_a_revoked_key_is_401(web: TestClient, client: Client) -> None:
    record, key = client.create_api_key(tenant="acme")
    assert web.get("/api/v1/jobs", headers=bearer(key)).status_code == 200

    client.revoke_api_key(record.prefix)

    assert web.get("/api/v1/jobs", headers=bearer(key)).status_code == 401


def sign_in(web: TestClient, key: str) -> None:
    """The dashboard's sign-in form, as a browser posts it: the session cookie is set."""
    answer = web.post(
        "/login", data={"key": key}, headers={"Origin": "http://testserver"}, follow_redirects=False
    )
    assert answer.status_code == 303, answer.text


def test_the_dashboards_session_cookie_works_for_the_api_too(
    web: TestClient, acme_key: str
) -> None:
    sign_in(web, acme_key)

    assert web.get("/api/v1/jobs").status_code == 200


def test_a_key_in_the_cookie_is_refused(web: TestClient, acme_key: str) -> None:
    web.cookies.set(auth.COOKIE_NAME, acme_key)

    answer = web.get("/api/v1/jobs")

    assert answer.status_code == 401
    assert error_of(answer)["code"] == "unauthorized"


def test_a_tenant_key_sees_only_its_own_tenants_jobs(
    web: TestClient, acme_key: str, globex_key: str, admin_key: str
) -> None:
    mine = submit(web, acme_key, schedule={"delay": 600})
    theirs = submit(web, globex_key, schedule={"delay": 600})

    acme_view = web.get("/api/v1/jobs", headers=bearer(acme_key)).json()["items"]
    admin_view = web.get("/api/v1/jobs", headers=bearer(admin_key)).json()["items"]
    admin_filtered = web.get(
        "/api/v1/jobs", params={"tenant": "globex"}, headers=bearer(admin_key)
    ).json()["items"]

    assert mine["tenant"] == "acme"
    assert [job["id"] for job in acme_view] == [mine["id"]]
    assert {job["id"] for job in admin_view} == {mine["id"], theirs["id"]}
    assert [job["id"] for job in admin_filtered] == [theirs["id"]]


def test_a_tenant_key_cannot_list_another_tenant(web: TestClient, acme_key: str) -> None:
    answer = web.get("/api/v1/jobs", params={"tenant": "globex"}, headers=bearer(acme_key))

    assert answer.status_code == 403
    assert error_of(answer)["field"] == "tenant"


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("GET", ""),
        ("POST", "/cancel"),
        ("POST", "/pause"),
        ("POST", "/resume"),
        ("POST", "/trigger"),
        ("GET", "/explain"),
        ("GET", "/ledger"),
    ],
)
def test_another_tenants_job_is_404_like_a_missing_one(
    web: TestClient, client: Client, acme_key: str, globex_key: str, *, method: str, suffix: str
) -> None:
    theirs = submit(web, globex_key, schedule={"cron": "*/5 * * * *"})
    before = counts(client)

    foreign = web.request(method, f"/api/v1/jobs/{theirs['id']}{suffix}", headers=bearer(acme_key))
    missing = web.request(method, f"/api/v1/jobs/999999{suffix}", headers=bearer(acme_key))

    assert foreign.status_code == missing.status_code == 404
    assert error_of(foreign)["code"] == error_of(missing)["code"] == "job_not_found"
    assert counts(client) == before
    assert client.get_job(theirs["id"]).state is JobState.ACTIVE


@pytest.mark.parametrize(
    ("method", "suffix"), [("GET", ""), ("POST", "/retry"), ("POST", "/cancel")]
)
def test_another_tenants_run_is_404_like_a_missing_one(
    web: TestClient, client: Client, acme_key: str, method: str, suffix: str
) -> None:
    run_id = dead_run(client, tenant="globex")

    foreign = web.request(method, f"/api/v1/runs/{run_id}{suffix}", headers=bearer(acme_key))
    missing = web.request(method, f"/api/v1/runs/999999{suffix}", headers=bearer(acme_key))

    assert foreign.status_code == missing.status_code == 404
    assert error_of(foreign)["message"] == f"run {run_id} not found"
    assert client.get_run(run_id).state is RunState.DEAD


def test_a_tenant_key_lists_only_its_own_runs_and_dead_letters(
    web: TestClient, client: Client, acme_key: str
) -> None:
    mine = dead_run(client, tenant="acme")
    dead_run(client, tenant="globex")

    runs = web.get("/api/v1/runs", headers=bearer(acme_key)).json()["items"]
    dead = web.get("/api/v1/dead", headers=bearer(acme_key)).json()["items"]

    assert [r["id"] for r in runs] == [mine]
    assert [r["id"] for r in dead] == [mine]


def test_a_tenant_key_cannot_submit_to_another_tenant(
    web: TestClient, client: Client, acme_key: str
) -> None:
    before = counts(client)

    answer = web.post(
        "/api/v1/jobs",
        json={"task": "http", "args": HTTP_ARGS, "tenant": "globex"},
        headers=bearer(acme_key),
    )
    own = web.post(
        "/api/v1/jobs",
        json={"task": "http", "args": HTTP_ARGS, "tenant": "acme", "schedule": {"delay": 60}},
        headers=bearer(acme_key),
    )

    assert answer.status_code == 403
    assert error_of(answer)["field"] == "tenant"
    assert own.status_code == 201
    assert counts(client)[0] == before[0] + 1


def test_an_admin_key_submits_for_any_tenant(admin: TestClient, client: Client) -> None:
    job = submit(admin, tenant="globex", schedule={"delay": 60})

    assert job["tenant"] == "globex"
    assert client.get_job(job["id"], tenant="globex").id == job["id"]


def test_shell_tasks_need_an_admin_key(
    web: TestClient, client: Client, acme_key: str, admin_key: str
) -> None:
    body = {"task": "shell", "args": {"argv": ["true"]}, "schedule": {"delay": 60}}
    before = counts(client)

    refused = web.post("/api/v1/jobs", json=body, headers=bearer(acme_key))
    assert counts(client) == before
    accepted = web.post("/api/v1/jobs", json=body, headers=bearer(admin_key))

    assert refused.status_code == 403
    assert error_of(refused)["field"] == "task"
    assert accepted.status_code == 201


def test_the_cluster_view_is_for_admins_only(web: TestClient, acme_key: str) -> None:
    answer = web.get("/api/v1/cluster", headers=bearer(acme_key))

    assert answer.status_code == 403
    assert error_of(answer)["code"] == "forbidden"


# -- the open API --------------------------------------------------------------------------------


def test_the_open_api_lets_callers_without_a_key_act_as_admin(client: Client) -> None:
    with TestClient(create_app(client, open_access=True), base_url=LOCAL) as web:
        job = submit(web, schedule={"delay": 60})
        cluster = web.get("/api/v1/cluster")
        wrong = web.get("/api/v1/jobs", headers=bearer("tw_aaaaaaaa_" + "A" * 43))

    assert job["tenant"] == "default"
    assert cluster.status_code == 200
    assert wrong.status_code == 401


def test_the_open_api_closes_once_a_key_exists(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "OPEN_RECHECK_SECONDS", 0.0)
    with TestClient(create_app(client, open_access=True), base_url=LOCAL) as web:
        assert web.get("/api/v1/jobs").status_code == 200
        _, key = client.create_api_key(tenant="acme")

        assert web.get("/api/v1/jobs").status_code == 401
        assert web.get("/api/v1/jobs", headers=bearer(key)).status_code == 200


def test_the_open_api_stays_closed_once_a_key_was_created_even_when_it_is_revoked(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "OPEN_RECHECK_SECONDS", 0.0)
    with TestClient(create_app(client, open_access=True), base_url=LOCAL) as web:
        assert web.get("/api/v1/jobs").status_code == 200
        record, _ = client.create_api_key(tenant="acme")
        client.revoke_api_key(record.prefix)

        assert web.get("/api/v1/jobs").status_code == 401


def test_the_open_api_refuses_requests_addressed_to_another_host(client: Client) -> None:
    """DNS rebinding: a page of evil.example resolved to 127.0.0.1 says so in its Host."""
    with TestClient(create_app(client, open_access=True), base_url="http://evil.example") as web:
        read = web.get("/api/v1/jobs")
        submitted = web.post("/api/v1/jobs", json={"task": "http", "args": HTTP_ARGS})

    assert (read.status_code, submitted.status_code) == (401, 401)
    assert "loopback" in error_of(read)["message"]
    assert client.list_jobs().items == []


LOOKALIKE_HOSTS = [
    "evil.example:8765@127.0.0.1",  # userinfo before a loopback address
    "evil.example@127.0.0.1:8765",
    "127.0.0.1:8765.evil.example",  # a "port" that goes on as a name
    "127.0.0.1:8765@evil.example",
    "127.0.0.1:8765/evil.example",
    "127.0.0.1:8765#evil.example",
    "127.0.0.1:8765?evil.example",
    "127.0.0.1:evil",
    "127.0.0.1:99999",
    "127.0.0.1:",
    "127.0.0.1:8765:8765",
    "[::1]evil.example",
    "[::1]:8765.evil.example",
    "localhost.evil.example",
    "127.0.0.1.evil.example",
]
"""Host headers that name another host but contain a loopback address or name."""


@pytest.mark.parametrize("host", LOOKALIKE_HOSTS)
def test_the_open_api_refuses_a_host_that_only_contains_a_loopback_address(
    client: Client, host: str
) -> None:
    with TestClient(create_app(client, open_access=True), base_url=LOCAL) as web:
        read = web.get("/api/v1/jobs", headers={"Host": host})
        submitted = web.post(
            "/api/v1/jobs", json={"task": "http", "args": HTTP_ARGS}, headers={"Host": host}
        )

    assert (read.status_code, submitted.status_code) == (401, 401)
    assert "loopback" in error_of(read)["message"]
    assert client.list_jobs().items == []


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8765", "localhost:1", "[::1]:8765"])
def test_the_open_api_serves_a_loopback_host_with_or_without_a_port(
    client: Client, host: str
) -> None:
    with TestClient(create_app(client, open_access=True), base_url=LOCAL) as web:
        assert web.get("/api/v1/jobs", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Referer": "https://evil.example/page.html"},
    ],
)
def test_a_command_from_another_sites_page_is_refused(
    client: Client, headers: dict[str, str]
) -> None:
    run_id = dead_run(client)
    with TestClient(create_app(client, open_access=True), base_url=LOCAL) as web:
        answer = web.post(f"/api/v1/runs/{run_id}/retry", headers=headers)
        read = web.get(f"/api/v1/runs/{run_id}", headers=headers)

    assert answer.status_code == 403
    assert "another site" in error_of(answer)["message"]
    assert client.get_run(run_id).state is RunState.DEAD
    assert read.status_code == 200  # a read changes nothing (and CORS hides the answer)


def test_a_command_from_this_sites_page_or_with_a_bearer_key_is_accepted(
    web: TestClient, client: Client, admin_key: str
) -> None:
    first, second = dead_run(client), dead_run(client)
    sign_in(web, admin_key)

    same_site = web.post(f"/api/v1/runs/{first}/retry", headers={"Origin": "http://testserver"})
    with_bearer = web.post(
        f"/api/v1/runs/{second}/retry",
        headers={"Origin": "https://elsewhere.example", **bearer(admin_key)},
    )

    assert (same_site.status_code, with_bearer.status_code) == (200, 200)


# -- the documents ---------------------------------------------------------------------------------


def test_the_openapi_document_describes_every_endpoint(web: TestClient) -> None:
    document = web.get("/api/v1/openapi.json").json()

    paths = set(document["paths"])
    assert {
        "/api/v1/jobs",
        "/api/v1/jobs/{job_id}",
        "/api/v1/jobs/{job_id}/cancel",
        "/api/v1/jobs/{job_id}/pause",
        "/api/v1/jobs/{job_id}/resume",
        "/api/v1/jobs/{job_id}/trigger",
        "/api/v1/jobs/{job_id}/explain",
        "/api/v1/jobs/{job_id}/ledger",
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/retry",
        "/api/v1/runs/{run_id}/cancel",
        "/api/v1/dead",
        "/api/v1/cluster",
        "/api/v1/stats",
    } <= paths
    assert document["components"]["securitySchemes"]
    # No page that would load Swagger's scripts from a CDN.
    assert web.get("/api/v1/docs").status_code == 404


def test_times_in_answers_are_utc_iso_8601(admin: TestClient) -> None:
    job = submit(admin, schedule={"delay": 60})

    created = datetime.fromisoformat(job["created_at"])

    assert created.utcoffset() == timedelta(0)
    assert created.tzinfo is not None
    assert abs(datetime.now(UTC) - created) < timedelta(minutes=5)
