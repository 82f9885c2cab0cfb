"""The dashboard in process (FastAPI's TestClient on a real store): pages render on the
server, sign-in and keys guard them, tenants see their own data only, and the retry form
works without JavaScript. The browser tests are in ``test_dashboard_browser.py``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from importlib import resources
from typing import Any

import pytest
from api_support import execute
from fastapi.testclient import TestClient

from tickwork.auth import SESSION_LIFETIME
from tickwork.client import Client
from tickwork.job import JobSpec, JobState, RunState
from tickwork.records import TenantLimits
from tickwork.schedule import Cron, Once
from tickwork.store import Store
from tickwork.web.app import create_app
from tickwork.web.auth import COOKIE_NAME

ORIGIN = {"Origin": "http://testserver"}
"""What a browser sends with a form posted from one of the dashboard's own pages."""
LOOPBACK = "127.0.0.1:8765"


@pytest.fixture
def web(client: Client, admin_key: str) -> Iterator[TestClient]:
    """A browser-like client, not signed in, on an app that requires keys."""
    with TestClient(create_app(client, open_access=False)) as test_client:
        yield test_client


@pytest.fixture
def open_web(client: Client) -> Iterator[TestClient]:
    """The app as ``tickwork api`` serves it on a loopback address with no key defined."""
    app = create_app(client, open_access=True)
    with TestClient(app, base_url=f"http://{LOOPBACK}") as test_client:
        yield test_client


def sign_in(web: TestClient, key: str) -> None:
    answer = web.post("/login", data={"key": key}, headers=ORIGIN, follow_redirects=False)
    assert answer.status_code == 303, answer.text


def dead_run(client: Client, *, tenant: str = "default", error: str = "boom", **result: Any) -> int:
    """A run in the dead letter, made the way a worker makes one: a job due now with one
    attempt, claimed, failed."""
    submitted = client.submit(
        "http", args={"url": "https://example.com/"}, tenant=tenant, max_attempts=1
    )
    assert submitted.run is not None
    (claimed,) = client.store.claim("test-worker", limit=1)
    assert claimed.id == submitted.run.id
    client.store.fail(claimed.id, claimed.fencing_token, error, result=result or None)
    assert client.get_run(claimed.id).state is RunState.DEAD
    return claimed.id


