"""The caller is known before a byte of the body is read: a request without a key to any
endpoint that takes a body is answered (401, or the dashboard's sign-in redirect) without
the body being read, let alone parsed. A batch body is bounded (16 MiB, 413 past it:
refused up front by its ``Content-Length``, or counted as a chunked one streams in), and
parsed off the event loop.

With a real ``tickwork api`` (uvicorn), over raw sockets so a test can send half a body;
the server's memory is read from ``/proc``."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from api_support import ServerProcess, bearer, serving
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from tickwork.client import Client
from tickwork.store import open_store
from tickwork.web import api, dashboard
from tickwork.web.app import create_app
from tickwork.web.errors import MAX_BATCH_BODY_BYTES, MAX_BODY_BYTES

MB = 1024 * 1024
ANSWER_TIMEOUT = 10.0
"""Seconds a refusal may take to come back while the body is still unsent (on a loaded
machine; a server that waits for the body never answers at all)."""
HEALTHZ_STALL = 1.0
"""Seconds /healthz may take during the attack: not a speed claim (speed is measured in
benchmarks/), a stall detector. Parsing the body on the event loop stalled it 2 s."""


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    """One ``tickwork api`` for the module (the tests only read), with an admin key and a
    tenant key."""
    url = f"sqlite:///{tmp_path_factory.mktemp('api') / 'tickwork.db'}"
    with Client(open_store(url)) as client:
        keys = {
            "admin": client.create_api_key(tenant="ops", admin=True)[1],
            "acme": client.create_api_key(tenant="acme")[1],
        }
    with serving(["api", "--db", url, "--port", "0"]) as running:
        yield running, keys


def batch_body(size: int) -> bytes:
    """A well-formed batch of 1,000 jobs, just under ``size`` bytes, whose args are objects
    of many small keys: the costliest JSON there is to parse into Python objects."""
    key = len('"k00000":0,')
    keys_per_job = (size // 1000 - 100) // key
    args = {"url": "https://example.com/", "json": dict.fromkeys(
        (f"k{i:05}" for i in range(keys_per_job)), 0)}  # fmt: skip
    job = json.dumps({"task": "http", "args": args}, separators=(",", ":"))
    body = ('{"jobs":[' + ",".join([job] * 1000) + "]}").encode()
    assert size - 200_000 < len(body) <= size
    return body


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


class Peak:
    """The highest RSS of a process, sampled every few milliseconds while in use."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.value = rss_bytes(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.value = max(self.value, rss_bytes(self.pid))

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def open_request(
    base: str, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> socket.socket:
    """A socket on which the request line, ``headers`` and ``body`` (maybe only the start
    of what ``Content-Length`` declares) have been sent."""
    parts = urlsplit(base)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=ANSWER_TIMEOUT)
    head = f"{method} {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    sock.sendall(head.encode("latin-1") + b"\r\n" + body)
    return sock


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    response = http.client.HTTPResponse(sock)
    response.begin()
    body = response.read()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def send_all_quietly(sock: socket.socket, data: bytes) -> None:
    """Send ``data`` until the server closes the connection (it may refuse before the end)."""
    with contextlib.suppress(OSError):
        sock.sendall(data)


def healthz_times(base: str, stop: threading.Event, into: list[float]) -> None:
    parts = urlsplit(base)
    assert parts.hostname is not None
    while not stop.is_set():
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        began = time.monotonic()
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        into.append(time.monotonic() - began)
        conn.close()
        time.sleep(0.02)


JSON = {"Content-Type": "application/json"}


def test_a_16_mib_batch_without_a_key_is_refused_unparsed_with_flat_memory_and_healthz_prompt(
    server: tuple[ServerProcess, dict[str, str]],
) -> None:
    running, _ = server
    body = batch_body(MAX_BATCH_BODY_BYTES - 1024)
    idle = rss_bytes(running.process.pid)
    stop = threading.Event()
    healthz: list[float] = []
    poller = threading.Thread(target=healthz_times, args=(running.url, stop, healthz))

    with Peak(running.process.pid) as peak:
        poller.start()
        sock = open_request(running.url, "POST", "/api/v1/jobs/batch",
                            {**JSON, "Content-Length": str(len(body))})  # fmt: skip
        sender = threading.Thread(target=send_all_quietly, args=(sock, body))
        sender.start()
        status, headers, answer = read_answer(sock)
        sender.join(timeout=30)
        sock.close()
        time.sleep(0.5)  # the server would parse after the answer, if it parsed at all
        stop.set()
        poller.join()

    assert status == 401
    assert headers["content-type"] == "application/json"
    assert json.loads(answer)["error"]["code"] == "unauthorized"
    assert peak.value - idle < 50 * MB, f"idle {idle / MB:.0f} MB, peak {peak.value / MB:.0f} MB"
    assert healthz
    assert max(healthz) < HEALTHZ_STALL, healthz


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_batch_without_a_key_is_answered_before_its_body_is_sent(
    server: tuple[ServerProcess, dict[str, str]], chunked: bool
) -> None:
    running, _ = server
    framing = {"Transfer-Encoding": "chunked"} if chunked else {"Content-Length": str(8 * MB)}
    start = b"10000\r\n" + b" " * 0x10000 + b"\r\n" if chunked else b" " * 65536

    sock = open_request(running.url, "POST", "/api/v1/jobs/batch", {**JSON, **framing}, start)
    status, _, answer = read_answer(sock)  # 8 MiB (or the chunks' end) never sent
    sock.close()

    assert status == 401
    assert json.loads(answer)["error"]["code"] == "unauthorized"


