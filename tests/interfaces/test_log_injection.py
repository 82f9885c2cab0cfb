"""No caller can forge a log line or drive the terminal of whoever reads the log: every
value a caller chose (a request's path, query and headers, a job's name, queue and tenant,
an ``http`` job's URL, an error's text) is written with its control characters escaped in
the text format, and intact but escaped in the JSON format, whichever logger writes it
(tickwork's or uvicorn's) and whichever command (``api``, ``worker``, ``run``).

First the formatters themselves, over every kind of value a record carries; then real
``tickwork api``, ``tickwork worker`` and ``tickwork run`` processes, whose stderr is read
as bytes."""

from __future__ import annotations

import io
import json
import logging
import re
import socket
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from api_support import execute
from log_support import Process, tickwork

from tickwork.cli.serve import configure_logging
from tickwork.client import Client
from tickwork.errors import ValidationError
from tickwork.job import RunState
from tickwork.store import open_store
from tickwork.testing import wait_until

FORGED = "2030-01-01T00:00:00.000Z CRITICAL tickwork.web: FORGED"
"""A line a forger would like the log to have: it reads like one of tickwork's own."""
EVIL = f"x\n{FORGED}\x1b[2J\r\x85\u2028\u202e\x7f"
"""A value with every way to end a line or drive a terminal: LF (then the forged line),
ESC (clear the screen), CR (back to the line's start), NEL (C1), LINE SEPARATOR, a
bidirectional override and DEL."""
ESCAPED = ["\\n2030-01-01T00:00:00.000Z CRITICAL", "\\x1b[2J", "\\r", "\\x85", "\\u2028",
           "\\u202e", "\\x7f"]  # fmt: skip