def text_of(html: str) -> str:
    """The page's text with tags dropped and blanks collapsed, for readable assertions."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


# -- signing in ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/jobs", "/jobs/1", "/dead", "/cluster"])
def test_a_page_without_a_key_redirects_to_the_sign_in_form(web: TestClient, path: str) -> None:
    answer = web.get(path, follow_redirects=False)

    assert answer.status_code == 303
    expected = "/login" if path == "/" else f"/login?next={path.replace('/', '%2F')}"
    assert answer.headers["location"] == expected


def test_the_sign_in_form_is_a_plain_html_form(web: TestClient) -> None:
    page = web.get("/login?next=/dead")

    assert page.status_code == 200
    assert '<form class="login" method="post" action="/login">' in page.text
    assert 'type="password"' in page.text
    assert 'name="next" value="/dead"' in page.text


def test_signing_in_sets_an_http_only_lax_cookie_and_returns_to_the_page(
    web: TestClient, acme_key: str
) -> None:
    answer = web.post(
        "/login", data={"key": acme_key, "next": "/dead"}, headers=ORIGIN, follow_redirects=False
    )

    assert answer.status_code == 303
    assert answer.headers["location"] == "/dead"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE_NAME}=tws_")
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert "Path=/" in cookie
    assert f"Max-Age={int(SESSION_LIFETIME.total_seconds())}" in cookie
    assert "Secure" not in cookie  # plain http on loopback: a browser would drop it
    assert web.get("/dead").status_code == 200


def test_the_sign_in_cookie_carries_a_session_token_never_the_key(
    web: TestClient, acme_key: str
) -> None:
    answer = web.post("/login", data={"key": acme_key}, headers=ORIGIN, follow_redirects=False)
    assert acme_key not in answer.headers["set-cookie"]
    web.cookies.clear()
    web.cookies.set(COOKIE_NAME, acme_key)  # a cookie holding the key itself

    page = web.get("/jobs", follow_redirects=False)

    assert page.status_code == 303
    assert page.headers["location"] == "/login?next=%2Fjobs"


def test_signing_in_over_https_sets_a_secure_cookie(client: Client, acme_key: str) -> None:
    app = create_app(client, open_access=False)
    with TestClient(app, base_url="https://tickwork.example.com") as web:
        origin = {"Origin": "https://tickwork.example.com"}
        answer = web.post("/login", data={"key": acme_key}, headers=origin, follow_redirects=False)

    assert answer.status_code == 303
    assert "Secure" in answer.headers["set-cookie"]


def test_signing_out_ends_the_session_on_the_server(web: TestClient, acme_key: str) -> None:
    sign_in(web, acme_key)
    token = web.cookies[COOKIE_NAME]

    web.post("/logout", headers=ORIGIN, follow_redirects=False)
    web.cookies.set(COOKIE_NAME, token)  # a copy of the cookie, kept from before

    assert web.get("/jobs", follow_redirects=False).headers["location"] == "/login?next=%2Fjobs"
    assert web.get("/api/v1/jobs").status_code == 401


def test_signing_in_again_ends_the_previous_session(
    web: TestClient, acme_key: str, admin_key: str
) -> None:
    sign_in(web, acme_key)
    first = web.cookies[COOKIE_NAME]

    sign_in(web, admin_key)
    web.cookies.clear()
    web.cookies.set(COOKIE_NAME, first)

    assert web.get("/", follow_redirects=False).status_code == 303


def test_sign_in_never_redirects_to_another_site(web: TestClient, acme_key: str) -> None:
    for target in ("https://evil.example/", "//evil.example/", "/\\evil.example", "javascript:x"):
        answer = web.post(
            "/login", data={"key": acme_key, "next": target}, headers=ORIGIN, follow_redirects=False
        )
        assert answer.headers["location"] == "/", target


def test_a_wrong_key_is_refused_at_sign_in_and_sets_no_cookie(web: TestClient) -> None:
    answer = web.post("/login", data={"key": "tw_aaaaaaaa_" + "x" * 43}, headers=ORIGIN)

    assert answer.status_code == 401
    assert "That key is wrong, malformed or revoked." in answer.text
    assert "set-cookie" not in answer.headers
    assert web.get("/", follow_redirects=False).status_code == 303


def test_a_revoked_key_in_the_cookie_sends_the_browser_back_to_sign_in(
    web: TestClient, client: Client, acme_key: str
) -> None:
    sign_in(web, acme_key)
    client.revoke_api_key(acme_key)

    answer = web.get("/jobs", follow_redirects=False)

    assert answer.status_code == 303
    assert answer.headers["location"] == "/login?next=%2Fjobs"
    assert f'{COOKIE_NAME}=""' in answer.headers["set-cookie"]  # the stale cookie is dropped


def test_signing_out_drops_the_cookie(web: TestClient, acme_key: str) -> None:
    sign_in(web, acme_key)
    assert '<form class="login" method="post" action="/logout">' in web.get("/logout").text

    answer = web.post("/logout", headers=ORIGIN, follow_redirects=False)

    assert answer.status_code == 303
    assert answer.headers["location"] == "/login"
    assert web.get("/", follow_redirects=False).status_code == 303


def next_of(form: str) -> str:
    """The ``next`` the sign-in form will post (where the browser goes once signed in)."""
    found = re.search(r'name="next" value="([^"]*)"', form)
    assert found is not None
    return found.group(1).replace("&amp;", "&")


def test_a_cross_site_post_while_signed_out_lands_on_a_page_after_sign_in(
    web: TestClient, client: Client, admin_key: str
) -> None:
    run_id = dead_run(client)
    posted = web.post(
        f"/runs/{run_id}/retry",
        headers={"Origin": "https://evil.example"},
        follow_redirects=False,
    )
    form = web.get(posted.headers["location"])

    signed_in = web.post(
        "/login",
        data={"key": admin_key, "next": next_of(form.text)},
        headers=ORIGIN,
        follow_redirects=False,
    )
    landed = web.get(signed_in.headers["location"])

    assert posted.status_code == 303
    assert signed_in.headers["location"] == "/"
    assert landed.status_code == 200
    assert landed.headers["content-type"].startswith("text/html")
    assert client.get_run(run_id).state is RunState.DEAD  # nothing was replayed


def test_a_form_posted_from_a_page_while_signed_out_returns_to_that_page(
    web: TestClient, client: Client, admin_key: str
) -> None:
    run_id = dead_run(client)
    posted = web.post(
        f"/runs/{run_id}/retry",
        headers={**ORIGIN, "Referer": "http://testserver/dead?after=99"},
        follow_redirects=False,
    )
    form = web.get(posted.headers["location"])

    signed_in = web.post(
        "/login",
        data={"key": admin_key, "next": next_of(form.text)},
        headers=ORIGIN,
        follow_redirects=False,
    )

    assert signed_in.headers["location"] == "/dead?after=99"
    assert web.get("/dead?after=99").status_code == 200
    assert client.get_run(run_id).state is RunState.DEAD


@pytest.mark.parametrize(
    "target", ["/runs/1/retry", "/jobs/1/pause", "/logout", "/fragments/jobs", "/api/v1/jobs"]
)
def test_sign_in_never_sends_the_browser_to_a_form_target_or_a_fragment(
    web: TestClient, acme_key: str, target: str
) -> None:
    form = web.get("/login", params={"next": target})
    answer = web.post(
        "/login", data={"key": acme_key, "next": target}, headers=ORIGIN, follow_redirects=False
    )

    assert next_of(form.text) == "/"
    assert answer.headers["location"] == "/"


def test_a_bearer_header_works_without_a_cookie(web: TestClient, acme_key: str) -> None:
    page = web.get("/", headers={"Authorization": f"Bearer {acme_key}"})

    assert page.status_code == 200
    assert "tenant acme" in page.text


def test_a_wrong_bearer_header_gets_a_401_page_not_a_redirect(web: TestClient) -> None:
    page = web.get("/", headers={"Authorization": "Bearer nope"}, follow_redirects=False)

    assert page.status_code == 401
    assert "wrong, malformed or revoked" in page.text


def test_a_fragment_without_a_key_sends_htmx_to_the_sign_in_form(web: TestClient) -> None:
    answer = web.get(
        "/fragments/jobs?state=active",
        headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/jobs?state=active"},
    )

    assert answer.status_code == 401
    assert answer.headers["hx-redirect"] == "/login?next=%2Fjobs%3Fstate%3Dactive"


def test_the_open_api_needs_no_sign_in(open_web: TestClient, client: Client) -> None:
    run_id = dead_run(client)
    page = open_web.get("/")

    assert page.status_code == 200
    assert "open access" in page.text
    assert "Sign out" not in page.text
    assert open_web.get("/login", follow_redirects=False).headers["location"] == "/"
    retry = open_web.post(
        f"/runs/{run_id}/retry", headers={"Origin": f"http://{LOOPBACK}"}, follow_redirects=False
    )
    assert retry.status_code == 303
    assert client.get_run(run_id).state is RunState.QUEUED


def test_the_open_api_serves_no_page_to_a_rebound_host_name(
    open_web: TestClient, client: Client
) -> None:
    # DNS rebinding: evil.example made to resolve to 127.0.0.1 sends Host: evil.example.
    run_id = dead_run(client)
    rebound = {"Host": "evil.example:8765", "Origin": "http://evil.example:8765"}

    page = open_web.get("/dead", headers=rebound, follow_redirects=False)
    retry = open_web.post(f"/runs/{run_id}/retry", headers=rebound, follow_redirects=False)

    assert page.status_code == 303
    assert page.headers["location"].startswith("/login")
    assert retry.status_code == 303
    assert retry.headers["location"].startswith("/login")
    assert client.get_run(run_id).state is RunState.DEAD


# -- pages ---------------------------------------------------------------------------------


def test_the_overview_shows_runs_by_state_backlog_lag_and_leader(
    web: TestClient, client: Client, admin_key: str
) -> None:
    dead_run(client)
    client.submit("http", args={"url": "https://example.com/"})  # queued and due: backlog
    lease = client.store.acquire_leadership("scheduler-a", timedelta(minutes=5))
    assert lease is not None
    sign_in(web, admin_key)

    page = web.get("/")

    assert page.status_code == 200
    text = text_of(page.text)
    assert "queued 1 running 0 succeeded 0 failed 0 dead 1 cancelled 0" in text
    assert re.search(r"Due backlog 1 oldest due (just now|\d+ s ago)", text), text
    assert re.search(r"Trigger lag p50 / p99 \d+ ms / \d+ ms", text), text
    assert f"epoch {lease.epoch} scheduler-a" in text
    latest = re.findall(r'<tr data-run-id="(\d+)"', page.text)  # latest runs, newest first
    assert latest == sorted(latest, key=int, reverse=True)
    assert len(latest) == 2
    assert 'hx-get="/fragments/overview"' in page.text
    fragment = web.get("/fragments/overview", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert "<html" not in fragment.text
    assert "Due backlog" in fragment.text


def test_the_overview_says_when_no_scheduler_leads(web: TestClient, admin_key: str) -> None:
    sign_in(web, admin_key)

    text = text_of(web.get("/").text)

    assert "Leader none no scheduler holds the lease" in text
    assert "Trigger lag p50 / p99 – / –" in text


def test_jobs_are_filtered_by_state_and_task_and_paged_by_cursor(
    web: TestClient, client: Client, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tickwork.web.dashboard.pages.JOBS_PER_PAGE", 2)
    ids = [
        client.schedule("http", name=f"poll-{i}", every=60, args={"url": "https://e.x/"}).job.id
        for i in range(3)
    ]
    client.pause_job(ids[0])
    shell = client.submit("shell", args={"argv": ["true"]}, delay=3600).job.id
    sign_in(web, admin_key)

    first = web.get("/jobs")
    assert [int(i) for i in re.findall(r'data-job-id="(\d+)"', first.text)] == [shell, ids[2]]
    next_url = re.search(r'href="(/jobs\?after=\d+)" rel="next"', first.text)
    assert next_url is not None
    second = web.get(next_url.group(1))
    assert [int(i) for i in re.findall(r'data-job-id="(\d+)"', second.text)] == [ids[1], ids[0]]
    last = re.search(r'href="(/jobs\?after=\d+)" rel="next"', second.text)
    if last is not None:  # a full page may be the last one: the page after it is empty
        assert "No jobs." in web.get(last.group(1)).text

    paused = web.get("/jobs?state=paused")
    assert re.findall(r'data-job-id="(\d+)"', paused.text) == [str(ids[0])]
    assert '<option value="paused" selected>' in paused.text
    by_task = web.get("/jobs?task=shell")
    assert re.findall(r'data-job-id="(\d+)"', by_task.text) == [str(shell)]
    assert 'hx-get="/fragments/jobs?task=shell"' in by_task.text
    assert web.get("/jobs?state=bogus").status_code == 400


def test_a_job_page_shows_schedule_fire_times_runs_errors_tails_and_ledger(
    web: TestClient, client: Client, store: Store, admin_key: str
) -> None:
    job = client.schedule(
        "http",
        name="hourly",
        every=3600,
        anchor="2020-01-01T00:00:00+00:00",
        misfire="skip",
        args={"url": "https://example.com/"},
    ).job
    assert job.next_run_at is not None
    # A scheduler that was down for three hours: the missed slots are skipped (ledger).
    later = job.next_run_at + timedelta(hours=3, minutes=30)
    lease = store.acquire_leadership("s1", timedelta(days=1), now=later)
    assert lease is not None
    triggered = store.trigger(lease.epoch, now=later)
    assert triggered.skipped
    run_now = client.trigger_job(job.id)
    (claimed,) = store.claim("w1", limit=1)
    assert claimed.id == run_now.id
    store.fail(
        claimed.id,
        claimed.fencing_token,
        "command exited with code 3: disk full",
        result={"exit_code": 3, "stdout": "".join(f"line {i}\n" for i in range(100)), "stderr": ""},
    )
    sign_in(web, admin_key)

    page = web.get(f"/jobs/{job.id}")

    assert page.status_code == 200
    text = text_of(page.text)
    assert f"Job {job.id}: hourly" in text
    assert "Every 1 hour from 2020-01-01T00:00:00+00:00: task http" in text
    assert len(re.findall(r"<li><time", page.text)) == 5  # next fire times
    assert f'data-run-id="{claimed.id}"' in page.text
    assert "failed" in text
    assert "2/3" in text  # the next attempt of three
    assert "command exited with code 3: disk full" in text
    assert '{"exit_code": 3}' in text_of(page.text.replace("&#34;", '"'))
    assert "line 99" in text
    assert "line 69" not in text  # a tail, not the whole output
    assert "misfire" in text
    assert f"{len(triggered.skipped) and triggered.skipped[0].count} " in text


def test_a_job_page_explains_a_slot_and_says_why_a_bad_one_is_wrong(
    web: TestClient, client: Client, admin_key: str
) -> None:
    job = client.schedule("http", name="daily", cron="0 9 * * *", args={"url": "https://e.x/"})
    sign_in(web, admin_key)

    answer = web.get(f"/jobs/{job.job.id}?at=2020-01-01T09:00")
    assert "did not run at 2020-01-01T09:00:00+00:00: the job did not exist yet" in answer.text
    wrong = web.get(f"/jobs/{job.job.id}?at=yesterday")
    assert wrong.status_code == 200
    assert 'class="note error" role="alert"' in wrong.text


def test_the_cluster_page_lists_the_leader_and_nodes_for_an_admin(
    web: TestClient, store: Store, admin_key: str, acme_key: str
) -> None:
    store.register_node("worker-1", "worker", "host-a", 4242)
    lease = store.acquire_leadership("scheduler-9", timedelta(minutes=1))
    assert lease is not None
    sign_in(web, admin_key)

    text = text_of(web.get("/cluster").text)

    assert f"Holder scheduler-9 Epoch {lease.epoch}" in text
    assert "worker-1 worker host-a 4242" in text


def test_the_cluster_page_shows_each_nodes_clock(
    web: TestClient, store: Store, admin_key: str
) -> None:
    store.register_node("fast", "worker", "host-a", 1, {"clock": {"offset": 5.01, "bound": 0.002}})
    store.register_node("near", "worker", "host-b", 2, {"clock": {"offset": 0.0, "bound": 0.001}})
    sign_in(web, admin_key)

    page = web.get("/cluster").text

    assert "+5.01 s ±0.002</span>" in page  # marked: more than 1 s off
    assert "+0.00 s ±0.001</td>" in page


def test_a_tenant_key_gets_a_403_page_on_the_cluster_page(web: TestClient, acme_key: str) -> None:
    sign_in(web, acme_key)

    page = web.get("/cluster")

    assert page.status_code == 403
    assert "This page needs an admin key." in page.text
    assert 'href="/cluster"' not in page.text  # not offered in the navigation either
    assert web.get("/fragments/cluster").status_code == 403


@pytest.mark.parametrize("path", ["/jobs/999999", "/jobs/abc", "/jobs/99999999999999999999"])
def test_an_unknown_job_is_a_404_page(web: TestClient, admin_key: str, path: str) -> None:
    sign_in(web, admin_key)

    page = web.get(path)

    assert page.status_code == 404
    assert "<h1>Not found</h1>" in page.text


# -- tenants -------------------------------------------------------------------------------


def test_a_tenant_key_sees_its_own_tenant_only(
    web: TestClient, client: Client, acme_key: str
) -> None:
    mine = dead_run(client, tenant="acme", error="acme failed")
    theirs = dead_run(client, tenant="globex", error="globex failed")
    sign_in(web, acme_key)

    dead = web.get("/dead").text
    assert f'data-run-id="{mine}"' in dead
    assert f'data-run-id="{theirs}"' not in dead
    jobs = web.get("/jobs").text
    assert "globex" not in jobs
    assert "dead 1" in text_of(web.get("/").text)


def test_another_tenants_ids_are_404_pages_and_change_nothing(
    web: TestClient, client: Client, acme_key: str
) -> None:
    theirs = dead_run(client, tenant="globex")
    job_id = client.get_run(theirs).job_id
    sign_in(web, acme_key)

    assert web.get(f"/jobs/{job_id}").status_code == 404
    assert web.get(f"/fragments/jobs/{job_id}").status_code == 404
    assert web.post(f"/runs/{theirs}/retry", headers=ORIGIN).status_code == 404
    htmx = web.post(f"/runs/{theirs}/retry", headers={**ORIGIN, "HX-Request": "true"})
    assert htmx.status_code == 404
    assert "run" in htmx.text
    assert "not found" in htmx.text
    assert web.post(f"/jobs/{job_id}/cancel", headers=ORIGIN).status_code == 404
    assert client.get_run(theirs).state is RunState.DEAD
    assert client.get_job(job_id).state is JobState.DEAD


# -- acting --------------------------------------------------------------------------------


def test_the_retry_form_works_without_javascript(
    web: TestClient, client: Client, admin_key: str
) -> None:
    run_id = dead_run(client)
    sign_in(web, admin_key)
    page = web.get("/dead")
    form = f'<form class="inline" method="post" action="/runs/{run_id}/retry"'
    assert form in page.text
    assert '<input type="hidden" name="next" value="/dead">' in page.text

    answer = web.post(
        f"/runs/{run_id}/retry", data={"next": "/dead"}, headers=ORIGIN, follow_redirects=False
    )

    assert answer.status_code == 303
    assert answer.headers["location"] == "/dead"
    assert client.get_run(run_id).state is RunState.QUEUED
    assert f'data-run-id="{run_id}"' not in web.get("/dead").text


@pytest.mark.parametrize("back", ["/runs/1/retry", "/fragments/dead", "https://evil.example/"])
def test_the_retry_form_returns_only_to_a_page(
    web: TestClient, client: Client, admin_key: str, back: str
) -> None:
    run_id = dead_run(client)
    sign_in(web, admin_key)

    answer = web.post(
        f"/runs/{run_id}/retry", data={"next": back}, headers=ORIGIN, follow_redirects=False
    )

    assert answer.status_code == 303
    assert answer.headers["location"] == "/dead"


def test_a_retry_from_htmx_answers_the_row_in_its_new_state(
    web: TestClient, client: Client, admin_key: str
) -> None:
    run_id = dead_run(client)
    sign_in(web, admin_key)

    answer = web.post(f"/runs/{run_id}/retry", headers={**ORIGIN, "HX-Request": "true"})

    assert answer.status_code == 200
    assert answer.text.lstrip().startswith(f'<tr id="run-{run_id}"')
    assert "Retried:" in answer.text
    assert '<span class="state state-queued">queued</span>' in answer.text
    assert "<form" not in answer.text


def test_retrying_a_run_that_is_no_longer_dead_says_why(
    web: TestClient, client: Client, admin_key: str
) -> None:
    run_id = dead_run(client)
    client.retry_run(run_id)  # another operator was first
    sign_in(web, admin_key)

    htmx = web.post(f"/runs/{run_id}/retry", headers={**ORIGIN, "HX-Request": "true"})
    assert htmx.status_code == 409
    assert "Not retried: it is queued." in htmx.text
    plain = web.post(f"/runs/{run_id}/retry", headers=ORIGIN)
    assert plain.status_code == 409
    assert "Cannot retry run" in plain.text


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Referer": "https://evil.example/page"},
        {"Origin": "http://testserver.evil.example"},
        {"Origin": "http://evil.example@testserver"},
        {"Referer": "http://testserver@evil.example/dead"},
        {"Referer": "http://evil.example/?testserver"},
        {"Origin": "http://testserver:1"},
        {"Origin": "http://testserver/"},
        {"Origin": "garbage"},
    ],
    ids=[
        "no-origin",
        "foreign-origin",
        "null-origin",
        "foreign-referer",
        "lookalike-host",
        "user-info-origin",
        "user-info-referer",
        "host-in-query",
        "other-port",
        "origin-with-path",
        "malformed-origin",
    ],
)
def test_a_cross_site_post_is_refused_and_changes_nothing(
    web: TestClient, client: Client, admin_key: str, headers: dict[str, str]
) -> None:
    run_id = dead_run(client)
    sign_in(web, admin_key)

    answer = web.post(f"/runs/{run_id}/retry", headers=headers)

    assert answer.status_code == 403
    assert "did not come from a dashboard page" in answer.text
    assert client.get_run(run_id).state is RunState.DEAD


def test_a_cross_site_post_is_refused_on_the_open_api_too(
    open_web: TestClient, client: Client
) -> None:
    run_id = dead_run(client)

    answer = open_web.post(f"/runs/{run_id}/retry", headers={"Origin": "https://evil.example"})

    assert answer.status_code == 403
    assert client.get_run(run_id).state is RunState.DEAD


def test_a_post_from_the_same_origin_by_referer_or_a_bearer_client_is_accepted(
    web: TestClient, client: Client, admin_key: str
) -> None:
    by_referer, by_bearer = dead_run(client), dead_run(client)
    sign_in(web, admin_key)

    referer = web.post(
        f"/runs/{by_referer}/retry",
        headers={"Referer": "http://testserver/dead"},
        follow_redirects=False,
    )
    web.cookies.clear()
    bearer = web.post(
        f"/runs/{by_bearer}/retry",
        headers={"Authorization": f"Bearer {admin_key}"},
        follow_redirects=False,
    )

    assert (referer.status_code, bearer.status_code) == (303, 303)
    assert client.get_run(by_referer).state is RunState.QUEUED
    assert client.get_run(by_bearer).state is RunState.QUEUED


def test_job_commands_act_and_return_to_the_job(
    web: TestClient, client: Client, admin_key: str
) -> None:
    job_id = client.schedule("http", name="poll", every=60, args={"url": "https://e.x/"}).job.id
    sign_in(web, admin_key)

    def act(action: str) -> None:
        answer = web.post(f"/jobs/{job_id}/{action}", headers=ORIGIN, follow_redirects=False)
        assert answer.status_code == 303
        assert answer.headers["location"] == f"/jobs/{job_id}"

    act("pause")
    assert client.get_job(job_id).state is JobState.PAUSED
    assert f'action="/jobs/{job_id}/resume"' in web.get(f"/jobs/{job_id}").text
    act("resume")
    assert client.get_job(job_id).state is JobState.ACTIVE
    act("trigger")
    assert len(client.list_runs(job_id=job_id).items) == 1
    act("cancel")
    assert client.get_job(job_id).state is JobState.CANCELLED
    assert web.post(f"/jobs/{job_id}/pause", headers=ORIGIN).status_code == 409
    assert web.post(f"/jobs/{job_id}/explode", headers=ORIGIN).status_code == 404


# -- safety --------------------------------------------------------------------------------


def test_everything_users_supplied_is_escaped(
    web: TestClient, client: Client, admin_key: str
) -> None:
    evil = "<script>alert(1)</script>"
    job_id = client.schedule(
        "http", name=f"x{evil}", every=60, args={"url": f"https://e.x/?q={evil}"}
    ).job.id
    dead_run(client, error=f"failed {evil}", stdout=evil)
    sign_in(web, admin_key)

    for path in ("/jobs", f"/jobs/{job_id}", "/dead", f"/jobs?task={evil}", "/jobs/1"):
        page = web.get(path)
        assert evil not in page.text, path
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in web.get(f"/jobs/{job_id}").text


def test_pages_allow_only_their_own_scripts_and_forbid_framing(
    web: TestClient, admin_key: str
) -> None:
    sign_in(web, admin_key)

    page = web.get("/")

    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"
    assert "<script>" not in page.text  # no inline script for the CSP to allow
    assert "https://" not in page.text  # no CDN: every asset is served from here


def test_htmx_and_the_stylesheet_are_vendored_and_served(web: TestClient) -> None:
    page = web.get("/login").text
    scripts = re.findall(r'<script src="([^"]+)"', page)
    styles = re.findall(r'<link rel="stylesheet" href="([^"]+)"', page)

    assert len(scripts) == 1
    assert scripts[0].startswith("/static/htmx.min.js?v=")
    htmx = web.get(scripts[0])
    assert htmx.status_code == 200
    assert htmx.headers["content-type"].startswith("text/javascript")
    assert htmx.text.startswith("/*! htmx.org 2.")
    assert "htmx" in htmx.text[-2000:]
    assert web.get(styles[0]).headers["content-type"].startswith("text/css")
    assert web.get("/static/../app.py").status_code == 404
    assert web.get("/static/nope.js").status_code == 404


def test_templates_and_static_files_ship_inside_the_package() -> None:
    package = resources.files("tickwork.web")
    for name in ("htmx.min.js", "htmx.LICENSE", "dashboard.css"):
        assert (package / "static" / name).is_file(), name
    for name in ("base.html", "overview.html", "jobs.html", "job.html", "dead.html"):
        assert (package / "templates" / name).is_file(), name


# -- issue 11: what a finished job shows and offers ------------------------------------------


def job_of(client: Client, run_id: int) -> int:
    return client.get_run(run_id).job_id


def test_a_one_off_job_whose_only_run_died_is_shown_dead(
    web: TestClient, client: Client, admin_key: str
) -> None:
    job_id = job_of(client, dead_run(client))
    assert client.get_job(job_id).state is JobState.DEAD
    sign_in(web, admin_key)

    page = web.get(f"/jobs/{job_id}")
    listing = web.get("/jobs")
    dead_only = web.get("/jobs", params={"state": "dead"})

    for html in (page.text, listing.text, dead_only.text):
        assert '<span class="state state-dead">dead</span>' in html
        assert "completed" not in text_of(html)


def test_a_one_off_job_whose_run_succeeded_says_so(
    web: TestClient, client: Client, store: Store, admin_key: str
) -> None:
    submitted = client.submit("http", args={"url": "https://example.com/"})
    (claimed,) = store.claim("w1", limit=1)
    store.complete(claimed.id, claimed.fencing_token, result={"status": 200})
    sign_in(web, admin_key)

    page = web.get(f"/jobs/{submitted.job.id}")

    assert '<span class="state state-succeeded">succeeded</span>' in page.text
    assert "completed" not in text_of(page.text)


def test_a_triggered_one_off_or_a_cancelled_job_offers_no_run_now_or_cancel_and_refuses_both(
    web: TestClient, client: Client, admin_key: str
) -> None:
    dead = job_of(client, dead_run(client))
    cancelled = client.schedule("http", name="poll", every=60, args={"url": "https://e.x/"})
    client.cancel_job(cancelled.job.id)
    sign_in(web, admin_key)

    for job_id, state in ((dead, "dead"), (cancelled.job.id, "cancelled")):
        page = web.get(f"/jobs/{job_id}").text
        runs_before = client.list_runs(job_id=job_id).items
        assert f'action="/jobs/{job_id}/trigger"' not in page
        assert f'action="/jobs/{job_id}/cancel"' not in page
        for action in ("trigger", "cancel"):
            answer = web.post(f"/jobs/{job_id}/{action}", headers=ORIGIN, follow_redirects=False)
            assert answer.status_code == 409, (state, action)
            assert answer.headers["content-type"].startswith("text/html")
            assert f"Job {job_id} is {state}: it has no slot left" in text_of(answer.text)
        assert client.get_job(job_id).state.value == state
        assert client.list_runs(job_id=job_id).items == runs_before


def test_an_unfinished_run_of_a_triggered_one_off_job_is_cancelled_from_its_page(
    web: TestClient, client: Client, admin_key: str
) -> None:
    submitted = client.submit("http", args={"url": "https://example.com/"})  # due now
    assert submitted.run is not None
    assert submitted.job.state is JobState.QUEUED
    sign_in(web, admin_key)
    cancel = f'action="/runs/{submitted.run.id}/cancel"'

    assert cancel in web.get(f"/jobs/{submitted.job.id}").text
    answer = web.post(
        f"/runs/{submitted.run.id}/cancel",
        data={"next": f"/jobs/{submitted.job.id}"},
        headers=ORIGIN,
        follow_redirects=False,
    )

    assert answer.status_code == 303
    assert answer.headers["location"] == f"/jobs/{submitted.job.id}"
    assert client.get_run(submitted.run.id).state is RunState.CANCELLED
    assert cancel not in web.get(f"/jobs/{submitted.job.id}").text


def test_cancelling_a_run_from_another_site_is_refused(
    web: TestClient, client: Client, admin_key: str
) -> None:
    submitted = client.submit("http", args={"url": "https://example.com/"})
    assert submitted.run is not None
    sign_in(web, admin_key)

    answer = web.post(
        f"/runs/{submitted.run.id}/cancel", headers={"Origin": "https://evil.example"}
    )

    assert answer.status_code == 403
    assert client.get_run(submitted.run.id).state is RunState.QUEUED


# -- issue 11: user text that would reorder the page -----------------------------------------

BIDI = "\u202e"


def test_bidi_and_control_characters_in_user_text_are_shown_as_codes_not_obeyed(
    web: TestClient, client: Client, store_url: str, admin_key: str
) -> None:
    job_id = client.schedule(
        "http", name="invoice", every=60, args={"url": "https://e.x/", "json": f"a{BIDI}b"}
    ).job.id
    # Submit refuses these in a name today; a row written before that holds them.
    execute(
        store_url,
        "UPDATE tickwork_jobs SET name = :name WHERE id = :id",
        name=f"invoice{BIDI}fdp.exe\x07",
        id=job_id,
    )
    dead_run(client, error=f"failed on {BIDI}elif\x1b[2J", stdout=f"out{BIDI}put")
    sign_in(web, admin_key)

    pages = {path: web.get(path).text for path in ("/jobs", f"/jobs/{job_id}", "/dead", "/")}
    dead_job = next(iter(client.dead_runs().items)).job_id
    pages["dead job"] = web.get(f"/jobs/{dead_job}").text

    for path, html in pages.items():
        for raw in (BIDI, "\x07", "\x1b"):
            assert raw not in html, (path, raw)
    assert "invoice[U+202E]fdp.exe[U+0007]" in pages["/jobs"]
    assert "<bdi>invoice[U+202E]fdp.exe[U+0007]</bdi>" in pages[f"/jobs/{job_id}"]
    assert "a[U+202E]b" in pages[f"/jobs/{job_id}"]
    assert "failed on [U+202E]elif[U+001B][2J" in pages["dead job"]
    assert "out[U+202E]put" in pages["dead job"]


def test_a_name_in_a_right_to_left_script_is_shown_as_it_is_isolated(
    web: TestClient, client: Client, admin_key: str
) -> None:
    job_id = client.schedule("http", name="גיבוי", every=60, args={"url": "https://e.x/"}).job.id
    sign_in(web, admin_key)

    page = web.get(f"/jobs/{job_id}").text

    assert f"Job {job_id}: <bdi>גיבוי</bdi>" in page


def test_a_job_whose_result_is_not_an_object_still_has_a_page(
    web: TestClient, client: Client, store_url: str, admin_key: str
) -> None:
    run_id = dead_run(client)
    execute(store_url, "UPDATE tickwork_runs SET result = :r WHERE id = :id", r="[1, 2]", id=run_id)
    sign_in(web, admin_key)

    page = web.get(f"/jobs/{job_of(client, run_id)}")

    assert page.status_code == 200
    assert "[1, 2]" in text_of(page.text)


# -- tenants' limits -----------------------------------------------------------------------


def test_the_tenants_page_lists_limits_and_runs_now_and_is_in_the_nav(
    web: TestClient, client: Client, admin_key: str, store: Store
) -> None:
    now = store.now()
    store.submit_many([JobSpec(task="t", schedule=Once(at=now), tenant="acme")] * 5, now=now)
    client.set_tenant_limits("acme", max_running=2, weight=3)
    client.set_tenant_limits("globex", rate=0.5, burst=4)
    store.claim("w", limit=10)
    sign_in(web, admin_key)

    assert '<a href="/tenants">Tenants</a>' in web.get("/").text
    page = web.get("/tenants")
    assert page.status_code == 200
    rows = {
        row.split()[0]: row.split()[1:]
        for row in text_of(page.text.split("<tbody>")[1].split("</tbody>")[0])
        .replace(" acme ", "\nacme ")
        .replace(" globex ", "\nglobex ")
        .splitlines()
    }
    assert rows["acme"] == ["2", "–", "–", "3", "2", "3", "3"]
    assert rows["globex"] == ["–", "30/m", "4", "1", "0", "0", "0"]
    assert 'id="limits"' in page.text  # an admin gets the form
    assert "held" in web.get("/fragments/tenants").text.lower()


def test_an_admin_replaces_a_tenants_limits_with_the_form(
    web: TestClient, client: Client, admin_key: str
) -> None:
    client.set_tenant_limits("acme", max_running=2, weight=3)
    sign_in(web, admin_key)
    form = {"tenant": "acme", "max_running": "", "rate": "20/s", "burst": "40", "weight": ""}

    answer = web.post("/tenants", data=form, headers=ORIGIN, follow_redirects=False)

    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/tenants/acme"
    assert client.tenant("acme").limits == TenantLimits("acme", rate=20.0, burst=40)
    page = text_of(web.get("/tenants/acme").text)
    assert "Rate 20/s, burst 40" in page
    assert "Max running no limit" in page


def test_a_tenant_whose_name_holds_a_slash_has_its_own_page(
    web: TestClient, client: Client, admin_key: str
) -> None:
    sign_in(web, admin_key)
    form = {"tenant": "team/a b?", "max_running": "7"}
    answer = web.post("/tenants", data=form, headers=ORIGIN, follow_redirects=False)
    assert answer.headers["location"] == "/tenants/team%2Fa%20b%3F"
    assert "Max running 7" in text_of(web.get(answer.headers["location"]).text)
    assert client.tenant("team/a b?").limits.max_running == 7


@pytest.mark.parametrize(
    ("form", "message"),
    [({"max_running": "0"}, "max_running must be a whole number"),
     ({"max_running": "two"}, "max_running must be a whole number"),
     ({"rate": "fast"}, "rate must be a number per second"),
     ({"rate": "0/s"}, "rate must be from 0.00001/s"),
     ({"burst": "5"}, "burst needs a rate"),
     ({"weight": "-1"}, "weight must be a number from 0.001 to 1000"),
     ({"weight": "nan"}, "weight must be a number from 0.001 to 1000"),
     ({"tenant": ""}, "tenant must be a non-empty string")],
)  # fmt: skip
def test_a_bad_limit_in_the_form_is_a_400_page_and_changes_nothing(
    web: TestClient, client: Client, admin_key: str, form: dict[str, str], message: str
) -> None:
    client.set_tenant_limits("acme", max_running=2)
    sign_in(web, admin_key)

    answer = web.post("/tenants", data={"tenant": "acme", **form}, headers=ORIGIN)

    assert answer.status_code == 400
    assert message in answer.text.lower()  # the page capitalizes the message
    assert client.tenant("acme").limits == TenantLimits("acme", max_running=2)


def test_a_tenant_key_sees_its_own_limits_only_and_cannot_change_them(
    web: TestClient, client: Client, acme_key: str
) -> None:
    client.set_tenant_limits("acme", max_running=2)
    client.set_tenant_limits("globex", max_running=3)
    sign_in(web, acme_key)

    listed = web.get("/tenants").text
    assert 'data-tenant="acme"' in listed
    assert "globex" not in listed
    assert 'id="limits"' not in listed  # no form
    assert web.get("/tenants/acme").status_code == 200
    assert web.get("/tenants/globex").status_code == 404
    assert web.get("/fragments/tenants/globex").status_code == 404
    answer = web.post("/tenants", data={"tenant": "acme", "max_running": "50"}, headers=ORIGIN)
    assert answer.status_code == 403
    assert client.tenant("acme").limits.max_running == 2


def test_a_cross_site_post_of_limits_is_refused_and_changes_nothing(
    web: TestClient, client: Client, admin_key: str
) -> None:
    client.set_tenant_limits("acme", max_running=2)
    sign_in(web, admin_key)
    answer = web.post(
        "/tenants",
        data={"tenant": "acme", "max_running": "99"},
        headers={"Origin": "https://evil.example"},
    )
    assert answer.status_code == 403
    assert client.tenant("acme").limits.max_running == 2


def test_the_job_page_and_the_api_explain_a_slot_late_in_a_failover(
    open_web: TestClient, store: Store
) -> None:
    s = timedelta(seconds=1)
    hour = store.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    spec = JobSpec(task="http", args={"url": "https://e.x/"}, schedule=Cron("*/10 * * * *"))
    job = store.submit(spec, now=hour + s).job
    assert store.acquire_leadership("sched-a", timedelta(minutes=10), now=hour) is not None
    assert store.acquire_leadership("sched-b", timedelta(seconds=5), now=hour + 11 * 60 * s)
    store.trigger(2, now=hour + 11 * 60 * s)
    slot = (hour + 10 * 60 * s).isoformat()
    said = (
        f"It ran late: no leader from {(hour + 10 * 60 * s).isoformat()} to "
        f"{(hour + 11 * 60 * s).time().isoformat()}; epoch 1 → 2 (sched-a, then sched-b)."
    )

    page = open_web.get(f"/jobs/{job.id}", params={"at": slot})
    api = open_web.get(f"/api/v1/jobs/{job.id}/explain", params={"at": slot})

    assert said in text_of(page.text)
    assert said in api.json()["explanation"]
