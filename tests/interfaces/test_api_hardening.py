"""Issue 11, items 2 to 5, through a real ``tickwork api`` process: input that used to be
stored and then break listings, or to answer 500, is now a 400 that writes nothing; and a
row stored before those checks existed can take down no listing, in the HTTP API, the
dashboard or ``tickwork jobs/runs --json``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from api_support import counts, dead_run, error_of, execute, run_tickwork, serving

from tickwork.client import Client
from tickwork.clock import LATEST
from tickwork.job import MAX_ARGS_DEPTH, TOO_DEEP
from tickwork.store import open_store

pytestmark = pytest.mark.slow  # a tickwork api process per test

HTTP_ARGS = {"url": "https://example.com/hook"}


@pytest.fixture
def client(store_url: str) -> Iterator[Client]:
    """The test's own client on the database the child serves."""
    with Client(open_store(store_url)) as opened:
        yield opened


def api_argv(store_url: str) -> list[str]:
    return ["api", "--db", store_url, "--port", "0"]


def nest(levels: int) -> Any:
    """A JSON value whose lists nest ``levels`` deep."""
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


# -- item 2: args nested too deeply ----------------------------------------------------------


def test_args_nested_256_deep_are_a_400_that_stores_nothing_and_listings_still_answer(
    store_url: str, client: Client
) -> None:
    _, tenant_key = client.create_api_key(tenant="acme")
    _, admin_key = client.create_api_key(tenant="ops", admin=True)
    body = {"task": "http", "args": {**HTTP_ARGS, "json": nest(254)}, "schedule": {"delay": 60}}
    before = counts(client)

    with (
        serving(api_argv(store_url)) as server,
        server.http(tenant_key) as acme,
        server.http(admin_key) as admin,
    ):
        answer = acme.post("/api/v1/jobs", json=body)
        again = acme.post("/api/v1/jobs", json=body)
        listings = [acme.get("/api/v1/jobs"), admin.get("/api/v1/jobs")]

    assert (answer.status_code, again.status_code) == (400, 400), answer.text
    error = error_of(answer)
    assert (error["code"], error["field"]) == ("invalid_args", "args")
    assert f"nested deeper than {MAX_ARGS_DEPTH} levels" in error["message"]
    assert counts(client) == before
    assert [listing.status_code for listing in listings] == [200, 200]


def test_args_nested_to_the_limit_are_accepted_and_read_back_whole(
    store_url: str, client: Client
) -> None:
    _, key = client.create_api_key(tenant="acme")
    args = {**HTTP_ARGS, "json": nest(MAX_ARGS_DEPTH - 2)}  # args and "json" are two levels

    with serving(api_argv(store_url)) as server, server.http(key) as http:
        answer = http.post("/api/v1/jobs", json={"task": "http", "args": args})
        run = http.get("/api/v1/runs").json()["items"][0]

    assert answer.status_code == 201, answer.text
    assert answer.json()["args"] == args
    assert run["args"] == args


