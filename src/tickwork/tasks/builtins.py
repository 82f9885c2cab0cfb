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

``http`` -- args ``{"url": "https://...", "method": "POST", "headers": {...}, "json": ...,
"allow_private": false}``
    One request (``method`` defaults to GET, or POST when ``json`` is given), with the
    headers ``X-Tickwork-Run-Id`` and ``X-Tickwork-Attempt`` so the receiver can
    deduplicate. 2xx succeeds; 408, 429, 5xx, timeouts and connection errors fail the
    attempt and are retried (honouring a ``Retry-After`` of seconds); any other status
    (4xx, an unfollowed 3xx) ends the run ``dead``: sending it again cannot help. The
    ``result`` keeps ``status`` and the last 4 KiB of the body. The whole exchange,
    redirects and body included, takes at most the job's ``timeout`` (default 30 s).

    Error texts (and so the worker's log lines, which carry them) name a URL by
    :func:`shown_url`: its query values, fragment and any user info are ``***``, since a
    webhook's token often rides in its query; the headers and the body never appear.
    A URL with a control character or a space is refused at submit (HTTP cannot send it).

    Where it may connect is the worker's egress policy (:mod:`tickwork.tasks.egress`):
    public addresses, plus what the worker's ``--http-allow`` names, plus anything when
    the job says ``"allow_private": true`` (only an admin key may submit that over HTTP).
    A refused destination ends the run ``dead`` at once. Redirects (301, 302, 303, 307,
    308) are followed up to MAX_REDIRECTS, to http and https URLs only, each hop checked
    anew; a 303 (and a 301 or 302 after a POST) becomes a GET without the body, and the
    ``Authorization``, ``Cookie`` and ``Proxy-Authorization`` headers are not sent on to
    another origin. Proxy settings of the environment (``HTTP_PROXY`` ...) are not used:
    a proxy would connect where the policy cannot see.

How a shell command's process tree dies with its run
----------------------------------------------------
The command does not run as the worker's direct child. The worker starts a tiny Python
*shim* (:mod:`tickwork.tasks.shellshim`) in a new session (so a new process group, out
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
import functools
import json
import os
import re
import selectors
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urljoin, urlsplit, urlunsplit

from tickwork.errors import InvalidArgs
from tickwork.tasks.egress import EgressPolicy, EgressRefused
from tickwork.tasks.task import Context, Discard, Retry, Task, TaskFailed

if TYPE_CHECKING:
    # Imported where a run needs them, not here: the CLI imports this module (through the
    # task registry) and runs no task; http.client and ssl cost its start-up.
    import http.client
    import socket
    import ssl
    import subprocess

SHELL = "shell"
HTTP = "http"

OUTPUT_TAIL_BYTES = 4096
"""Bytes kept from the end of a command's stdout and stderr, and of an HTTP response body."""
DRAIN_TIMEOUT = 2.0
"""Seconds to keep reading a command's pipes after its process group was killed."""
POLL_SECONDS = 0.05
"""How often a running command checks whether its run was cancelled."""
HTTP_TIMEOUT = 30.0
"""Seconds an HTTP request may take (redirects and the body included) when its job sets no
timeout."""
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
RETRYABLE_STATUS = frozenset({408, 429})
USER_AGENT = "tickwork"
MAX_REDIRECTS = 5
"""Redirects an http run follows; one more ends it dead."""
REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
"""Headers meant for the URL's own origin: not sent on when a redirect leaves it."""
BODY_HEADERS = frozenset({"content-type", "content-length"})
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""A header name: an HTTP token (RFC 9110)."""
UNSENDABLE = re.compile(r"[\x00-\x20\x7f]")
"""What a URL cannot hold on the wire (http.client refuses it): controls and the space."""
DEFAULT_PORTS = {"http": 80, "https": 443}
READ_CHUNK = 65536
"""Bytes read from a response body at a time."""

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
    import subprocess

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
    unknown = set(args) - {"url", "method", "headers", "json", "allow_private"}
    if unknown:
        raise InvalidArgs(
            "http takes url, method, headers, json and allow_private; "
            f"unknown: {', '.join(sorted(unknown))}"
        )
    url = args.get("url")
    if not isinstance(url, str):
        raise InvalidArgs('http needs "url": an http:// or https:// URL')
    unsendable = UNSENDABLE.search(url)
    if unsendable is not None:
        what = "a space" if unsendable.group() == " " else "a control character"
        raise InvalidArgs(
            f"http url {shown_url(url)!r} holds {what} (U+{ord(unsendable.group()):04X}), "
            "which HTTP cannot send: percent-encode it"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- parsing it is the check
    except ValueError as exc:
        raise InvalidArgs(f"http url {shown_url(url)!r}: {exc}") from None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise InvalidArgs(f"http url {shown_url(url)!r} is not an absolute http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise InvalidArgs(
            f"http url {shown_url(url)!r} carries credentials: send them in an "
            '"Authorization" header instead'
        )
    method = args.get("method")
    if method is not None and (not isinstance(method, str) or method.upper() not in HTTP_METHODS):
        raise InvalidArgs(f"http method {method!r} is not one of {', '.join(sorted(HTTP_METHODS))}")
    headers = args.get("headers")
    if headers is not None and not (
        isinstance(headers, dict) and all(isinstance(v, str) for v in headers.values())
    ):
        raise InvalidArgs('http "headers" must be an object of string values')
    for name, value in (headers or {}).items():
        # Refused here rather than by http.client at run time, where it would fail every
        # attempt: a name or value that could end the header and start another.
        if not HEADER_NAME.fullmatch(name) or any(c in value for c in "\r\n\0"):
            raise InvalidArgs(
                f"http header {name!r}: names are tokens, values hold no line breaks or NUL"
            )
    allow_private = args.get("allow_private")
    if allow_private is not None and not isinstance(allow_private, bool):
        raise InvalidArgs('http "allow_private" must be true or false')


def http_task(policy: EgressPolicy) -> Task[..., dict[str, Any]]:
    """The ``http`` task, connecting only where ``policy`` allows. ``BUILTINS`` holds one
    with the default policy; a worker makes its own from its ``--http-allow``."""

    def http(
        ctx: Context,
        url: str,
        method: str | None = None,
        headers: dict[str, str] | None = None,
        json: Any = None,
        *,
        allow_private: bool = False,
    ) -> dict[str, Any]:
        """Send one request; the status and the body's tail are the result."""
        body = None if json is None else _dumps(json)
        first = _Outgoing(
            method=(method or ("GET" if body is None else "POST")).upper(),
            url=url,
            headers={
                "User-Agent": USER_AGENT,
                **({"Content-Type": "application/json"} if body is not None else {}),
                **(headers or {}),
                "X-Tickwork-Run-Id": str(ctx.run_id),
                "X-Tickwork-Attempt": str(ctx.attempt),
            },
            body=body,
        )
        return _request(first, policy=policy, ctx=ctx, allow_private=allow_private)

    return Task(HTTP, http, validate=check_http_args, builtin=True)


@dataclass(frozen=True, slots=True)
class _Outgoing:
    """One request of an http run: the job's own, or one a redirect made of it."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None

    def redirected(self, status: int, location: str) -> _Outgoing:
        """The request a redirect asks for, or Discard when it may not be followed."""
        following = urljoin(self.url, location)
        parts = urlsplit(following)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise Discard(
                f"{self.method} {shown_url(self.url)}: refused redirect to "
                f"{shown_url(following)!r}: only http:// and https:// URLs are followed"
            )
        try:
            parts.port  # noqa: B018 -- parsing it is the check
        except ValueError as exc:
            raise Discard(
                f"{self.method} {shown_url(self.url)}: refused redirect to "
                f"{shown_url(following)!r}: {exc}"
            ) from None
        method, headers, body = self.method, self.headers, self.body
        if _origin(parts) != _origin(urlsplit(self.url)):
            headers = {k: v for k, v in headers.items() if k.lower() not in CREDENTIAL_HEADERS}
        # As browsers do: a 303 fetches the result with a GET, and so do a 301 and a 302
        # after a POST; a 307 and a 308 repeat the request as it was.
        if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
            method, body = "GET", None
            headers = {k: v for k, v in headers.items() if k.lower() not in BODY_HEADERS}
        return _Outgoing(method, following, headers, body)


@dataclass(frozen=True, slots=True)
class _Answer:
    """What one request of an http run got back."""

    status: int
    location: str | None = None  # a redirect to follow
    retry_after: str | None = None
    body: str = ""


def _request(
    first: _Outgoing, *, policy: EgressPolicy, ctx: Context, allow_private: bool
) -> dict[str, Any]:
    """Send ``first``, follow its redirects, and say what the last answer means."""
    import http.client

    deadline = time.monotonic() + (ctx.timeout.total_seconds() if ctx.timeout else HTTP_TIMEOUT)
    outgoing = first
    for hop in range(MAX_REDIRECTS + 1):
        try:
            answer = _exchange(
                outgoing, policy=policy, ctx=ctx, deadline=deadline, allow_private=allow_private
            )
        except EgressRefused as exc:
            led = f" (a redirect from {shown_url(first.url)} led there)" if hop else ""
            raise Discard(f"{exc}{led}") from None
        except http.client.InvalidURL:
            # Its message repeats the URL whole, token and all.
            raise Discard(
                f"{outgoing.method} {shown_url(outgoing.url)}: the URL holds a control "
                "character or a space, which HTTP cannot send"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise TaskFailed(
                f"{outgoing.method} {shown_url(outgoing.url)}: {str(exc) or type(exc).__name__}"
            ) from None
        if answer.location is None:
            break
        if hop == MAX_REDIRECTS:
            raise Discard(
                f"{first.method} {shown_url(first.url)}: more than {MAX_REDIRECTS} redirects"
            )
        outgoing = outgoing.redirected(answer.status, answer.location)
    result = {"status": answer.status, "body": answer.body}
    if 200 <= answer.status < 300:
        return result
    message = f"{outgoing.method} {shown_url(outgoing.url)} answered HTTP {answer.status}"
    if answer.status >= 500 or answer.status in RETRYABLE_STATUS:
        after = _retry_after_seconds(answer.retry_after)
        if after is not None:
            raise Retry(after=after, reason=message, result=result)
        raise TaskFailed(message, result=result)
    raise Discard(f"{message}; sending it again cannot help", result=result)


def _exchange(
    outgoing: _Outgoing,
    *,
    policy: EgressPolicy,
    ctx: Context,
    deadline: float,
    allow_private: bool,
) -> _Answer:
    """One request on a connection of its own, made where ``policy`` allows."""
    from tickwork.tasks.connections import VettedHTTPConnection, VettedHTTPSConnection

    parts = urlsplit(outgoing.url)
    host, scheme = parts.hostname or "", parts.scheme
    port = parts.port or DEFAULT_PORTS[scheme]
    timeout = _time_left(deadline)
    connection: http.client.HTTPConnection
    if scheme == "https":
        connection = VettedHTTPSConnection(
            host, port, timeout=timeout, policy=policy, allow_private=allow_private,
            context=_tls_context(),
        )  # fmt: skip
    else:
        connection = VettedHTTPConnection(
            host, port, timeout=timeout, policy=policy, allow_private=allow_private
        )
    try:
        connection.request(
            outgoing.method, _path(parts), body=outgoing.body, headers=outgoing.headers
        )
        sock = connection.sock  # the response may outlive the connection's hold on it
        response = connection.getresponse()
        location = response.getheader("Location")
        if response.status in REDIRECT_STATUS and location:
            return _Answer(response.status, location=location)
        return _Answer(
            response.status,
            retry_after=response.getheader("Retry-After"),
            body=_read_tail(response, sock, deadline, ctx),
        )
    finally:
        connection.close()


def _origin(parts: SplitResult) -> tuple[str, str, int]:
    return parts.scheme, parts.hostname or "", parts.port or DEFAULT_PORTS[parts.scheme]


def _path(parts: SplitResult) -> str:
    """The request target: path and query (never the fragment)."""
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def shown_url(url: str) -> str:
    """``url`` as error texts and log lines name it: the value of each query parameter, the
    fragment and any user info replaced by ``***`` (a webhook's token often rides in its
    query); scheme, host, port and path as they are::

        https://hooks.example/ci?token=s3cr3t&page=2  ->  https://hooks.example/ci?token=***&page=***
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(a URL that does not parse)"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = "&".join(_shown_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, "***" if parts.fragment else ""))


def _shown_pair(pair: str) -> str:
    if not pair:
        return pair
    name, equals, _ = pair.partition("=")
    return f"{name}=***" if equals else "***"


def _time_left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out")
    return left


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One context for every https run (it is thread-safe, and loading the CA
    certificates per request would cost milliseconds each)."""
    import ssl

    return ssl.create_default_context()


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _read_tail(
    response: http.client.HTTPResponse, sock: socket.socket, deadline: float, ctx: Context
) -> str:
    """The last OUTPUT_TAIL_BYTES of the body, read by the deadline; a body that never ends
    cannot hold the worker's thread past it, nor past the run being stopped."""
    tail = bytearray()
    while True:
        sock.settimeout(_time_left(deadline))
        chunk = response.read1(READ_CHUNK)
        if not chunk:
            return _text(tail)
        if ctx.cancelled.is_set():
            raise TaskFailed("stopped while reading the body: its run was stopped")
        tail += chunk
        del tail[:-OUTPUT_TAIL_BYTES]


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
    HTTP: http_task(EgressPolicy()),
}