SIGN_IN_FORM = {"/login"}
"""The dashboard's sign-in form: the key it checks is in its body."""


def body_routes() -> list[tuple[str, str]]:
    """Every route of the API and the dashboard that takes a body: (method, path with its
    ids filled in)."""
    fill = {"{job_id}": "1", "{run_id}": "1", "{tenant}": "acme", "{name}": "cal",
            "{action}": "retry"}  # fmt: skip
    found = []
    for route in [*(r for router in api.ROUTERS for r in router.routes), *dashboard.router.routes]:
        assert isinstance(route, APIRoute)
        for method in sorted((route.methods or set()) - {"GET", "HEAD"}):
            if route.path in SIGN_IN_FORM:
                continue  # it reads the key from its body
            path = route.path
            for name, value in fill.items():
                path = path.replace(name, value)
            found.append((method, path))
    assert len(found) > 15
    return found


@pytest.mark.parametrize(("method", "path"), body_routes())
def test_no_endpoint_reads_a_body_before_it_knows_the_caller(
    server: tuple[ServerProcess, dict[str, str]], method: str, path: str
) -> None:
    running, _ = server
    api = path.startswith("/api/")
    kind = JSON if api else {"Content-Type": "application/x-www-form-urlencoded"}
    declared = MAX_BODY_BYTES - 1  # under every limit: only the missing key can refuse it

    sock = open_request(running.url, method, path,
                        {**kind, "Content-Length": str(declared), "Origin": running.url},
                        b"{" if api else b"a=")  # fmt: skip
    status, headers, answer = read_answer(sock)
    sock.close()

    if api:
        assert status == 401, answer
        assert json.loads(answer)["error"]["code"] == "unauthorized"
    else:
        assert status == 303, answer
        assert headers["location"].startswith("/login")


@pytest.mark.parametrize(
    ("method", "path"), [("PUT", "/api/v1/tenants/acme"), ("PATCH", "/api/v1/calendars/cal")]
)
def test_a_tenant_key_on_an_admin_endpoint_is_refused_before_its_body_is_read(
    server: tuple[ServerProcess, dict[str, str]], method: str, path: str
) -> None:
    running, keys = server
    headers = {**JSON, **bearer(keys["acme"]), "Content-Length": str(MAX_BODY_BYTES - 1)}

    sock = open_request(running.url, method, path, headers, b"{")
    status, _, answer = read_answer(sock)
    sock.close()

    assert status == 403
    assert json.loads(answer)["error"]["code"] == "forbidden"


def test_a_batch_declared_over_16_mib_is_413_before_a_byte_is_read(
    server: tuple[ServerProcess, dict[str, str]],
) -> None:
    running, keys = server
    headers = {**JSON, **bearer(keys["admin"]), "Content-Length": str(MAX_BATCH_BODY_BYTES + 1)}

    sock = open_request(running.url, "POST", "/api/v1/jobs/batch", headers)
    status, response_headers, answer = read_answer(sock)
    sock.close()

    assert status == 413
    assert response_headers["content-type"] == "application/json"
    error = json.loads(answer)["error"]
    assert error["code"] == "body_too_large"
    assert str(MAX_BATCH_BODY_BYTES) in error["message"]


def test_a_chunked_batch_past_16_mib_is_413_once_it_passes_the_limit(
    server: tuple[ServerProcess, dict[str, str]],
) -> None:
    running, keys = server
    chunk = b" " * MB
    frames = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(17))
    headers = {**JSON, **bearer(keys["admin"]), "Transfer-Encoding": "chunked"}
    idle = rss_bytes(running.process.pid)

    with Peak(running.process.pid) as peak:
        sock = open_request(running.url, "POST", "/api/v1/jobs/batch", headers)
        sender = threading.Thread(target=send_all_quietly, args=(sock, frames + b"0\r\n\r\n"))
        sender.start()
        status, _, answer = read_answer(sock)
        sender.join(timeout=30)
        sock.close()

    assert status == 413
    assert json.loads(answer)["error"]["code"] == "body_too_large"
    assert peak.value - idle < 50 * MB


def test_a_batch_that_is_not_json_is_a_400_and_one_off_schema_a_422(
    server: tuple[ServerProcess, dict[str, str]],
) -> None:
    running, keys = server
    with running.http(keys["admin"]) as web:
        broken = web.post("/api/v1/jobs/batch", content=b'{"jobs": [', headers=JSON)
        wrong = web.post("/api/v1/jobs/batch", json={"jobs": [{"task": "http", "nope": 1}]})
        plain = web.post("/api/v1/jobs/batch", content=b'{"jobs": []}',
                         headers={"Content-Type": "text/plain"})  # fmt: skip

    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == "invalid_json"
    assert wrong.status_code == 422
    assert wrong.json()["error"] == {
        "code": "unprocessable",
        "message": "job 0 of the batch: jobs.0.nope is not a known field",
        "field": "jobs.0.nope",
        "index": 0,
    }
    assert plain.status_code == 415


def test_the_openapi_document_still_describes_the_batch_body(client: Client) -> None:
    with TestClient(create_app(client, open_access=True)) as web:
        document = web.get("/api/v1/openapi.json").json()

    body = document["paths"]["/api/v1/jobs/batch"]["post"]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    if "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    assert body["required"] is True
    assert schema["properties"]["jobs"]["items"] == {"$ref": "#/components/schemas/JobIn"}
    assert schema["properties"]["jobs"]["maxItems"] == 1000
