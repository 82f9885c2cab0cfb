"""The tickwork app of the nemesis run: handlers that take a while and write the history.

Workers load it with ``--app chaos.workload``; ``CHAOS_HISTORY`` names the history file
(``history.jsonl`` of the run directory, see README.md). Every execution appends a
``start`` line when its handler begins and an ``end`` line when it returns, is cancelled
or raises; each line is one ``os.write`` on an ``O_APPEND`` descriptor, so lines from
many processes never interleave. Times are ``CLOCK_MONOTONIC``, which libfaketime leaves
alone: a node whose wall clock is skewed still records true time.

A handler sleeps between ``min_ms`` and ``max_ms`` (0.5 to 3 s by default), picked from its
run id and attempt, so faults land mid-run; it stops early when the worker stops caring
(lease lost, shutdown), and returns ``{"token", "pid"}``: the store keeps that as the
run's result, which tells the checker whose completion was accepted.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from typing import Any

from tickwork import App
from tickwork.tasks import Context

HISTORY_ENV = "CHAOS_HISTORY"
NODE_ENV = "CHAOS_NODE"
MIN_MS = 500
MAX_MS = 3000
MAX_ATTEMPTS = 20
"""Faults spend attempts (a rescued run is attempt + 1); no job of the run may end dead."""

app = App()  # the workers' --db names the database; the app only registers the tasks

_history_fd: list[int] = []  # opened on first use: the API process never writes
_fd_lock = threading.Lock()


def _history() -> int:
    with _fd_lock:
        if not _history_fd:
            path = os.environ[HISTORY_ENV]
            _history_fd.append(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
        return _history_fd[0]


def _record(ev: str, ctx: Context, **extra: Any) -> None:
    line = {
        "ev": ev,
        "run": ctx.run_id,
        "job": ctx.job_id,
        "slot": ctx.scheduled_for.timestamp(),
        "attempt": ctx.attempt,
        "token": ctx.fencing_token,
        "pid": os.getpid(),
        "node": os.environ.get(NODE_ENV, ""),
        "mono": time.monotonic(),
        **extra,
    }
    os.write(_history(), (json.dumps(line) + "\n").encode())


def duration(ctx: Context, min_ms: int, max_ms: int) -> float:
    """Seconds this attempt sleeps: spread over [min_ms, max_ms], fixed per run and attempt."""
    span = max(1, max_ms - min_ms)
    return (min_ms + (ctx.run_id * 7919 + ctx.attempt * 104729) % span) / 1000


@app.task(max_attempts=MAX_ATTEMPTS)
def sleepy(ctx: Context, min_ms: int = MIN_MS, max_ms: int = MAX_MS) -> dict[str, int]:
    """A sync handler: waits on the cancellation event, as a well-behaved one does."""
    _record("start", ctx)
    try:
        cancelled = ctx.cancelled.wait(duration(ctx, min_ms, max_ms))
    except BaseException:
        _record("end", ctx, outcome="error")
        raise
    _record("end", ctx, outcome="cancelled" if cancelled else "ok")
    return {"token": ctx.fencing_token, "pid": os.getpid()}


@app.task(max_attempts=MAX_ATTEMPTS)
async def sleepy_async(ctx: Context, min_ms: int = MIN_MS, max_ms: int = MAX_MS) -> dict[str, int]:
    """An async handler: the worker cancels its task when it stops caring."""
    _record("start", ctx)
    try:
        await asyncio.sleep(duration(ctx, min_ms, max_ms))
    except asyncio.CancelledError:
        _record("end", ctx, outcome="cancelled")
        raise
    except BaseException:
        _record("end", ctx, outcome="error")
        raise
    _record("end", ctx, outcome="ok")
    return {"token": ctx.fencing_token, "pid": os.getpid()}
