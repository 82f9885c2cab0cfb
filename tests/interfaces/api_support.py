"""Helpers for the HTTP API tests: an app in process, a real ``tickwork api`` process, and
the records a test needs (keys, dead runs) made the way the product makes them."""

from __future__ import annotations

import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any
from urllib.parse import urlsplit

import httpx
import httpx2
import psycopg

from tickwork.client import Client
from tickwork.job import RunState

STARTUP_TIMEOUT = 30.0
"""Seconds a child server may take to print its ready line (a loaded CI box)."""
STOP_TIMEOUT = 20.0
LOCAL = "http://127.0.0.1:8765"
"""A base URL addressed to loopback, as the open API requires (TestClient's default host is
``testserver``)."""
DEAD_QUEUE = "test-dead"
"""The queue of the runs :func:`dead_run` kills, so it claims none of a test's other runs."""
URL = re.compile(r"http://[^\s)]+")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def dead_run(client: Client, *, tenant: str = "default", error: str = "boom") -> int:
    """A run in the dead letter, made as a worker makes one: claimed, failed on its last
    attempt."""
    submitted = client.submit(
        "http",
        args={"url": "https://example.com/"},
        tenant=tenant,
        max_attempts=1,
        queue=DEAD_QUEUE,
    )
    assert submitted.run is not None
    (claimed,) = client.store.claim("test-worker", limit=1, queues=[DEAD_QUEUE])
    assert claimed.id == submitted.run.id
    client.store.fail(claimed.id, claimed.fencing_token, error)
    assert client.get_run(claimed.id).state is RunState.DEAD
    return claimed.id


def counts(client: Client) -> tuple[int, int]:
    """(jobs, runs) in the store, every tenant: a rejected request must change neither."""
    jobs = client.list_jobs(limit=1000).items
    runs, after = 0, None
    while True:
        page = client.list_runs(after=after, limit=1000)
        runs += len(page.items)
        if page.next_cursor is None:
            return len(jobs), runs
        after = page.next_cursor


def execute(store_url: str, statement: str, **params: Any) -> None:
    """Run one SQL statement (``:name`` parameters) straight on a store's database, past
    every check of the product: how a row that an older version (or another writer)
    stored, and that today's validation would refuse, gets into a test's database."""
    if store_url.startswith("sqlite:"):
        with sqlite3.connect(urlsplit(store_url).path) as conn:
            conn.execute(statement, params)
        return
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute(re.sub(r":(\w+)", r"%(\1)s", statement), params)


@dataclass
class ServerProcess:
    """A ``tickwork`` child serving HTTP; its stdout and stderr are collected as it runs."""

    process: subprocess.Popen[str]
    url: str = ""
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)

    def http(self, key: str | None = None) -> httpx.Client:
        headers = bearer(key) if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"  # SIGABRT on a hung stop dumps every thread's stack
    return env


@contextmanager
def serving(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Iterator[ServerProcess]:
    """``python -m tickwork ARGV`` until its ready line (``tickwork ...: ready``, with the
    URL it serves); SIGTERM and exit 0 afterwards. ``env``: variables on top of the test's
    own (whose ``TICKWORK_*`` ones are dropped)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tickwork", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**child_env(), **(env or {})},
    )
    server = ServerProcess(process)
    ready = False
    lines: queue.Queue[str | None] = queue.Queue()
    readers = [
        threading.Thread(target=_pump, args=(process.stdout, server.out, lines), daemon=True),
        threading.Thread(target=_pump, args=(process.stderr, server.err, None), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not ready:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no ready line; stderr: {''.join(server.err)}") from None
            if line is None:
                process.wait(timeout=STOP_TIMEOUT)
                raise AssertionError(
                    f"exited {process.returncode} before ready; stderr: {''.join(server.err)}"
                )
            if ": ready" in line:
                ready = True
                found = URL.search(line)
                server.url = found.group(0) if found else ""
        yield server
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            process.wait(timeout=STOP_TIMEOUT)
            for reader in readers:
                reader.join(timeout=STOP_TIMEOUT)
            raise AssertionError(
                f"not stopped {STOP_TIMEOUT:g} s after SIGTERM; its threads and stderr:\n"
                + "".join(server.err)[-20000:]
            ) from None
        for reader in readers:
            reader.join(timeout=STOP_TIMEOUT)
        assert code == 0, "".join(server.err)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _pump(stream: IO[str] | None, into: list[str], lines: queue.Queue[str | None] | None) -> None:
    assert stream is not None
    for line in stream:
        into.append(line)
        if lines is not None:
            lines.put(line)
    if lines is not None:
        lines.put(None)


def run_tickwork(*argv: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``python -m tickwork ARGV`` to completion (for commands that refuse to start)."""
    return subprocess.run(
        [sys.executable, "-m", "tickwork", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
        check=False,
    )


def error_of(answer: httpx.Response | httpx2.Response) -> dict[str, Any]:
    """The error envelope's inner object, after checking the envelope's shape (of a served
    API's answer, or a TestClient's: Starlette's is httpx2's)."""
    body = answer.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert {"code", "message"} <= set(error) <= {"code", "message", "field", "index"}, error
    assert error["message"]
    return error