def test_a_row_stored_before_todays_checks_breaks_no_listing(
    store_url: str, client: Client
) -> None:
    """Rows that submit refuses today, written with SQL as an older version (or another
    writer) could have: args 600 deep, a name that reverses the page and rings a terminal,
    a one-off job at the last second of year 9999, an interval anchored in year 1, a run
    whose result is a list, and a dead run with a result as odd as the store holds. Every
    listing still answers."""
    _, admin_key = client.create_api_key(tenant="ops", admin=True)
    deep_args = json.dumps({**HTTP_ARGS, "json": nest(600)})
    deep = client.submit("http", args=HTTP_ARGS, delay=3600, name="deep").job
    triggered = client.trigger_job(deep.id)
    late = client.submit("http", args=HTTP_ARGS, at="2030-01-01T00:00:00Z").job
    ancient = client.submit("http", args=HTTP_ARGS, every=60, name="ancient").job
    dead = dead_run(client)
    odd_result = (
        '{"body": "a\\ud800b", "x": NaN, "deep": ' + json.dumps(nest(600)) + "}"
        if store_url.startswith("sqlite:")
        else '{"deep": ' + json.dumps(nest(600)) + "}"  # PostgreSQL holds no NaN, no \ud800
    )
    execute(
        store_url,
        "UPDATE tickwork_jobs SET args = :args WHERE id = :id",
        args=deep_args,
        id=deep.id,
    )
    execute(
        store_url,
        "UPDATE tickwork_runs SET args = :args WHERE job_id = :id",
        args=deep_args,
        id=deep.id,
    )
    execute(
        store_url,
        "UPDATE tickwork_jobs SET name = :name WHERE id = :id",
        name="bell\x07 \u202eevil",
        id=deep.id,
    )
    execute(
        store_url,
        "UPDATE tickwork_jobs SET schedule = :schedule WHERE id = :id",
        schedule='{"kind": "once", "at": "9999-12-31T23:59:59+00:00"}',
        id=late.id,
    )
    execute(
        store_url,
        "UPDATE tickwork_jobs SET schedule = :schedule WHERE id = :id",
        schedule='{"kind": "interval", "every": 60.0, "anchor": "0001-01-01T00:00:00+00:00"}',
        id=ancient.id,
    )
    execute(
        store_url,
        "UPDATE tickwork_runs SET result = :result, args = :args WHERE id = :id",
        result=odd_result,
        args=deep_args,
        id=dead,
    )
    execute(
        store_url,
        "UPDATE tickwork_runs SET result = :result WHERE id = :id",
        result="[1, 2]",  # a result that is no object, which RunOut would refuse
        id=triggered.id,
    )
    reads = [
        "/api/v1/jobs",
        f"/api/v1/jobs/{deep.id}?n=100",
        f"/api/v1/jobs/{late.id}?n=100",
        f"/api/v1/jobs/{ancient.id}?n=100",
        f"/api/v1/jobs/{late.id}/explain",
        f"/api/v1/jobs/{ancient.id}/explain",
        f"/api/v1/jobs/{ancient.id}/explain?at=2026-01-01T00:00:00Z",
        "/api/v1/runs",
        f"/api/v1/runs/{triggered.id}",
        f"/api/v1/runs/{dead}",
        "/api/v1/dead",
        "/",
        "/jobs",
        f"/jobs/{deep.id}",
        f"/jobs/{late.id}?at=9999-12-29T00:00:00Z",
        f"/jobs/{ancient.id}",
        "/dead",
    ]

    with serving(api_argv(store_url)) as server, server.http(admin_key) as admin:
        answers = {path: admin.get(path) for path in reads}
        trigger = admin.post(f"/api/v1/jobs/{deep.id}/trigger")
        retry = admin.post(f"/api/v1/runs/{dead}/retry")
        runs_after = admin.get("/api/v1/runs")
    cli = {
        what: run_tickwork(*argv, "--db", store_url)
        for what, argv in {
            "jobs": ["jobs", "--json"],
            "runs": ["runs", "--json"],
            "dead": ["dead", "--json"],
            "show": ["show", str(deep.id), "--json"],
            "show table": ["show", str(deep.id)],
            "jobs table": ["jobs"],
        }.items()
    }

    assert {path: a.status_code for path, a in answers.items()} == dict.fromkeys(reads, 200)
    assert {what: (r.returncode, r.stderr) for what, r in cli.items()} == dict.fromkeys(
        cli, (0, "")
    )
    assert (trigger.status_code, retry.status_code, runs_after.status_code) == (201, 200, 200)
    shown = answers[f"/api/v1/jobs/{deep.id}?n=100"].json()
    assert shown["args"]["url"] == HTTP_ARGS["url"]
    assert TOO_DEEP in json.dumps(shown["args"])
    assert shown["name"] == "bell\x07 \u202eevil"  # JSON carries it as it is
    assert answers[f"/api/v1/runs/{triggered.id}"].json()["result"] == {"value": [1, 2]}
    fire_times = answers[f"/api/v1/jobs/{ancient.id}?n=100"].json()["next_fire_times"]
    assert len(fire_times) == 100
    listed = json.loads(cli["runs"].stdout)
    assert {run["id"] for run in listed} >= {triggered.id, dead}
    for table in (cli["show table"].stdout, cli["jobs table"].stdout):
        assert "bell[U+0007] [U+202E]evil" in table
        assert "\u202e" not in table
    page = answers[f"/jobs/{deep.id}"].text
    assert "\u202e" not in page
    assert "\x07" not in page


# -- item 3: times at the ends of the calendar -----------------------------------------------


OUT_OF_RANGE = ["9999-12-31T23:59:59+00:00", "0001-01-01T00:00:00+00:00", "1969-07-20T20:17:40Z"]


def test_explain_at_a_time_out_of_range_is_a_400_in_the_api_and_a_page_on_the_dashboard(
    store_url: str, client: Client
) -> None:
    _, key = client.create_api_key(tenant="acme")
    cron = client.submit("http", args=HTTP_ARGS, cron="* * * * *", tenant="acme").job
    every = client.submit("http", args=HTTP_ARGS, every=60, tenant="acme").job
    asked = [(job.id, at) for job in (cron, every) for at in OUT_OF_RANGE]

    with serving(api_argv(store_url)) as server, server.http(key) as http:
        api = [http.get(f"/api/v1/jobs/{job}/explain", params={"at": at}) for job, at in asked]
        pages = [http.get(f"/jobs/{job}", params={"at": at}) for job, at in asked]

    for answer in api:
        assert answer.status_code == 400, answer.text
        error = error_of(answer)
        assert (error["code"], error["field"]) == ("invalid_schedule", "at")
        assert "out of range" in error["message"]
    for page in pages:
        assert page.status_code == 200, page.text
        assert page.headers["content-type"].startswith("text/html")
        assert "is out of range" in page.text


