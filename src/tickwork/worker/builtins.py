"""Built-in tasks that need no Python code: ``shell`` and ``http``.

``shell`` -- args ``{"argv": ["cmd", "arg", ...], "cwd": "/dir", "env": {"K": "V"}}``
    Runs ``argv`` (no shell: write ``["sh", "-c", "..."]`` for one) with the worker's
    environment plus ``env`` and ``TICKWORK_RUN_ID``, ``TICKWORK_JOB_ID``,
    ``TICKWORK_ATTEMPT``, ``TICKWORK_SCHEDULED_FOR`` (ISO-8601 UTC). The run's ``result``
    keeps ``exit_code`` and the last 4 KiB of ``stdout`` and ``stderr``; a non-zero exit
    fails the attempt (retried per the job's policy). A worker runs shell tasks only when
    started with ``--allow-shell``; any other worker that claims one fails it ``dead`` with
    a message saying so (see :mod:`tickwork.worker`), so route shell jobs to a queue that
    only shell-enabled workers consume.

``http`` -- args ``{"url": "https://...", "method": "POST", "headers": {...}, "json": ...}``
    One request (``method`` defaults to GET, or POST when ``json`` is given), with the
    headers ``X-Tickwork-Run-Id`` and ``X-Tickwork-Attempt`` so the receiver can
    deduplicate. 2xx succeeds; 408, 429, 5xx, timeouts and connection errors fail the
    attempt and are retried (honouring a ``Retry-After`` of seconds); any other status
    (4xx, an unfollowed 3xx) ends the run ``dead``: sending it again cannot help. The
    ``result`` keeps ``status`` and the last 4 KiB of the body.

How a shell command's process tree dies with its run
----------------------------------------------------
The command does not run as the worker's direct child. The worker starts a tiny Python
*shim* (:mod:`tickwork.worker.shellshim`) in a new session (so a new process group, out
of reach of the terminal's Ctrl-C), and the shim forks and execs the command inside that
group. Then:

- when the run ends, times out, is cancelled, loses its lease or is released, the worker
  kills the whole group (SIGKILL). The same happens right after the command exits: a run
  owns its process group, and whatever it left running there dies with it;
- when the worker dies without a chance to clean up (SIGKILL, OOM killer), the kernel sends
  the shim SIGTERM (``prctl(PR_SET_PDEATHSIG)``), and the shim kills the group, itself
  included, with SIGKILL. So no orphan keeps working behind the back of the retry that the
  expired lease will cause.

The shim sets PDEATHSIG itself, after exec, rather than in a ``preexec_fn``: code between
fork and exec in a multi-threaded worker may deadlock on a lock another thread held, and
the shim can close the race (the worker dying before prctl) by checking ``getppid``.
PDEATHSIG fires when the *thread* that forked dies; the worker forks from a handler thread
that waits for the command, so that thread outlives it. Only a process that leaves the
group on purpose (``setsid``) escapes, as it would escape any process-group kill.
PDEATHSIG is Linux-only: elsewhere the group is still killed on every exit path the
worker lives through.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import UTC
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from tickwork.errors import InvalidArgs
from tickwork.worker.task import Context, Discard, Retry, Task, TaskFailed

SHELL = "shell"
HTTP = "http"

OUTPUT_TAIL_BYTES = 4096
"""Bytes kept from the end of a command's stdout and stderr, and of an HTTP response body."""
DRAIN_TIMEOUT = 2.0
"""Seconds to keep reading a command's pipes after its process group was killed."""
POLL_SECONDS = 0.05
"""How often a running command checks whether its run was cancelled."""
HTTP_TIMEOUT = 30.0
"""Seconds an HTTP request may take when its job sets no timeout."""
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
RETRYABLE_STATUS = frozenset({408, 429})
USER_AGENT = "tickwork"

SHIM = str(Path(__file__).with_name("shellshim.py"))


# -- shell ----------------------------------------------------------------------------------


def check_shell_args(args: dict[str, Any]) -> None:
    unknown = set(args) - {"argv", "cwd", "env"}
    if unknown:
        raise InvalidArgs(f"shell takes argv, cwd and env; unknown: {', '.join(sorted(unknown))}")
    argv = args.get("argv")
    if (
        not isinstance(argv, list)
        or not argv
        or not all(isinstance(a, str) for a in argv)
        or not argv[0]
    ):
        raise InvalidArgs('shell needs "argv": a non-empty list of strings, the command first')
    if args.get("cwd") is not None and not isinstance(args["cwd"], str):
        raise InvalidArgs('shell "cwd" must be a string')
    env = args.get("env")
    if env is not None and not (
        isinstance(env, dict) and all(isinstance(v, str) for v in env.values())
    ):
        raise InvalidArgs('shell "env" must be an object of string values')


