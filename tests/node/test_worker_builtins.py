"""The built-in tasks on a real worker: ``shell`` (output tails, exit code, environment,
process-group kill) and ``http`` (2xx succeeds, 5xx and 429 retry, 4xx is dead)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.processes import group_alive
from worker_support import DEADLINE, finished, in_state, make_app, running

from tickwork.app import App
from tickwork.job import RunState
from tickwork.store import Store
from tickwork.tasks.builtins import OUTPUT_TAIL_BYTES
from tickwork.testing import wait_until


@pytest.fixture
def app(store: Store) -> Iterator[App]:
    # The test servers listen on loopback, which http runs refuse unless allowed
    # (tests/node/test_http_egress.py is about that refusal).
    application = make_app(store, allow_shell=True, http_allow=("127.0.0.1",))
    yield application
    application.close()


# -- shell ----------------------------------------------------------------------------------


def test_shell_keeps_exit_code_and_output_and_gives_the_command_its_run(
    app: App, store: Store
) -> None:
    script = 'echo "$TICKWORK_RUN_ID $TICKWORK_JOB_ID $TICKWORK_ATTEMPT $TICKWORK_SCHEDULED_FOR"'
    job = app.submit("shell", {"argv": ["sh", "-c", script + "; echo oops >&2"]})
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.SUCCEEDED
    assert run.result is not None
    assert run.result["exit_code"] == 0
    assert run.result["stderr"] == "oops\n"
    run_id, job_id, attempt, scheduled_for = run.result["stdout"].split()
    assert (int(run_id), int(job_id), int(attempt)) == (run.id, job.id, 1)
    assert scheduled_for == run.scheduled_for.isoformat()
    assert scheduled_for.endswith("+00:00")


def test_shell_passes_cwd_and_env(app: App, store: Store, tmp_path: Path) -> None:
    job = app.submit(
        "shell",
        {"argv": ["sh", "-c", 'pwd; echo "$GREETING"'], "cwd": str(tmp_path),
         "env": {"GREETING": "hello"}},
    )  # fmt: skip
    with running(app.worker()):
        run = finished(store, job)

    assert run.result is not None
    assert run.result["stdout"] == f"{tmp_path.resolve()}\nhello\n"


def test_shell_keeps_only_the_tail_of_long_output(app: App, store: Store) -> None:
    code = "import sys; sys.stdout.write('x' * 100000 + 'END')"
    job = app.submit("shell", {"argv": [sys.executable, "-c", code]})
    with running(app.worker()):
        run = finished(store, job)

    assert run.result is not None
    assert len(run.result["stdout"]) == OUTPUT_TAIL_BYTES
    assert run.result["stdout"].endswith("xEND")


def test_a_non_zero_exit_fails_the_attempt_and_keeps_the_output(app: App, store: Store) -> None:
    job = app.submit(
        "shell", {"argv": ["sh", "-c", "echo partial; echo bad disk >&2; exit 3"]}, max_attempts=1
    )
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.DEAD
    assert run.error == "command exited with code 3: bad disk"
    assert run.result == {"exit_code": 3, "stdout": "partial\n", "stderr": "bad disk\n"}


def test_a_cancelled_shell_run_kills_the_whole_process_group(
    app: App, store: Store, tmp_path: Path
) -> None:
    marker = tmp_path / "finished"
    background = tmp_path / "background"
    group = tmp_path / "group"
    # The shell leads its own process group: its pid is the group's id.
    script = f"echo $$ > {group}; (sleep 5; touch {background}) & sleep 5; touch {marker}"
    job = app.submit("shell", {"argv": ["sh", "-c", script]})
    worker = app.worker()
    with running(worker):
        run = in_state(store, job, RunState.RUNNING)
        pgid = int(
            wait_until(lambda: group.read_text().strip() if group.exists() else None, DEADLINE)
        )
        store.cancel_run(run.id)
        wait_until(lambda: worker.executor.busy == 0, DEADLINE)  # the handler saw the kill
    # Nothing of the group is left to write a file later.
    wait_until(lambda: not group_alive(pgid), DEADLINE, what=f"process group {pgid} to end")

    assert not marker.exists()
    assert not background.exists()
    assert store.get_run(run.id).state is RunState.CANCELLED


def test_a_shell_run_past_its_timeout_is_killed(app: App, store: Store, tmp_path: Path) -> None:
    marker = tmp_path / "finished"
    group = tmp_path / "group"
    script = f"echo $$ > {group}; sleep 5; touch {marker}"
    job = app.submit("shell", {"argv": ["sh", "-c", script]}, timeout=0.2, max_attempts=1)
    worker = app.worker()
    with running(worker):
        run = finished(store, job)
        wait_until(lambda: worker.executor.busy == 0, DEADLINE)
    if group.exists():  # else the shell was killed before its first command
        pgid = int(group.read_text())
        wait_until(lambda: not group_alive(pgid), DEADLINE, what=f"process group {pgid} to end")

    assert run.state is RunState.DEAD
    assert run.error == "timed out after 0.2 s"
    assert not marker.exists()


# -- http -----------------------------------------------------------------------------------


class Recorder(BaseHTTPRequestHandler):
    """Answers ``/status/N`` with status N; records every request."""

    requests: list[dict[str, Any]]

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.requests.append(  # type: ignore[attr-defined]
            {"method": self.command, "path": self.path, "headers": dict(self.headers),
             "body": body}
        )  # fmt: skip
        status = int(self.path.rsplit("/", 1)[-1])
        payload = json.dumps({"path": self.path}).encode()
        self.send_response(status)
        if status == 429:
            self.send_header("Retry-After", "3600")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    httpd.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def url(server: ThreadingHTTPServer, status: int) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/status/{status}"


def test_http_2xx_succeeds_with_status_and_body(
    app: App, store: Store, server: ThreadingHTTPServer
) -> None:
    job = app.submit("http", {"url": url(server, 201), "json": {"hello": "world"}})
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.SUCCEEDED
    assert run.result == {"status": 201, "body": '{"path": "/status/201"}'}
    (request,) = server.requests  # type: ignore[attr-defined]
    assert request["method"] == "POST"
    assert json.loads(request["body"]) == {"hello": "world"}
    assert request["headers"]["X-Tickwork-Run-Id"] == str(run.id)
    assert request["headers"]["Content-Type"] == "application/json"


def test_http_4xx_is_dead_at_once(app: App, store: Store, server: ThreadingHTTPServer) -> None:
    job = app.submit("http", {"url": url(server, 404)}, max_attempts=5)
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.DEAD
    assert run.attempt == 1
    assert run.result is not None
    assert run.result["status"] == 404
    assert run.error is not None
    assert "HTTP 404" in run.error


def test_http_5xx_is_retried(app: App, store: Store, server: ThreadingHTTPServer) -> None:
    job = app.submit("http", {"url": url(server, 503)}, max_attempts=2, backoff=(0.01, 0.02))
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.DEAD
    assert run.attempt == 2
    assert len(server.requests) == 2  # type: ignore[attr-defined]


def test_http_429_waits_as_long_as_retry_after_says(
    app: App, store: Store, server: ThreadingHTTPServer
) -> None:
    job = app.submit("http", {"url": url(server, 429)})
    with running(app.worker()):
        run = in_state(store, job, RunState.FAILED)
        now = store.now()

    assert run.run_at > now + timedelta(minutes=59)


def test_http_connection_refused_is_retried(app: App, store: Store) -> None:
    closed = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    port = closed.server_address[1]
    closed.server_close()
    job = app.submit("http", {"url": f"http://127.0.0.1:{port}/"}, max_attempts=2,
                     backoff=(0.01, 0.02))  # fmt: skip
    with running(app.worker()):
        run = finished(store, job)

    assert run.state is RunState.DEAD
    assert run.attempt == 2
    assert run.error is not None
    assert "refused" in run.error.lower()