def test_explain_at_the_last_slot_of_the_calendar_answers(store_url: str, client: Client) -> None:
    _, key = client.create_api_key(tenant="acme")
    job = client.submit(
        "http", args=HTTP_ARGS, cron="0 0 * * *", tz="Pacific/Kiritimati", tenant="acme"
    ).job
    last = "9999-12-29T10:00:00Z"  # midnight in Kiritimati (UTC+14), the last before LATEST

    with serving(api_argv(store_url)) as server, server.http(key) as http:
        answer = http.get(f"/api/v1/jobs/{job.id}/explain", params={"at": last})
        page = http.get(f"/jobs/{job.id}", params={"at": last})

    assert answer.status_code == 200, answer.text
    assert "has not reached 10000" not in answer.json()["explanation"]
    assert "9999-12-30T00:00:00+14:00" in answer.json()["explanation"]
    assert page.status_code == 200


def test_a_time_out_of_range_is_refused_at_submit_too(store_url: str, client: Client) -> None:
    _, key = client.create_api_key(tenant="acme")
    schedules: list[dict[str, Any]] = [
        {"at": "9999-12-31T23:59:59+00:00"},
        {"at": "1900-01-01T00:00:00Z"},
        {"every": 60, "anchor": "0001-01-01T00:00:00+00:00"},
        {"every": 60, "anchor": "9999-12-31T00:00:00Z"},
    ]
    before = counts(client)

    with serving(api_argv(store_url)) as server, server.http(key) as http:
        answers = [
            http.post("/api/v1/jobs", json={"task": "http", "args": HTTP_ARGS, "schedule": s})
            for s in schedules
        ]

    for schedule, answer in zip(schedules, answers, strict=True):
        assert answer.status_code == 400, answer.text
        error = error_of(answer)
        assert error["field"] == next(k for k in ("at", "anchor") if k in schedule)
        assert "out of range" in error["message"]
    assert counts(client) == before


# -- item 4: fire times up to the calendar's end ---------------------------------------------


def test_fire_times_of_a_95_year_interval_end_at_the_calendars_end(
    store_url: str, client: Client
) -> None:
    _, key = client.create_api_key(tenant="acme")

    with serving(api_argv(store_url)) as server, server.http(key) as http:
        submitted = http.post(
            "/api/v1/jobs", json={"task": "http", "args": HTTP_ARGS, "schedule": {"every": 3e9}}
        )
        job = http.get(f"/api/v1/jobs/{submitted.json()['id']}", params={"n": 100})
        page = http.get(f"/jobs/{submitted.json()['id']}")

    assert submitted.status_code == 201, submitted.text
    assert job.status_code == 200, job.text
    times = [datetime.fromisoformat(t) for t in job.json()["next_fire_times"]]
    # Every 95 years from now: the list stops short of 100, at the calendar's end.
    assert 80 < len(times) < 100
    assert times == sorted(times)
    assert times[-1] <= LATEST
    assert LATEST - times[-1] < times[-1] - times[-2]
    assert page.status_code == 200


# -- item 5: a NUL after the offset ----------------------------------------------------------


def test_a_control_character_in_a_time_or_cron_is_a_400_naming_the_field(
    store_url: str, client: Client
) -> None:
    _, key = client.create_api_key(tenant="acme")
    cases = [
        ({"at": "2030-01-01T00:00:00+00:00\x00"}, "at"),
        ({"at": "2030-01-01T00:00:00+00:00\x00junk"}, "at"),
        ({"every": 60, "anchor": "2030-01-01T00:00:00+00:00\x00"}, "anchor"),
        ({"every": 60, "anchor": "\x1c2030-01-01T00:00:00Z"}, "anchor"),
        ({"cron": "0\x1c9 * * *"}, "cron"),
    ]
    before = counts(client)

    with serving(api_argv(store_url)) as server, server.http(key) as http:
        answers = [
            http.post("/api/v1/jobs", json={"task": "http", "args": HTTP_ARGS, "schedule": s})
            for s, _ in cases
        ]

    assert [a.status_code for a in answers] == [400] * len(cases), [a.text for a in answers]
    assert [error_of(a)["field"] for a in answers] == [field for _, field in cases]
    assert counts(client) == before
