"""What the long-running commands (``run``, ``scheduler``, ``worker``, ``api``) share: log
lines as text or JSON, and running until SIGTERM or SIGINT.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from tickwork.errors import ValidationError
from tickwork.worker.observe import RunContextFilter, run_fields

LOG_FORMATS = ("text", "json")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts``, ``level``, ``logger``, ``msg`` (and ``exc``); a line
    a handler logged also has ``run_id``, ``job_id``, ``attempt`` and ``tenant``, and one
    logged in an OpenTelemetry span ``trace_id`` and ``span_id`` (set by
    :class:`~tickwork.worker.observe.RunContextFilter`)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **run_fields(record),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, fmt: str) -> None:
    """Log lines to stderr: plain text (``ts level logger: message``, then `` [run=12 job=3
    attempt=1 tenant=acme]`` for a line a handler logged) or JSON. Handlers' lines through
    ``ctx.logger`` (``tickwork.task.<task>``) and any ``tickwork.*`` logger come here; for
    your own loggers, add :class:`~tickwork.worker.observe.RunContextFilter` to your own
    handler."""
    if fmt not in LOG_FORMATS:
        raise ValidationError(
            f"--log-format must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}",
            field="log_format",
        )
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValidationError(f"unknown log level {level!r}", field="log_level")
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        text = logging.Formatter(
            "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s%(run_context)s",
            datefmt="%Y-%m-%dT%H:%M:%S",
        )
        text.converter = time.gmtime
        handler.setFormatter(text)
    handler.addFilter(RunContextFilter())
    root = logging.getLogger("tickwork")
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    root.propagate = False


StopWait = Callable[[float], bool]
"""``wait(seconds)``: wait that long, or less if a stop signal comes; True when one came."""


def serve_until_signal(
    start: Callable[[StopWait], None],
    stop: Callable[[], None],
    *,
    hurry: Callable[[], None] | None = None,
) -> None:
    """Run a long-lived command: ``start(wait)``, wait for SIGTERM or SIGINT, then ``stop()``.

    A ``start`` that waits for something (the database, at start during an outage) sleeps
    with ``wait(seconds)``, which a signal ends at once (True); it then returns early, and
    ``stop()`` runs as after any signal (so it must cope with a partial start).

    A second signal during ``stop()`` calls ``hurry()`` (cut a grace period short). Signal
    handlers are restored on the way out, so tests can call commands in-process.

    The handler only notes the signal and writes a byte to a pipe. A Python handler runs in
    the main thread between two of its bytecodes, maybe while that thread holds a lock (an
    ``Event``'s, a worker's); a handler that took the same lock would wait for itself for
    ever. So the main thread waits on the pipe, and ``hurry()`` runs on a thread of its own.
    The main thread looks at the pipe at least once a second: a signal the kernel gave
    another thread runs its Python handler only when the main thread next runs bytecode.
    """
    received: list[int] = []
    wake_r, wake_w = os.pipe()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        with suppress(BlockingIOError):  # a full pipe already says "signalled"
            os.write(wake_w, b"\0")

    previous: dict[signal.Signals, Any] = {}
    try:
        os.set_blocking(wake_w, False)
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, on_signal)
        start(lambda seconds: _wait_readable(wake_r, seconds))
        try:
            while not _wait_readable(wake_r, 1.0):
                pass
            os.read(wake_r, 1)  # one signal's byte: any further one hurries the stop
            logging.getLogger("tickwork").info("stopping on %s", signal.Signals(received[0]).name)
        finally:
            stopped = threading.Event()
            watcher = threading.Thread(
                target=_hurry_on_signal, args=(wake_r, stopped, hurry), name="tickwork-hurry"
            )
            watcher.start()
            try:
                stop()
            finally:
                stopped.set()
                watcher.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(wake_r)
        os.close(wake_w)


def _hurry_on_signal(
    wake_r: int, stopped: threading.Event, hurry: Callable[[], None] | None
) -> None:
    """While ``stop()`` runs, call ``hurry()`` for each further signal."""
    while not stopped.is_set():
        if _wait_readable(wake_r, 0.1):
            _drain(wake_r)
            if hurry is not None:
                hurry()


def _wait_readable(fd: int, timeout: float | None) -> bool:
    """Whether ``fd`` turns readable within ``timeout`` seconds (poll: any fd number)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else timeout * 1000))


def _drain(fd: int) -> None:
    while _wait_readable(fd, 0):
        os.read(fd, 64)
