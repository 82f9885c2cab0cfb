"""What the long-running commands (``run``, ``scheduler``, ``worker``, ``api``) share: log
lines as text or JSON, and running until SIGTERM or SIGINT.

Log lines nobody can forge
--------------------------
Log lines carry values callers chose: a request's path and query, its ``Origin`` and
``Referer``, an ``http`` job's URL, a tenant's name, a handler's error text. Written raw,
a ``%0A`` in a path would start a log line of the caller's choosing, and a ``%1B`` would
send escape sequences to the terminal of whoever reads the log. So both formatters write
every record as exactly one line, whatever its values hold, for every logger they serve
(tickwork's, and uvicorn's, which ``tickwork api`` routes to the same handler):

- **text** (:class:`TextFormatter`): the line (time, level, logger, message, run context)
  has its control characters written as escapes (:func:`escape_controls`: C0 and DEL,
  C1, the line and paragraph separators U+2028 and U+2029, and the bidirectional controls
  U+202A to U+202E and U+2066 to U+2069, as ``\\n``, ``\\x1b``, ``\\u2028`` ...). A
  traceback keeps its lines, as Python writes them, but the text of each exception in
  it (its message and notes) is escaped the same way, so no line of it starts where an
  exception's message says.
- **json** (:class:`JsonFormatter`): JSON escapes C0 itself; DEL, C1, the separators and
  the bidirectional controls are written as ``\\u`` escapes too (Python's ``splitlines``
  and many log shippers break lines at U+2028 and U+0085). The values are intact once
  the line is parsed.

The escaping is in the formatters, not at each call site, so a new log line is covered
without thinking of it; an application that logs through its own handlers can use
these two formatters (with :class:`~tickwork.worker.observe.RunContextFilter`).
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
import traceback
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from tickwork.errors import ValidationError
from tickwork.job import BIDI_CONTROLS
from tickwork.tasks.logcontext import RunContextFilter, run_fields

LOG_FORMATS = ("text", "json")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


_TEXT_ESCAPES = {
    **{code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))},
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    **{ord(ch): f"\\u{ord(ch):04x}" for ch in {"\u2028", "\u2029", *BIDI_CONTROLS}},
}
_JSON_ESCAPES = {
    code: f"\\u{code:04x}"
    for code in (0x7F, *range(0x80, 0xA0), 0x2028, 0x2029, *map(ord, BIDI_CONTROLS))
}
"""What ``json.dumps`` leaves raw (with ``ensure_ascii=False``) that still breaks a line or
drives a terminal; inside a JSON string, so its ``\\u`` escape reads back the same."""
TEXT_FORMAT = "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s%(run_context)s"
TEXT_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"


def escape_controls(text: str) -> str:
    """``text`` with every character that could end a log line or drive a terminal written
    as an escape: ``"a\\nb\\x1b"`` -> ``"a\\\\nb\\\\x1b"`` (see the module docstring)."""
    return text.translate(_TEXT_ESCAPES)


class TextFormatter(logging.Formatter):
    """``2030-01-07T09:00:00.123Z INFO tickwork.web: message [run=12 ...]``, in UTC: one
    line per record, control characters escaped (the module docstring), then a traceback,
    if any, whose exceptions' messages are escaped too."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT, datefmt=TEXT_DATE_FORMAT)
        self.converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        record.asctime = self.formatTime(record, self.datefmt)
        text = escape_controls(self.formatMessage(record))
        # Not cached on the record (as logging.Formatter does): another handler's formatter
        # must not get this one's escaping.
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text

    def formatException(self, ei: Any) -> str:
        """The traceback, each exception's message and notes escaped: a message can hold
        a caller's value (a name, a URL), the frames hold tickwork's own code."""
        _, value, tb = ei
        if value is None:
            return ""
        found = traceback.TracebackException(type(value), value, tb, compact=True)
        _escape_exception_texts(found)
        return "".join(found.format()).rstrip("\n")


def _escape_exception_texts(top: traceback.TracebackException) -> None:
    pending, seen = [top], set()
    while pending:
        found = pending.pop()
        if id(found) in seen:
            continue
        seen.add(id(found))
        text = getattr(found, "_str", None)  # what format_exception_only writes (3.11+)
        if isinstance(text, str):
            found._str = escape_controls(text)  # type: ignore[attr-defined]
        notes = getattr(found, "__notes__", None)
        if isinstance(notes, list | tuple):
            found.__notes__ = [escape_controls(str(note)) for note in notes]
        pending.extend(t for t in (found.__cause__, found.__context__) if t is not None)
        pending.extend(getattr(found, "exceptions", None) or ())


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
        return json.dumps(entry, ensure_ascii=False, default=str).translate(_JSON_ESCAPES)


def configure_logging(level: str, fmt: str) -> None:
    """Log lines to stderr: plain text (``ts level logger: message``, then `` [run=12 job=3
    attempt=1 tenant=acme]`` for a line a handler logged) or JSON, one line a record
    whatever the values in it (the module docstring). Handlers' lines through
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
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
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
