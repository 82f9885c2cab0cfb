"""Bad input on every endpoint gets the right 4xx, a precise error envelope naming the
field, and writes nothing (the store's jobs and runs are compared before and after)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from api_support import bearer, dead_run, error_of
from fastapi.testclient import TestClient

from tickwork.client import Client
from tickwork.records import to_json
from tickwork.store import Store
from tickwork.web.app import create_app
from tickwork.web.errors import MAX_BODY_BYTES

HTTP_ARGS = {"url": "https://example.com/hook"}
UNKNOWN = 987654


@dataclass(frozen=True)
class World:
    web: TestClient
    client: Client
    job_id: int  # an active cron job
    run_id: int  # a dead run
    admin_key: str

    def snapshot(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Every job and run, whole: a rejected request must leave both as they were."""
        jobs = [to_json(job) for job in self.client.list_jobs(limit=1000).items]
        runs = [to_json(run) for run in self.client.list_runs(limit=1000).items]
        return jobs, runs


@pytest.fixture
def world(store: Store) -> Iterator[World]:
    client = Client(store)
    _, key = client.create_api_key(tenant="ops", admin=True)
    job = client.submit("http", args=HTTP_ARGS, cron="*/5 * * * *", name="existing")
    run_id = dead_run(client)
    with TestClient(create_app(client, open_access=False), headers=bearer(key)) as web:
        yield World(web, client, job.job.id, run_id, key)


def job_body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"task": "http", "args": HTTP_ARGS}
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def rejected(world: World, method: str, path: str, status: int, **request: Any) -> dict[str, Any]:
    """Send the request; check its status, its envelope and that nothing changed."""
    before = world.snapshot()
    answer = world.web.request(method, path, **request)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    error = error_of(answer)
    assert world.snapshot() == before
    return error


# -- submitting a job ----------------------------------------------------------------------------

SUBMIT_CASES = {
    "invalid cron": (job_body(schedule={"cron": "61 * * * *"}), 400, "invalid_cron", "cron"),
    "cron with too few fields": (job_body(schedule={"cron": "* *"}), 400, "invalid_cron", "cron"),
    "unknown time zone": (
        job_body(schedule={"cron": "* * * * *", "tz": "Mars/Olympus_Mons"}),
        400,
        "invalid_timezone",
        "tz",
    ),
    "unknown task": (job_body(task="no_such_task"), 400, "unknown_task", "task"),
    "empty task": (job_body(task=""), 400, "unknown_task", "task"),
    "task not a string": (job_body(task=42), 422, "unprocessable", "task"),
    "no task": ({"args": HTTP_ARGS}, 422, "unprocessable", "task"),
    "args a list": (job_body(args=[1, 2]), 422, "unprocessable", "args"),
    "args a string": (job_body(args='{"url": "x"}'), 422, "unprocessable", "args"),
    "args a number": (job_body(args=3), 422, "unprocessable", "args"),
    "args over 256 KiB": (
        job_body(args={"url": "https://example.com", "headers": {"x": "a" * 300_000}}),
        400,
        "invalid_args",
        "args",
    ),
    "args with a NUL character": (
        job_body(args={"url": "https://example.com", "headers": {"x": "a\x00b"}}),
        400,
        "invalid_args",
        "args",
    ),
    "args the task does not take": (
        job_body(args={"url": "https://example.com", "bogus": 1}),
        400,
        "invalid_args",
        "args",
    ),
    "args missing what the task needs": (job_body(args={}), 400, "invalid_args", "args"),
    "two schedules": (
        job_body(schedule={"cron": "* * * * *", "every": 60}),
        400,
        "validation_error",
        "schedule",
    ),
    "a zone without cron": (
        job_body(schedule={"every": 60, "tz": "UTC"}),
        400,
        "validation_error",
        "tz",
    ),
    "interval below a second": (
        job_body(schedule={"every": 0.5}),
        400,
        "invalid_schedule",
        "every",
    ),
    "negative delay": (job_body(schedule={"delay": -5}), 422, "unprocessable", "schedule.delay"),
    "delay of a thousand years": (
        job_body(schedule={"delay": 1000 * 366 * 86400}),
        422,
        "unprocessable",
        "schedule.delay",
    ),
    "at not a time": (job_body(schedule={"at": "tomorrow"}), 400, "invalid_schedule", "at"),
    "at without an offset": (
        job_body(schedule={"at": "2030-01-01T09:00:00"}),
        400,
        "invalid_schedule",
        "at",
    ),
    "unknown schedule field": (
        job_body(schedule={"cron": "* * * * *", "timezone": "UTC"}),
        422,
        "unprocessable",
        "schedule.timezone",
    ),
    "unknown field": (job_body(retries=3), 422, "unprocessable", "retries"),
    "unknown misfire policy": (job_body(misfire="sometimes"), 422, "unprocessable", "misfire"),
    "unknown overlap policy": (job_body(overlap="maybe"), 422, "unprocessable", "overlap"),
    "priority out of range": (job_body(priority=5000), 422, "unprocessable", "priority"),
    "max_attempts zero": (job_body(max_attempts=0), 422, "unprocessable", "max_attempts"),
    "max_attempts true": (job_body(max_attempts=True), 422, "unprocessable", "max_attempts"),
    "timeout as text": (job_body(timeout="10m"), 422, "unprocessable", "timeout"),
    "timeout zero": (job_body(timeout=0), 400, "validation_error", "timeout"),
    "name too long": (job_body(name="n" * 201), 422, "unprocessable", "name"),
    "name with a newline": (job_body(name="a\nb"), 400, "validation_error", "name"),
    "a name already taken": (
        job_body(name="existing", tenant="default"),
        400,
        "validation_error",
        "name",
    ),
    "queue blank": (job_body(queue=" "), 400, "validation_error", "queue"),
}


