"""Where ``http`` runs may connect (Issue 11, SSRF), on a real worker against real HTTP
servers on loopback: refused by default, allowed by ``http_allow`` or an admin's
``allow_private``, checked again on every redirect, and on the address actually connected
to when the DNS answer changes between lookups (a resolver stub stands in for DNS; the
servers and sockets are real)."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from worker_support import finished, make_app, running

from tickwork.app import App
from tickwork.errors import InvalidArgs
from tickwork.job import Job, Run, RunState
from tickwork.store import Store
from tickwork.tasks.builtins import MAX_REDIRECTS
from tickwork.tasks.connections import VettedHTTPSConnection
from tickwork.tasks.egress import EgressPolicy
from tickwork.testing import wait_until
from tickwork.worker import Worker

SECRET = "the-secret-only-loopback-may-read"
STREAM_PAUSE = 0.05
"""Seconds between two chunks of a body that never ends."""


class Service(BaseHTTPRequestHandler):
    """A service on loopback. Every request is recorded on the server's ``hits``.

    ``/secret``: the secret. ``/echo``: the request's headers as JSON. ``/redirect?to=URL
    &status=N``: a redirect. ``/loop/N``: a redirect to ``/loop/N+1``, forever.
    ``/stream``: a body that never ends.
    """

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        self.server.hits.append(  # type: ignore[attr-defined]
            {"method": self.command, "path": parts.path, "headers": dict(self.headers),
             "body": body}
        )  # fmt: skip
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if parts.path == "/secret":
            self._send(200, SECRET.encode())
        elif parts.path == "/echo":
            self._send(200, json.dumps(dict(self.headers)).encode())
        elif parts.path == "/redirect":
            self._send(int(query.get("status", "302")), b"", location=query["to"])
        elif parts.path.startswith("/loop/"):
            hop = int(parts.path.rsplit("/", 1)[1])
            self._send(302, b"", location=f"/loop/{hop + 1}")
        elif parts.path == "/stream":
            self._stream()
        else:
            self._send(404, b"no such path")

    do_GET = do_POST = do_PUT = _answer

    def _send(self, status: int, body: bytes, *, location: str | None = None) -> None:
        self.send_response(status)
        if location is not None:
            self.send_header("Location", location)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(10**12))
        self.end_headers()
        try:
            while not self.server.stopping.is_set():  # type: ignore[attr-defined]
                self.wfile.write(b"x" * 1024)
                self.wfile.flush()
                time.sleep(STREAM_PAUSE)
        except OSError:
            pass  # the worker hung up: what this test wants

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving(host: str, port: int = 0) -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer((host, port), Service)
    httpd.hits = []  # type: ignore[attr-defined]
    httpd.stopping = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.stopping.set()  # type: ignore[attr-defined]
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture
def service() -> Iterator[ThreadingHTTPServer]:
    with serving("127.0.0.1") as httpd:
        yield httpd


@pytest.fixture
def pair() -> Iterator[tuple[ThreadingHTTPServer, ThreadingHTTPServer]]:
    """Two services on one port: 127.0.0.1 and 127.0.0.2 (both loopback on Linux), so a
    DNS answer alone decides which one a URL reaches."""
    with serving("127.0.0.1") as first:
        port = first.server_address[1]
        with serving("127.0.0.2", port) as second:
            yield first, second


def hits(server: ThreadingHTTPServer) -> list[dict[str, Any]]:
    return server.hits  # type: ignore[attr-defined, no-any-return]


def base(server: ThreadingHTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


def port_of(server: ThreadingHTTPServer) -> int:
    return int(server.server_address[1])


@pytest.fixture
def strict(store: Store) -> Iterator[App]:
    """An app whose workers keep the default egress policy."""
    application = make_app(store)
    yield application
    application.close()


@pytest.fixture
def allowing(store: Store) -> Iterator[App]:
    """An app whose workers may reach 127.0.0.1 (and only that loopback address)."""
    application = make_app(store, http_allow=("127.0.0.1",))
    yield application
    application.close()


def run_one(app: App, store: Store, args: dict[str, Any], **submit: Any) -> Run:
    job = app.submit("http", args, max_attempts=3, **submit)
    with running(app.worker()):
        return finished(store, job)


def assert_refused(run: Run, address: str, reason: str) -> None:
    assert run.state is RunState.DEAD
    assert run.attempt == 1  # dead at once: not retried
    assert run.error is not None
    assert f"refused destination {address} ({reason})" in run.error
    assert "--http-allow" in run.error
    assert SECRET not in json.dumps(run.result)


# -- the default: public addresses only -------------------------------------------------------


def test_an_http_run_to_a_loopback_service_is_dead_at_once_and_the_service_hears_nothing(
    strict: App, store: Store, service: ThreadingHTTPServer
) -> None:
    run = run_one(strict, store, {"url": f"{base(service)}/secret"})

    assert_refused(run, "127.0.0.1", "loopback")
    assert run.error is not None
    assert "for host 127.0.0.1" in run.error
    assert hits(service) == []


def test_every_spelling_of_a_loopback_address_is_refused_by_what_it_resolves_to(
    strict: App, store: Store, service: ThreadingHTTPServer
) -> None:
    port = port_of(service)
    spellings = {
        "2130706433": "loopback",  # 127.0.0.1 as one number
        "0x7f000001": "loopback",
        "127.1": "loopback",
        "[::ffff:127.0.0.1]": "loopback",  # IPv4-mapped
        "0.0.0.0": "unspecified",  # Linux connects it to loopback
        "localhost": "loopback",
    }
    jobs = {
        host: strict.submit("http", {"url": f"http://{host}:{port}/secret"}, max_attempts=3)
        for host in spellings
    }
    with running(strict.worker()):
        runs = {host: finished(store, job) for host, job in jobs.items()}

    for host, reason in spellings.items():
        run = runs[host]
        assert run.state is RunState.DEAD, host
        assert run.attempt == 1
        assert f"({reason}) for host {host.strip('[]')};" in (run.error or ""), run.error
    assert hits(service) == []


def test_http_allow_in_the_config_lets_runs_reach_that_network(
    allowing: App, store: Store, service: ThreadingHTTPServer
) -> None:
    run = run_one(allowing, store, {"url": f"{base(service)}/secret"})

    assert run.state is RunState.SUCCEEDED
    assert run.result == {"status": 200, "body": SECRET}
    assert [hit["path"] for hit in hits(service)] == ["/secret"]


def test_a_worker_shows_what_it_allows_in_the_cluster_view(allowing: App, store: Store) -> None:
    with running(allowing.worker()):
        (node,) = store.list_nodes()

    assert node.info["http_allow"] == ["127.0.0.1/32"]


def test_http_allow_by_host_name_allows_that_name_and_not_its_address(
    store: Store, service: ThreadingHTTPServer
) -> None:
    app = make_app(store, http_allow=("LocalHost",))
    by_name = app.submit("http", {"url": f"http://localhost:{port_of(service)}/secret"})
    by_address = app.submit("http", {"url": f"{base(service)}/secret"}, max_attempts=3)
    with running(app.worker()):
        named, addressed = finished(store, by_name), finished(store, by_address)
    app.close()

    assert named.state is RunState.SUCCEEDED
    assert_refused(addressed, "127.0.0.1", "loopback")
    assert len(hits(service)) == 1


def test_an_admin_job_with_allow_private_reaches_loopback_on_a_strict_worker(
    strict: App, store: Store, service: ThreadingHTTPServer
) -> None:
    run = run_one(strict, store, {"url": f"{base(service)}/secret", "allow_private": True})

    assert run.state is RunState.SUCCEEDED
    assert run.result == {"status": 200, "body": SECRET}


def test_http_args_that_cannot_be_sent_as_given_are_refused_at_submit(strict: App) -> None:
    with pytest.raises(InvalidArgs, match='"allow_private" must be true or false'):
        strict.submit("http", {"url": "https://example.com/", "allow_private": "yes"})
    with pytest.raises(InvalidArgs, match="carries credentials") as caught:
        strict.submit("http", {"url": "https://user:hunter2@example.com/"})
    assert "hunter2" not in str(caught.value)
    with pytest.raises(InvalidArgs, match="out of range"):
        strict.submit("http", {"url": "https://example.com:99999/"})
    for headers in ({"X-A": "a\r\nHost: 127.0.0.1"}, {"X A": "b"}, {"X-C:": "c"}):
        with pytest.raises(InvalidArgs, match="names are tokens"):
            strict.submit("http", {"url": "https://example.com/", "headers": headers})

    assert strict.store.list_jobs().items == []


# -- redirects ----------------------------------------------------------------------------------


def test_a_redirect_from_an_allowed_address_to_a_refused_one_is_refused(
    allowing: App,
    store: Store,
    pair: tuple[ThreadingHTTPServer, ThreadingHTTPServer],
) -> None:
    allowed, secret = pair
    to = f"{base(secret)}/secret"
    run = run_one(allowing, store, {"url": f"{base(allowed)}/redirect?to={to}"})

    assert_refused(run, "127.0.0.2", "loopback")
    assert run.error is not None
    # The URL as errors name it: its query values hidden (docs/http-api.md).
    assert f"(a redirect from {base(allowed)}/redirect?to=*** led there)" in run.error
    assert [hit["path"] for hit in hits(allowed)] == ["/redirect"]
    assert hits(secret) == []


def test_a_303_after_a_post_is_fetched_with_a_get_and_credentials_stay_at_their_origin(
    store: Store, pair: tuple[ThreadingHTTPServer, ThreadingHTTPServer]
) -> None:
    first, second = pair
    app = make_app(store, http_allow=("127.0.0.1", "127.0.0.2"))
    args = {
        "url": f"{base(first)}/redirect?status=303&to={base(second)}/echo",
        "json": {"hello": "world"},
        "headers": {"Authorization": "Bearer for-the-first-only", "X-Trace": "t1"},
    }
    run = run_one(app, store, args)
    app.close()

    assert run.state is RunState.SUCCEEDED
    assert run.result is not None
    (posted,) = hits(first)
    (fetched,) = hits(second)
    assert posted["method"] == "POST"
    assert posted["headers"]["Authorization"] == "Bearer for-the-first-only"
    assert fetched["method"] == "GET"
    assert fetched["body"] == b""
    assert "Authorization" not in fetched["headers"]
    assert "Content-Type" not in fetched["headers"]
    assert fetched["headers"]["X-Trace"] == "t1"
    assert fetched["headers"]["X-Tickwork-Run-Id"] == str(run.id)


def test_a_307_repeats_the_request_with_its_body_at_the_same_origin(
    allowing: App, store: Store, service: ThreadingHTTPServer
) -> None:
    args = {
        "url": f"{base(service)}/redirect?status=307&to=/echo",
        "method": "PUT",
        "json": [1, 2],
        "headers": {"Authorization": "Bearer same-origin"},
    }
    run = run_one(allowing, store, args)

    assert run.state is RunState.SUCCEEDED
    first, second = hits(service)
    assert (first["method"], second["method"]) == ("PUT", "PUT")
    assert second["body"] == b"[1,2]"
    assert second["headers"]["Authorization"] == "Bearer same-origin"


def test_a_redirect_to_another_scheme_is_refused(
    allowing: App, store: Store, service: ThreadingHTTPServer
) -> None:
    run = run_one(allowing, store, {"url": f"{base(service)}/redirect?to=file:///etc/passwd"})

    assert run.state is RunState.DEAD
    assert run.attempt == 1
    assert run.error is not None
    assert "refused redirect to 'file:///etc/passwd'" in run.error


def test_redirects_stop_after_the_fifth(
    allowing: App, store: Store, service: ThreadingHTTPServer
) -> None:
    run = run_one(allowing, store, {"url": f"{base(service)}/loop/0"})

    assert run.state is RunState.DEAD
    assert run.attempt == 1
    assert run.error is not None
    assert f"more than {MAX_REDIRECTS} redirects" in run.error
    assert [hit["path"] for hit in hits(service)] == [f"/loop/{n}" for n in range(6)]


# -- DNS rebinding: the check and the connect see one answer ---------------------------------


class Rebinding:
    """A resolver stub: the first lookup of a name gets ``first``, every later one
    ``then``. It records each lookup."""

    def __init__(self, first: list[str], then: list[str]) -> None:
        self.answers = [first, then]
        self.lookups: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        return self.answers[min(len(self.lookups) - 1, 1)]


def run_with_resolver(
    app: App, store: Store, resolver: Callable[[str, int], list[str]], url: str
) -> Run:
    job: Job = app.submit("http", {"url": url}, max_attempts=3)
    policy = EgressPolicy.from_entries(["127.0.0.1"], resolver=resolver)
    with running(Worker(app.store, app.registry, app.config, egress=policy)):
        return finished(store, job)


def test_a_dns_answer_that_changes_after_the_check_cannot_move_the_connection(
    strict: App, store: Store, pair: tuple[ThreadingHTTPServer, ThreadingHTTPServer]
) -> None:
    allowed, secret = pair
    resolver = Rebinding(first=["127.0.0.1"], then=["127.0.0.2"])

    run = run_with_resolver(strict, store, resolver, f"http://rebind.test:{port_of(allowed)}/echo")

    assert run.state is RunState.SUCCEEDED
    assert resolver.lookups == ["rebind.test"]  # one lookup: checked and connected alike
    (hit,) = hits(allowed)
    assert hit["headers"]["Host"] == f"rebind.test:{port_of(allowed)}"  # the name is kept
    assert hits(secret) == []


def test_a_name_whose_first_answer_is_refused_is_refused_without_a_second_lookup(
    strict: App, store: Store, pair: tuple[ThreadingHTTPServer, ThreadingHTTPServer]
) -> None:
    allowed, secret = pair
    resolver = Rebinding(first=["127.0.0.2"], then=["127.0.0.1"])

    run = run_with_resolver(strict, store, resolver, f"http://rebind.test:{port_of(secret)}/secret")

    assert_refused(run, "127.0.0.2", "loopback")
    assert resolver.lookups == ["rebind.test"]
    assert hits(allowed) == hits(secret) == []


def test_a_name_with_one_refused_address_among_its_answers_is_refused(
    strict: App, store: Store, pair: tuple[ThreadingHTTPServer, ThreadingHTTPServer]
) -> None:
    allowed, secret = pair
    both = ["127.0.0.1", "127.0.0.2"]

    run = run_with_resolver(
        strict, store, Rebinding(both, both), f"http://rebind.test:{port_of(allowed)}/secret"
    )

    assert_refused(run, "127.0.0.2", "loopback")
    assert hits(allowed) == hits(secret) == []


def test_a_redirect_to_the_same_name_is_looked_up_and_checked_again(
    strict: App, store: Store, pair: tuple[ThreadingHTTPServer, ThreadingHTTPServer]
) -> None:
    allowed, secret = pair
    origin = f"http://rebind.test:{port_of(allowed)}"
    resolver = Rebinding(first=["127.0.0.1"], then=["127.0.0.2"])

    run = run_with_resolver(strict, store, resolver, f"{origin}/redirect?to={origin}/secret")

    assert_refused(run, "127.0.0.2", "loopback")
    assert resolver.lookups == ["rebind.test", "rebind.test"]
    assert [hit["path"] for hit in hits(allowed)] == ["/redirect"]
    assert hits(secret) == []


# -- a body that never ends ---------------------------------------------------------------------


def test_a_body_that_never_ends_is_cut_off_at_the_job_timeout(
    allowing: App, store: Store, service: ThreadingHTTPServer
) -> None:
    job = allowing.submit("http", {"url": f"{base(service)}/stream"}, timeout=0.5, max_attempts=1)
    worker = allowing.worker()
    with running(worker):
        run = finished(store, job)
        # The handler's thread is free again: it stopped reading, it did not just get
        # abandoned while the stream goes on.
        wait_until(lambda: worker.executor.busy == 0, timeout=5)

    assert run.state is RunState.DEAD
    # The worker's watchdog ("timed out after 0.5 s") or the task's own deadline ("GET
    # ...: timed out"), whichever looked first: the two are the same length.
    assert run.error is not None
    assert "timed out" in run.error


# -- TLS keeps the name -------------------------------------------------------------------------


@pytest.fixture
def tls_service(tmp_path: Path) -> Iterator[tuple[ThreadingHTTPServer, ssl.SSLContext, list[str]]]:
    """An HTTPS service on 127.0.0.1 whose certificate names ``tls.test`` only; the
    client context that trusts it; and the server names (SNI) clients asked for."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command to make a certificate with")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=tls.test", "-addext", "subjectAltName=DNS:tls.test",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    names: list[str] = []
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert, key)

    def note_name(sock: ssl.SSLObject, name: str | None, context: ssl.SSLContext) -> None:
        names.append(str(name))

    server_side.sni_callback = note_name
    client_side = ssl.create_default_context(cafile=str(cert))
    with serving("127.0.0.1") as httpd:
        httpd.socket = server_side.wrap_socket(httpd.socket, server_side=True)
        yield httpd, client_side, names


def test_https_to_a_checked_address_keeps_the_host_name_for_sni_and_the_certificate(
    tls_service: tuple[ThreadingHTTPServer, ssl.SSLContext, list[str]],
) -> None:
    httpd, context, names = tls_service
    port = port_of(httpd)
    policy = EgressPolicy.from_entries(["127.0.0.1"], resolver=lambda host, port: ["127.0.0.1"])

    def get(host: str) -> int:
        connection = VettedHTTPSConnection(
            host, port, timeout=10, policy=policy, allow_private=False, context=context
        )
        try:
            connection.request("GET", "/echo")
            return connection.getresponse().status
        finally:
            connection.close()

    assert get("tls.test") == 200
    assert names == ["tls.test"]
    assert hits(httpd)[0]["headers"]["Host"] == f"tls.test:{port}"
    with pytest.raises(ssl.SSLCertVerificationError):
        get("other.test")  # same address, a name the certificate does not carry
    assert len(hits(httpd)) == 1
