"""A token in an ``http`` job's URL query stays out of the logs and the error texts: every
line and error that names the URL shows its query values as ``***`` (as the headers and
the body were never shown), while the request itself carries the URL whole. With a real
``tickwork worker`` against a real HTTP server on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from log_support import tickwork

from tickwork.client import Client
from tickwork.errors import InvalidArgs
from tickwork.job import RunState
from tickwork.store import open_store
from tickwork.tasks.builtins import MAX_REDIRECTS, shown_url
from tickwork.testing import wait_until

SECRET = "s3cr3t-token-0123"
ATTEMPTS = 3


def is_dead(client: Client, run_id: int) -> bool:
    return client.get_run(run_id).state is RunState.DEAD


class Hook(BaseHTTPRequestHandler):
    """``/busy``: 503 with ``Retry-After: 0`` (so every attempt is retried at once).
    ``/away``: a redirect to a scheme no run follows, with a signature in its query.
    ``/loop``: a redirect to itself, with a token, for ever."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        if self.path.startswith("/busy"):
            self._send(503, {"Retry-After": "0"})
        elif self.path.startswith("/away"):
            self._send(302, {"Location": f"ftp://files.example/x?sig={SECRET}"})
        else:
            self._send(302, {"Location": f"/loop?token={SECRET}"})

    def _send(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in {**headers, "Content-Length": "0"}.items():
            self.send_header(name, value)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_token_in_the_query_is_logged_as_stars_on_every_failed_attempt(
    tmp_path: Path, hook: ThreadingHTTPServer
) -> None:
    url = f"sqlite:///{tmp_path / 'tickwork.db'}"
    base = f"http://127.0.0.1:{hook.server_address[1]}"
    client = Client(open_store(url))
    jobs = {
        path: client.submit("http", args={"url": f"{base}/{path}?token={SECRET}&page=2",
                                          "allow_private": True}, max_attempts=ATTEMPTS)
        for path in ("busy", "away", "loop")
    }  # fmt: skip

    with tickwork(tmp_path, "worker", "--db", url, "--log-format", "text") as worker:
        for submitted in jobs.values():
            assert submitted.run is not None
            run_id = submitted.run.id
            wait_until(partial(is_dead, client, run_id), 30, what=f"run {run_id} dead")
    log = worker.output()
    errors = {path: client.get_run(j.run.id).error or "" for path, j in jobs.items() if j.run}
    client.close()

    assert SECRET not in log
    assert not [e for e in errors.values() if SECRET in e], errors
    busy = [line for line in log.splitlines() if "(http) attempt" in line and "/busy" in line]
    assert len(busy) == ATTEMPTS, log
    assert all("/busy?token=***&page=*** answered HTTP 503" in line for line in busy), busy
    assert "refused redirect to 'ftp://files.example/x?sig=***'" in errors["away"]
    assert f"/loop?token=***&page=***: more than {MAX_REDIRECTS} redirects" in errors["loop"]
    seen = hook.seen  # type: ignore[attr-defined]
    assert f"/busy?token={SECRET}&page=2" in seen  # the request itself carries it whole


def test_a_url_that_http_cannot_send_is_refused_at_submit_without_its_token(
    tmp_path: Path,
) -> None:
    with Client(open_store(f"sqlite:///{tmp_path / 't.db'}")) as client:
        for bad in ("https://example.com/a b", "https://example.com/\x1b[2J", "https://e.x/\r\n"):
            with pytest.raises(InvalidArgs, match="which HTTP cannot send") as caught:
                client.submit("http", args={"url": f"{bad}?token={SECRET}"})
            assert SECRET not in str(caught.value)
            assert "token=***" in str(caught.value)
        assert client.list_jobs().items == []


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://hooks.example/ci?token=abc&page=2",
            "https://hooks.example/ci?token=***&page=***",
        ),
        ("https://hooks.example/ci?abc", "https://hooks.example/ci?***"),
        ("https://hooks.example/ci?a=&&b", "https://hooks.example/ci?a=***&&***"),
        ("https://user:pw@hooks.example/ci#k=v", "https://***@hooks.example/ci#***"),
        ("https://hooks.example:8443/a/b", "https://hooks.example:8443/a/b"),
    ],
)
def test_a_shown_url_keeps_where_it_goes_and_hides_what_it_carries(url: str, shown: str) -> None:
    assert shown_url(url) == shown