@pytest.mark.parametrize("case", list(SUBMIT_CASES))
def test_a_bad_job_is_refused_and_nothing_is_written(world: World, case: str) -> None:
    body, status, code, field = SUBMIT_CASES[case]

    error = rejected(world, "POST", "/api/v1/jobs", status, json=body)

    assert (error["code"], error.get("field")) == (code, field)


RAW_BODIES = {
    "not JSON": (b"{task: http}", 400, "invalid_json"),
    "truncated JSON": (b'{"task": "http", "args": {', 400, "invalid_json"),
    "NaN": (b'{"task": "http", "args": {}, "schedule": {"delay": NaN}}', 422, "unprocessable"),
    "a JSON array": (b'[{"task": "http"}]', 422, "unprocessable"),
    "a JSON string": (b'"http"', 422, "unprocessable"),
    "empty": (b"", 422, "unprocessable"),
    "a lone surrogate in args": (
        b'{"task": "http", "args": {"url": "https://x", "headers": {"a": "\\ud800"}}}',
        400,
        "invalid_args",
    ),
    "nested too deeply": (
        b'{"task": "http", "args": {"json": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
        400,
        "invalid_json",
    ),
}


@pytest.mark.parametrize("case", list(RAW_BODIES))
def test_a_body_that_is_not_a_job_is_refused(world: World, case: str) -> None:
    content, status, code = RAW_BODIES[case]

    error = rejected(
        world,
        "POST",
        "/api/v1/jobs",
        status,
        content=content,
        headers={"content-type": "application/json"},
    )

    assert error["code"] == code


def test_a_body_not_declared_as_json_is_415(world: World) -> None:
    content = json.dumps(job_body()).encode()

    error = rejected(
        world, "POST", "/api/v1/jobs", 415, content=content, headers={"content-type": "text/plain"}
    )

    assert error["code"] == "unsupported_media_type"
    assert "application/json" in error["message"]


def test_an_oversized_body_is_413_before_it_is_read(world: World) -> None:
    big = json.dumps(job_body(args={"url": "https://x", "json": "a" * MAX_BODY_BYTES}))

    error = rejected(
        world,
        "POST",
        "/api/v1/jobs",
        413,
        content=big.encode(),
        headers={"content-type": "application/json"},
    )

    assert error == {
        "code": "body_too_large",
        "message": error["message"],
        "field": "body",
    }
    assert str(MAX_BODY_BYTES) in error["message"]


