"""The app the end-to-end tests run under ``tickwork run --app run_app``.

Each execution appends one JSON line (task, run, attempt, wall time) to the file named by
``TICKWORK_TEST_RECORD``, so the test sees every execution, its attempt and its timing.
"""

from __future__ import annotations

import json
import os
import time

from tickwork import App, Context, Retry

app = App()


def record(task: str, ctx: Context) -> None:
    line = {
        "task": task,
        "run": ctx.run_id,
        "job": ctx.job_id,
        "attempt": ctx.attempt,
        "slot": ctx.scheduled_for.isoformat(),
        "at": time.time(),
    }
    fd = os.open(os.environ["TICKWORK_TEST_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


@app.task
def tick(ctx: Context) -> None:
    record("tick", ctx)


@app.task(max_attempts=3, backoff=(0.5, 1.0))
def flaky(ctx: Context) -> None:
    """Fails its first two attempts, succeeds on the third."""
    record("flaky", ctx)
    if ctx.attempt < 3:
        raise RuntimeError(f"flaky failure on attempt {ctx.attempt}")


@app.task(max_attempts=3)
def polite(ctx: Context) -> None:
    """Asks for its retry 0.6 s later, once."""
    record("polite", ctx)
    if ctx.attempt == 1:
        raise Retry(after=0.6)


@app.task(max_attempts=2, backoff=(0.1, 0.2))
def hopeless(ctx: Context) -> None:
    record("hopeless", ctx)
    raise ValueError("this task always fails")
