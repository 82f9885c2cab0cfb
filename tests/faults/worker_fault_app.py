"""The app the worker fault tests run (``tickwork worker --app worker_fault_app``).

Every execution of ``work`` appends a ``start`` and, if it gets that far, an ``end`` line
(JSON) to the file named by ``TICKWORK_TEST_RECORD``, with the run id, attempt, fencing
token and pid, so a duplicate or cut execution is visible. Small ``O_APPEND`` writes from
several processes do not interleave.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from tests import ledger

from tickwork.app import App, Context

app = App()


def record(event: str, ctx: Context, tag: str | None = None) -> None:
    line = {
        "tag": tag,
        "event": event,
        "run": ctx.run_id,
        "attempt": ctx.attempt,
        "token": ctx.fencing_token,
        "pid": os.getpid(),
        "mono": time.monotonic(),  # CLOCK_MONOTONIC: comparable across processes of a host
    }
    fd = os.open(os.environ["TICKWORK_TEST_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


@app.task
def work(ctx: Context, seconds: float = 0.0, tag: str | None = None) -> dict[str, Any]:
    """Sleeps without polling ``ctx.cancelled``: a plain handler that cannot be stopped.
    ``tag`` is recorded with each line (a test's label, e.g. the run's tenant)."""
    record("start", ctx, tag)
    time.sleep(seconds)
    record("end", ctx, tag)
    return {"pid": os.getpid(), "token": ctx.fencing_token}


@app.task(max_running=1)
def mutex(ctx: Context, seconds: float = 0.0) -> None:
    """``work`` as a cluster-wide mutex: never two executions at once, on any worker."""
    record("start", ctx, "mutex")
    time.sleep(seconds)
    record("end", ctx, "mutex")


_own = threading.local()


@app.task
def ledger_in_transaction(ctx: Context, before: float = 0.0, inside: float = 0.0) -> None:
    """One ``ledger`` row, written in the run's own transaction (exactly-once in effect).
    Sleeps ``before`` it and ``inside`` it, so that faults land there too."""
    time.sleep(before)
    with ctx.transaction() as conn:
        ledger.insert(conn, ctx.run_id, os.getpid())
        time.sleep(inside)


@app.task
def ledger_outside(ctx: Context, before: float = 0.0, inside: float = 0.0) -> None:
    """The same row, committed on a connection of its own before the run completes
    (at-least-once: a fault between the two repeats it)."""
    time.sleep(before)
    conn = getattr(_own, "conn", None)
    if conn is None:
        conn = _own.conn = ledger.connect(os.environ["TICKWORK_TEST_DB"])
    ledger.insert(conn, ctx.run_id, os.getpid())
    time.sleep(inside)


@app.task
def counted(ctx: Context, seconds: float = 0.0) -> None:
    """Records each execution's start first thing, then works ``seconds``."""
    record("start", ctx)
    time.sleep(seconds)