def test_an_oversized_chunked_body_is_413(world: World) -> None:
    chunk = b" " * 65536

    def body() -> Iterator[bytes]:
        yield b'{"task": "http", "args": {"url": "https://x"}'
        for _ in range(MAX_BODY_BYTES // len(chunk) + 2):
            yield chunk
        yield b"}"

    error = rejected(
        world,
        "POST",
        "/api/v1/jobs",
        413,
        content=body(),
        headers={"content-type": "application/json"},
    )

    assert error["code"] == "body_too_large"


def test_a_body_just_under_the_limit_is_read(world: World) -> None:
    padding = " " * (MAX_BODY_BYTES - 200)
    content = (json.dumps(job_body(schedule={"delay": 60})) + padding).encode()

    answer = world.web.post(
        "/api/v1/jobs", content=content, headers={"content-type": "application/json"}
    )

    assert answer.status_code == 201, answer.text


# -- ids, filters and commands -----------------------------------------------------------------

JOB_ENDPOINTS = [
    ("GET", "/api/v1/jobs/{}"),
    ("POST", "/api/v1/jobs/{}/cancel"),
    ("POST", "/api/v1/jobs/{}/pause"),
    ("POST", "/api/v1/jobs/{}/resume"),
    ("POST", "/api/v1/jobs/{}/trigger"),
    ("GET", "/api/v1/jobs/{}/explain"),
    ("GET", "/api/v1/jobs/{}/ledger"),
]
RUN_ENDPOINTS = [
    ("GET", "/api/v1/runs/{}"),
    ("POST", "/api/v1/runs/{}/retry"),
    ("POST", "/api/v1/runs/{}/cancel"),
]


@pytest.mark.parametrize(("method", "path"), JOB_ENDPOINTS)
def test_an_unknown_job_is_404(world: World, method: str, path: str) -> None:
    error = rejected(world, method, path.format(UNKNOWN), 404)

    assert error == {"code": "job_not_found", "message": f"job {UNKNOWN} not found"}


@pytest.mark.parametrize(("method", "path"), RUN_ENDPOINTS)
def test_an_unknown_run_is_404(world: World, method: str, path: str) -> None:
    error = rejected(world, method, path.format(UNKNOWN), 404)

    assert error == {"code": "run_not_found", "message": f"run {UNKNOWN} not found"}


@pytest.mark.parametrize(("method", "path"), JOB_ENDPOINTS + RUN_ENDPOINTS)
@pytest.mark.parametrize("bad_id", ["abc", "0", str(2**63)])
def test_an_id_that_is_no_id_is_422_naming_it(
    world: World, method: str, path: str, bad_id: str
) -> None:
    error = rejected(world, method, path.format(bad_id), 422)

    assert error["field"] in ("job_id", "run_id")


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/v1/jobs", {"state": "sleeping"}, "state"),
        ("/api/v1/jobs", {"limit": 0}, "limit"),
        ("/api/v1/jobs", {"limit": 1001}, "limit"),
        ("/api/v1/jobs", {"after": -1}, "after"),
        ("/api/v1/jobs", {"after": "x"}, "after"),
        ("/api/v1/jobs", {"task": "a\x00b"}, "task"),
        ("/api/v1/runs", {"state": "asleep"}, "state"),
        ("/api/v1/runs", {"job": "x"}, "job"),
        ("/api/v1/runs", {"limit": "many"}, "limit"),
        ("/api/v1/dead", {"after": str(2**64)}, "after"),
        ("/api/v1/jobs/{job}", {"n": 0}, "n"),
        ("/api/v1/jobs/{job}/ledger", {"limit": 5000}, "limit"),
        ("/api/v1/jobs/{job}/explain", {"at": "a\x00"}, "at"),
    ],
)
def test_a_bad_filter_is_422_naming_it(
    world: World, path: str, params: dict[str, Any], field: str
) -> None:
    error = rejected(world, "GET", path.format(job=world.job_id), 422, params=params)

    assert error["field"] == field


@pytest.mark.parametrize("at", ["yesterday", "2026-13-01T09:00", "2026-12-01T25:00Z"])
def test_explain_at_a_time_that_is_no_time_is_400(world: World, at: str) -> None:
    error = rejected(world, "GET", f"/api/v1/jobs/{world.job_id}/explain", 400, params={"at": at})

    assert error["field"] == "at"


@pytest.mark.parametrize("bad_id", ["-3", "1.5", "9" * 40])
def test_other_ids_that_are_no_ids_are_422(world: World, bad_id: str) -> None:
    error = rejected(world, "POST", f"/api/v1/runs/{bad_id}/retry", 422)

    assert error["field"] == "run_id"


@pytest.mark.parametrize("header", ["Bearer garbage", "Basic b3BzOnNlY3JldA==", "tw_abc"])
def test_a_malformed_authorization_header_is_401(world: World, header: str) -> None:
    error = rejected(world, "GET", "/api/v1/jobs", 401, headers={"Authorization": header})

    assert error["code"] == "unauthorized"


def test_an_unknown_path_is_404_and_a_wrong_method_405(world: World) -> None:
    missing = rejected(world, "GET", "/api/v1/nothing-here", 404)
    wrong = rejected(world, "DELETE", f"/api/v1/jobs/{world.job_id}", 405)

    assert missing["code"] == "not_found"
    assert wrong["code"] == "method_not_allowed"


# -- keys ------------------------------------------------------------------------------------------

EVERY_ENDPOINT = [
    ("POST", "/api/v1/jobs"),
    ("GET", "/api/v1/jobs"),
    *JOB_ENDPOINTS,
    ("GET", "/api/v1/runs"),
    *RUN_ENDPOINTS,
    ("GET", "/api/v1/dead"),
    ("GET", "/api/v1/stats"),
    ("GET", "/api/v1/cluster"),
    ("GET", "/metrics"),
]


@pytest.mark.parametrize(("method", "path"), EVERY_ENDPOINT)
@pytest.mark.parametrize("key", [None, "tw_zzzzzzzz_" + "Z" * 43])
def test_every_endpoint_refuses_a_missing_or_wrong_key_with_401(
    world: World, method: str, path: str, key: str | None
) -> None:
    headers = {"Authorization": f"Bearer {key}" if key else ""}
    if key is None:
        world.web.headers.pop("Authorization")
        headers = {}
    target = path.format(world.job_id if "jobs" in path else world.run_id)
    body = job_body(schedule={"delay": 60}) if path == "/api/v1/jobs" else None

    error = rejected(world, method, target, 401, headers=headers, json=body)

    assert error["code"] == "unauthorized"