"""How EVIL reads in the text format."""
EVIL_ON_ONE_LINE = EVIL.replace("\n", "")
"""EVIL without its line feed: what a value logged as its first line only (a run's error)
can still carry. CR, NEL and LINE SEPARATOR end a line for a terminal or ``splitlines``."""
FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""What no log output may hold raw (a line feed only ends a record, or a traceback line)."""
SECRET = "s3cr3t-token"


def is_dead(client: Client, run_id: int) -> bool:
    return client.get_run(run_id).state is RunState.DEAD


# -- what the output must look like ------------------------------------------------------------


def check_text(output: str, *, must_show: int = 1) -> None:
    """Text output: nothing raw that ends a line or drives a terminal, no line that starts
    with the forged one, and EVIL shown escaped (``must_show`` times at least)."""
    assert not FORBIDDEN.search(output), repr(FORBIDDEN.search(output))
    lines = output.split("\n")
    assert not [line for line in lines if line.startswith(FORGED[:30])], output
    for escaped in ESCAPED:
        assert output.count(escaped) >= must_show, (escaped, output)
    assert SECRET not in output


def intact(records: list[dict[str, Any]], value: str) -> int:
    """How many values of the JSON records hold ``value`` as it was."""
    return sum(value in text for record in records for text in _texts(record))


def check_json(output: str, *, must_show: int = 1) -> list[dict[str, Any]]:
    """JSON output: one object a line, nothing raw in the bytes that ends a line (for
    ``splitlines`` too) or drives a terminal, and EVIL intact inside the values."""
    assert not FORBIDDEN.search(output), repr(FORBIDDEN.search(output))
    records = [json.loads(line) for line in output.splitlines() if line]
    assert len(records) == len(output.strip("\n").split("\n"))
    assert intact(records, EVIL) >= must_show, output
    assert SECRET not in output
    return records


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)


# -- the formatters, over every kind of value ----------------------------------------------------


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """configure_logging's handler, writing to a buffer; the ``tickwork`` logger is put
    back afterwards."""
    logger = logging.getLogger("tickwork")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    buffer = io.StringIO()
    yield buffer
    logger.handlers[:], logger.level, logger.propagate = saved


def use_format(buffer: io.StringIO, fmt: str) -> None:
    configure_logging("DEBUG", fmt)
    (handler,) = logging.getLogger("tickwork").handlers
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(buffer)


FIELDS = ["path", "query", "header", "job name", "queue", "tenant", "url", "error text"]


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("field", FIELDS)
def test_a_value_in_a_log_argument_cannot_start_a_line(
    captured: io.StringIO, fmt: str, field: str
) -> None:
    use_format(captured, fmt)

    logging.getLogger("tickwork.web").warning("%s=%s status=%d", field, EVIL, 400)
    logging.getLogger("tickwork.worker").info("repr of the %s: %r", field, EVIL)

    if fmt == "text":
        check_text(captured.getvalue(), must_show=1)
        assert captured.getvalue().count("\n") == 2
    else:
        (first, second) = check_json(captured.getvalue())
        assert first["msg"] == f"{field}={EVIL} status=400"
        assert second["msg"] == f"repr of the {field}: {EVIL!r}"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_message_built_before_logging_cannot_start_a_line(
    captured: io.StringIO, fmt: str
) -> None:
    use_format(captured, fmt)

    logging.getLogger("tickwork.web").info(f"job name {EVIL} queue {EVIL}")

    if fmt == "text":
        check_text(captured.getvalue(), must_show=2)
    else:
        (record,) = check_json(captured.getvalue(), must_show=1)
        assert record["msg"] == f"job name {EVIL} queue {EVIL}"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_tenant_in_the_run_context_cannot_start_a_line(captured: io.StringIO, fmt: str) -> None:
    use_format(captured, fmt)
    run = {"run_id": 1, "job_id": 2, "attempt": 1, "tenant": EVIL,
           "run_context": f" [run=1 job=2 attempt=1 tenant={EVIL}]"}  # fmt: skip

    logging.getLogger("tickwork.task.charge").info("charging", extra=run)

    if fmt == "text":
        check_text(captured.getvalue())
    else:
        (record,) = check_json(captured.getvalue())
        assert record["tenant"] == EVIL


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_traceback_keeps_its_lines_but_not_the_lines_its_message_would_add(
    captured: io.StringIO, fmt: str
) -> None:
    use_format(captured, fmt)

    try:
        try:
            raise ValidationError(f"queue {EVIL} is no queue", field="queue")
        except ValidationError as exc:
            exc.add_note(f"note: tenant {EVIL}")
            raise RuntimeError(f"while submitting {EVIL}") from exc
    except RuntimeError:
        logging.getLogger("tickwork.web").exception("POST /api/v1/jobs: unexpected error")

    output = captured.getvalue()
    if fmt == "text":
        check_text(output, must_show=3)
        lines = output.rstrip("\n").split("\n")
        assert lines[1] == "Traceback (most recent call last):"
        assert any(line.startswith('  File "') for line in lines)
        assert "The above exception was the direct cause of the following exception:" in lines
        exception_lines = [line for line in lines if line.startswith(("tickwork.errors.", "Run"))]
        assert len(exception_lines) == 2, output
        assert all("\\n2030-01-01" in line for line in exception_lines)
    else:
        (record,) = check_json(output)
        assert f"queue {EVIL} is no queue" in record["exc"]
        assert f"note: tenant {EVIL}" in record["exc"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_uvicorns_lines_go_through_the_same_formatter(captured: io.StringIO, fmt: str) -> None:
    from tickwork.cli.api import _route_uvicorn_logs

    use_format(captured, fmt)
    theirs = logging.getLogger("uvicorn")
    saved = (theirs.handlers[:], theirs.level, theirs.propagate)
    try:
        _route_uvicorn_logs()
        logging.getLogger("uvicorn.error").warning("Invalid HTTP request received: %s", EVIL)
    finally:
        theirs.handlers[:], theirs.level, theirs.propagate = saved

    if fmt == "text":
        check_text(captured.getvalue())
    else:
        check_json(captured.getvalue())


# -- real processes ------------------------------------------------------------------------------


def started_api(process: Process) -> str:
    """The URL the ``tickwork api`` serves, once its log says it serves."""
    found: list[str] = []

    def serving() -> bool:
        match = re.search(r"serve url=(http://[0-9a-z.:\[\]]+)", process.output())
        found[:] = [match.group(1)] if match else []
        return bool(found) or process.process.poll() is not None

    wait_until(serving, 30, what="the API serving")
    assert found, process.output()
    return found[0]


def send_raw(url: str, request: bytes) -> bytes:
    """``request`` as raw bytes on a new connection; what came back."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def request(url: str, method: str, target: bytes, *headers: bytes) -> bytes:
    host = urlsplit(url).netloc.encode()
    head = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: " + host,
            b"Connection: close", b"Content-Length: 0", *headers]  # fmt: skip
    return send_raw(url, b"\r\n".join(head) + b"\r\n\r\n")