def shell(
    ctx: Context, argv: list[str], cwd: str | None = None, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run a command; its exit code and output tails are the result."""
    child_env = {
        **os.environ,
        **(env or {}),
        "TICKWORK_RUN_ID": str(ctx.run_id),
        "TICKWORK_JOB_ID": str(ctx.job_id),
        "TICKWORK_ATTEMPT": str(ctx.attempt),
        "TICKWORK_SCHEDULED_FOR": ctx.scheduled_for.astimezone(UTC).isoformat(),
    }
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", SHIM, str(os.getpid()), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=child_env,
        start_new_session=True,
    )
    ctx.logger.info("started %s (pid %d)", argv[0], proc.pid)
    assert proc.stdout is not None
    assert proc.stderr is not None
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    tails = {out: bytearray(), err: bytearray()}
    try:
        _pump(proc, tails, ctx)
    finally:
        _kill_group(proc.pid)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    stderr = _text(tails[err])
    result: dict[str, Any] = {
        "exit_code": proc.returncode,
        "stdout": _text(tails[out]),
        "stderr": stderr,
    }
    if ctx.cancelled.is_set():
        raise TaskFailed("command was killed: its run was stopped", result=result)
    if proc.returncode != 0:
        how = (
            f"killed by signal {-proc.returncode}"
            if proc.returncode < 0
            else f"exited with code {proc.returncode}"
        )
        last = stderr.strip().splitlines()[-1:] or [""]
        raise TaskFailed(
            f"command {how}" + (f": {last[0][:200]}" if last[0] else ""), result=result
        )
    return result


def _pump(proc: subprocess.Popen[bytes], tails: dict[int, bytearray], ctx: Context) -> None:
    """Read both pipes into their tails until the command has exited and they are closed."""
    drain_deadline: float | None = None
    with selectors.DefaultSelector() as sel:
        for fd in tails:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        while True:
            if not sel.get_map():
                ctx.cancelled.wait(POLL_SECONDS)  # the command closed its pipes; still running
            for key, _ in sel.select(POLL_SECONDS) if sel.get_map() else ():
                fd = int(key.fd)
                chunk = os.read(fd, 65536)
                if not chunk:
                    sel.unregister(fd)
                    continue
                tail = tails[fd]
                tail += chunk
                del tail[:-OUTPUT_TAIL_BYTES]
            if drain_deadline is None and (ctx.cancelled.is_set() or _exited(proc.pid)):
                # The command is over (or must be): anything left in its group dies now,
                # which also closes pipes a leftover grandchild still held.
                _kill_group(proc.pid)
                drain_deadline = time.monotonic() + DRAIN_TIMEOUT
            if drain_deadline is not None and (
                not sel.get_map() or time.monotonic() > drain_deadline
            ):
                return


def _exited(pid: int) -> bool:
    # WNOWAIT: leave the shim unreaped, so its pid (the group id) cannot be reused by an
    # unrelated process before the group is killed.
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is empty
        os.killpg(pgid, signal.SIGKILL)


def _text(tail: bytes | bytearray) -> str:
    return bytes(tail).decode("utf-8", errors="replace")


# -- http -----------------------------------------------------------------------------------


def check_http_args(args: dict[str, Any]) -> None:
    unknown = set(args) - {"url", "method", "headers", "json"}
    if unknown:
        raise InvalidArgs(
            f"http takes url, method, headers and json; unknown: {', '.join(sorted(unknown))}"
        )
    url = args.get("url")
    if not isinstance(url, str):
        raise InvalidArgs('http needs "url": an http:// or https:// URL')
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidArgs(f"http url {url!r} is not an absolute http:// or https:// URL")
    method = args.get("method")
    if method is not None and (not isinstance(method, str) or method.upper() not in HTTP_METHODS):
        raise InvalidArgs(f"http method {method!r} is not one of {', '.join(sorted(HTTP_METHODS))}")
    headers = args.get("headers")
    if headers is not None and not (
        isinstance(headers, dict) and all(isinstance(v, str) for v in headers.values())
    ):
        raise InvalidArgs('http "headers" must be an object of string values')


def http(
    ctx: Context,
    url: str,
    method: str | None = None,
    headers: dict[str, str] | None = None,
    json: Any = None,
) -> dict[str, Any]:
    """Send one request; the status and the body's tail are the result."""
    body = None if json is None else _dumps(json)
    request = urllib.request.Request(
        url,
        data=body,
        method=(method or ("GET" if body is None else "POST")).upper(),
        headers={
            "User-Agent": USER_AGENT,
            **({"Content-Type": "application/json"} if body is not None else {}),
            **(headers or {}),
            "X-Tickwork-Run-Id": str(ctx.run_id),
            "X-Tickwork-Attempt": str(ctx.attempt),
        },
    )
    timeout = ctx.timeout.total_seconds() if ctx.timeout else HTTP_TIMEOUT
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, body_tail = response.status, _read_tail(response)
            retry_after = None
    except urllib.error.HTTPError as exc:
        with exc:
            status, body_tail = exc.code, _read_tail(exc)
            retry_after = exc.headers.get("Retry-After") if exc.headers else None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise TaskFailed(f"{request.method} {url}: {reason}") from None
    result = {"status": status, "body": body_tail}
    if 200 <= status < 300:
        return result
    message = f"{request.method} {url} answered HTTP {status}"
    if status >= 500 or status in RETRYABLE_STATUS:
        after = _retry_after_seconds(retry_after)
        if after is not None:
            raise Retry(after=after, reason=message, result=result)
        raise TaskFailed(message, result=result)
    raise Discard(f"{message}; sending it again cannot help", result=result)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _read_tail(stream: IO[bytes]) -> str:
    tail = bytearray()
    while chunk := stream.read(65536):
        tail += chunk
        del tail[:-OUTPUT_TAIL_BYTES]
    return _text(tail)


def _retry_after_seconds(header: str | None) -> float | None:
    """Only the seconds form; an HTTP date falls back to the job's backoff."""
    if header is None:
        return None
    try:
        seconds = float(header.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


BUILTINS: Mapping[str, Task[..., Any]] = {
    SHELL: Task(SHELL, shell, validate=check_shell_args, builtin=True),
    HTTP: Task(HTTP, http, validate=check_http_args, builtin=True),
}
