"""Egress from ``http`` runs through the real ``tickwork run`` process (Issue 11, SSRF): a
tenant key cannot make a worker fetch a loopback-only service and read it back, the
operator widens that with ``--http-allow``, only an admin key may send ``allow_private``,
and the worker and run commands check their ``--http-allow`` values."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_support import child_env, counts, error_of, run_tickwork, serving

from tickwork.client import Client
from tickwork.store import open_store
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow

SECRET = "the-secret-only-loopback-may-read"
RUN_DEADLINE = 30.0
"""Seconds a run may take to finish on the child's worker (a loaded CI box)."""
LOG_DEADLINE = 30.0
FINISHED = {"succeeded", "dead", "cancelled"}


class SecretService(BaseHTTPRequestHandler):
    """A service that trusts whoever reaches it on loopback; records every request."""

    def do_GET(self) -> None:
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        body = SECRET.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def secret() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), SecretService)
    httpd.hits = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture
def client(store_url: str) -> Iterator[Client]:
    with Client(open_store(store_url)) as opened:
        yield opened


def secret_url(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/secret"


def run_argv(store_url: str, *extra: str) -> list[str]:
    return ["run", "--db", store_url, "--port", "0", *extra]


def finished_run(web: httpx.Client, job_id: int) -> dict[str, Any]:
    """The job's only run, read through ``GET /api/v1/runs/{id}`` once it is finished."""

    def finished() -> dict[str, Any] | None:
        (listed,) = web.get("/api/v1/runs", params={"job": job_id}).json()["items"]
        return listed if listed["state"] in FINISHED else None

    listed = wait_until(finished, RUN_DEADLINE, what=f"job {job_id}'s run finished")
    answer = web.get(f"/api/v1/runs/{listed['id']}")
    assert answer.status_code == 200
    run: dict[str, Any] = answer.json()
    return run


def test_a_tenant_cannot_read_a_loopback_service_through_an_http_run(
    store_url: str, client: Client, secret: ThreadingHTTPServer
) -> None:
    _, key = client.create_api_key(tenant="acme")
    with serving(run_argv(store_url)) as server, server.http(key) as acme:
        submitted = acme.post(
            "/api/v1/jobs",
            json={"task": "http", "args": {"url": secret_url(secret)}, "max_attempts": 3},
        )
        run = finished_run(acme, submitted.json()["id"])
        served = "".join(server.err)

    assert submitted.status_code == 201
    assert run["state"] == "dead"
    assert run["attempt"] == 1  # not retried
    assert "refused destination 127.0.0.1 (loopback)" in run["error"]
    assert "--http-allow" in run["error"]
    assert SECRET not in json.dumps(run)
    assert secret.hits == []  # type: ignore[attr-defined]
    assert served.count("refused destination 127.0.0.1") == 1  # logged once


def test_tickwork_run_with_http_allow_lets_runs_reach_what_it_names(
    store_url: str, client: Client, secret: ThreadingHTTPServer
) -> None:
    _, key = client.create_api_key(tenant="acme")
    argv = run_argv(store_url, "--http-allow", "127.0.0.1")
    with serving(argv) as server, server.http(key) as acme:
        submitted = acme.post(
            "/api/v1/jobs", json={"task": "http", "args": {"url": secret_url(secret)}}
        )
        run = finished_run(acme, submitted.json()["id"])
        ready = "".join(server.out)

    assert run["state"] == "succeeded"
    assert run["result"] == {"status": 200, "body": SECRET}  # the operator allowed it
    assert "http-allow: 127.0.0.1" in ready


def test_only_an_admin_key_may_submit_an_http_job_with_allow_private(
    store_url: str, client: Client, secret: ThreadingHTTPServer
) -> None:
    _, tenant_key = client.create_api_key(tenant="acme")
    _, admin_key = client.create_api_key(tenant="ops", admin=True)
    args = {"url": secret_url(secret), "allow_private": True}
    job = {"task": "http", "args": args}
    before = counts(client)

    with serving(run_argv(store_url)) as server, server.http(tenant_key) as acme:
        refused = {
            value: acme.post("/api/v1/jobs", json={**job, "args": {**args, "allow_private": value}})
            for value in (True, False, "yes")
        }
        stored_after_refusals = counts(client)
        with server.http(admin_key) as admin:
            wrong_type = admin.post(
                "/api/v1/jobs", json={**job, "args": {**args, "allow_private": 1}}
            )
            accepted = admin.post("/api/v1/jobs", json={**job, "tenant": "acme"})
            run = finished_run(acme, accepted.json()["id"])

    for answer in refused.values():
        assert answer.status_code == 403
        error = error_of(answer)
        assert error["code"] == "forbidden"
        assert error["field"] == "args.allow_private"
        assert "admin key" in error["message"]
    assert stored_after_refusals == before
    assert wrong_type.status_code == 400
    assert error_of(wrong_type)["code"] == "invalid_args"
    assert accepted.status_code == 201
    assert run["state"] == "succeeded"  # the admin lifted the policy for this job
    assert run["result"] == {"status": 200, "body": SECRET}


# -- the --http-allow flag ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["worker", "--http-allow", "10.0.0.0/33"], "--http-allow '10.0.0.0/33'"),
        (["worker", "--http-allow", "127.0.0.1,10.0.0.1/8"], "has host bits set"),
        (["worker", "--http-allow", " , "], "names nothing"),
        (["run", "--no-api", "--http-allow", "http://intranet"], "neither a network"),
    ],
)
def test_a_bad_http_allow_value_exits_2_with_one_line_and_starts_nothing(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    db = tmp_path / "never.db"

    done = run_tickwork(*argv, "--db", f"sqlite:///{db}")

    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("tickwork: error: ")
    assert message in line
    assert not db.exists()


def test_a_bad_http_allow_in_the_environment_exits_2_too(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    done = subprocess.run(
        [sys.executable, "-m", "tickwork", "worker", "--db", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**child_env(), "TICKWORK_HTTP_ALLOW": "localhost,300.0.0.0/8"},
        check=False,
    )

    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "'300.0.0.0/8'" in line


def test_the_worker_names_its_http_allow_in_its_start_line(store_url: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tickwork", "worker", "--db", store_url,
         "--http-allow", "127.0.0.1", "--http-allow", "10.0.0.0/8,*.internal.example"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        start_line = ""
        deadline = time.monotonic() + LOG_DEADLINE
        while not start_line:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, "the worker exited before its start line"
            if " worker node=" in line:
                start_line = line
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=LOG_DEADLINE) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(5)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

    assert "http-allow=127.0.0.1,10.0.0.0/8,*.internal.example" in start_line