EVIL_IN_URL = quote(EVIL, safe="").encode()
EVIL_IN_HEADER = b"http://evil.example/\x1b[2J\x85\x9b31m"
"""What a header can carry: no CR or LF (HTTP ends the header there), but ESC, and bytes
above 0x7F, which a server reads as Latin-1: C1 controls (NEL, CSI)."""


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_request_cannot_forge_a_line_of_the_apis_log(tmp_path: Path, fmt: str) -> None:
    url = f"sqlite:///{tmp_path / 'tickwork.db'}"
    Client(open_store(url)).close()
    # Open (no key ever created, loopback): a cross-site command gets to its refusal.
    argv = ["api", "--db", url, "--port", "0", "--log-format", fmt, "--log-level", "DEBUG"]
    with tickwork(tmp_path, *argv) as api:
        base = started_api(api)
        path = request(base, "GET", b"/" + EVIL_IN_URL + b"?q=" + EVIL_IN_URL)
        cross = request(base, "POST", b"/api/v1/runs/1/retry",
                        b"Origin: " + EVIL_IN_HEADER, b"Referer: " + EVIL_IN_HEADER)  # fmt: skip
        broken = send_raw(base, b"GET / HTTP/1.1\r\nHost: x\r\nBad\x1b\x85 Header\r\n\r\n")
        time.sleep(0.5)
    output = api.output()

    assert path.startswith(b"HTTP/1.1 404"), path
    assert cross.startswith(b"HTTP/1.1 403"), cross
    assert broken.startswith(b"HTTP/1.1 400") or not broken
    assert "refused a cross-site POST" in output
    assert "request method=GET" in output
    if fmt == "text":
        check_text(output)  # the path, in the access log
        assert "\\x1b[2J\\x85\\x9b31m" in output  # the headers, escaped
    else:
        records = check_json(output)
        messages = "\n".join(r["msg"] for r in records)
        assert f"path=/{EVIL} " in messages
        assert repr(EVIL_IN_HEADER.decode("latin-1")) in messages  # the warning's %r
    assert f"query=q={EVIL_IN_URL.decode()}" in output  # as it came, percent-encoded


@pytest.fixture
def world(tmp_path: Path) -> tuple[str, Client, dict[str, int]]:
    """A store with two runs due now whose rows hold EVIL, as rows older than today's
    checks at submit can: an ``http`` job whose URL holds it (and a token in its query),
    and a ``shell`` job whose tenant, name, queue and command hold it."""
    url = f"sqlite:///{tmp_path / 'tickwork.db'}"
    client = Client(open_store(url))
    hook = client.submit("http", args={"url": "https://example.com/"}, max_attempts=1)
    command = client.submit("shell", args={"argv": ["true"]}, max_attempts=1)
    assert hook.run is not None
    assert command.run is not None
    evil_url = f"http://127.0.0.1:9/hook{EVIL_ON_ONE_LINE}?token={SECRET}&page=2"
    for table, key in (("tickwork_jobs", hook.job.id), ("tickwork_runs", hook.run.id)):
        execute(url, f"UPDATE {table} SET args = :args WHERE id = :id",
                args=json.dumps({"url": evil_url}), id=key)  # fmt: skip
    argv = json.dumps({"argv": [f"/no/such/command{EVIL}"]})
    execute(url, "UPDATE tickwork_jobs SET args = :args, tenant = :evil, name = :evil, "
            "queue = :evil WHERE id = :id", args=argv, evil=EVIL, id=command.job.id)  # fmt: skip
    execute(url, "UPDATE tickwork_runs SET args = :args, tenant = :evil, queue = :evil "
            "WHERE id = :id", args=argv, evil=EVIL, id=command.run.id)  # fmt: skip
    return url, client, {"http": hook.run.id, "shell": command.run.id}


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("command", ["worker", "run"])
def test_a_jobs_url_tenant_and_error_cannot_forge_a_line_of_the_workers_log(
    tmp_path: Path, world: tuple[str, Client, dict[str, int]], command: str, fmt: str
) -> None:
    url, client, runs = world
    argv = [command, "--db", url, "--allow-shell", "--log-format", fmt, "--log-level", "DEBUG"]
    if command == "run":
        argv += ["--no-api"]
    with tickwork(tmp_path, *argv) as worker:
        for run_id in runs.values():
            wait_until(partial(is_dead, client, run_id), 30, what=f"run {run_id} dead")
        time.sleep(0.3)  # the worker logs the outcome as it reports it
    output = worker.output()
    client.close()

    assert f"run {runs['http']} (http) attempt 1/1 failed (dead)" in output
    assert f"run {runs['shell']} (shell) attempt 1/1 failed (dead)" in output
    # The URL: named in its run's error (the worker checks a row's args again before it
    # runs them), its query values not at all.
    assert "token=***&page=***" in output
    shown_url = "/hookx2030-01-01T00:00:00.000Z CRITICAL tickwork.web: FORGED\\x1b[2J\\x85"
    if fmt == "text":
        check_text(output, must_show=2)  # the command (started, and its error), the tenant
        assert "tenant=x\\n2030-01-01" in output
        assert shown_url in output
    else:
        records = check_json(output, must_show=2)
        assert EVIL in [r["tenant"] for r in records if "tenant" in r]
        assert intact(records, shown_url) == 1
