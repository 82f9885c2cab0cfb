"""What every command module shares: the ``app``, the error mapping, ``--db``, printing.

This module imports no command module, so a command module can import it without a cycle
(``from tickwork.cli.output import app``); :mod:`tickwork.cli` imports the command modules.

Exit codes and the error line (the same for every command)::

    0    success
    1    the request was understood but failed: NotFound, InvalidTransition, a store
         error ... (any TickworkError that is not a ValidationError)
    2    bad input: a ValidationError, or a usage error (unknown option, bad -n, ...)
    130  interrupted (Ctrl-C)

An error is one line on stderr, ``tickwork: error: <message>``, and never a traceback;
stdout gets nothing from a failed command. Only a bug (an exception that is not a
TickworkError) prints a traceback.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Annotated, Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.console import Console
from rich.text import Text

# typer >= 0.29 vendors click privately; this is the one click exception it does not
# re-export that we must tell apart (it carries the help text, not an error message).
from typer._click.exceptions import NoArgsIsHelpError

from tickwork.config import DB_ENV, DEFAULT_DB_URL, Config, resolve_db_url
from tickwork.errors import TickworkError, ValidationError
from tickwork.job import show_controls
from tickwork.schedule import format_seconds, parse_duration

PROG = "tickwork"
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

app = typer.Typer(
    name=PROG,
    no_args_is_help=True,
    add_completion=False,
    # Tracebacks are for bugs only; their locals could hold a database password.
    pretty_exceptions_show_locals=False,
    help="tickwork runs jobs on time, once per slot, across many machines.",
)


@app.callback()
def _root() -> None:
    """tickwork runs jobs on time, once per slot, across many machines."""
    # A callback keeps `app` a group even while it has a single command: without it typer
    # would run that command for `tickwork ARGS` instead of `tickwork next ARGS`.


stdout = Console(highlight=False, soft_wrap=True, emoji=False)
stderr = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def echo(text: str) -> None:
    """One line of plain text on stdout: no markup, no highlighting, no wrapping; control
    and bidi characters in it (from names, errors, output) are written as their codes, so
    they cannot drive the terminal or reorder the line."""
    stdout.print(show_controls(text), markup=False)


def echo_json(value: Any) -> None:
    """``value`` as JSON on stdout, for scripts (``--json``)."""
    stdout.print(json.dumps(value, ensure_ascii=False), markup=False)


def error(message: str) -> None:
    """The one error line on stderr: ``tickwork: error: <message>``."""
    line = " ".join(message.splitlines()) or "unknown error"
    stderr.print(Text.assemble(f"{PROG}: ", ("error:", "bold red"), f" {line}"))


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Stop a command with an error line and ``code`` (default: bad input, 2)."""
    error(message)
    raise typer.Exit(code)


def exit_code(exc: TickworkError) -> int:
    """2 for bad input (nothing was done), 1 for anything else tickwork refused."""
    return EXIT_USAGE if isinstance(exc, ValidationError) else EXIT_FAILURE


def run(argv: Sequence[str] | None = None, *, cli: typer.Typer = app) -> int:
    """Run ``cli`` (the ``tickwork`` app) on ``argv`` (default ``sys.argv[1:]``) and map
    errors to exit codes.

    The only place errors become exit codes: command modules raise TickworkError (or call
    :func:`fail`) and return nothing. Test a command in-process with ``run([...])`` (or
    :func:`tickwork.cli.main`); typer's ``CliRunner`` would bypass this mapping.
    """
    try:
        result = cli(
            args=list(argv) if argv is not None else None,
            prog_name=PROG,
            standalone_mode=False,
        )
    except TickworkError as exc:
        error(str(exc) or type(exc).__name__)
        return exit_code(exc)
    except NoArgsIsHelpError as exc:
        # `tickwork` alone: the help is the message (typer's rich help prints it itself
        # and leaves the message empty); a usage error all the same, as in click.
        if exc.format_message().strip():
            stderr.print(exc.format_message(), markup=False)
        return EXIT_USAGE
    except typer.TyperException as exc:  # click's ClickException: usage errors and the like
        error(exc.format_message())
        return exc.exit_code
    except typer.Abort:
        error("aborted")
        return EXIT_INTERRUPTED
    # standalone_mode=False returns typer.Exit's code, or the command's return value.
    return result if isinstance(result, int) else EXIT_OK


def _resolve_db(value: str) -> str:
    return resolve_db_url(value or None)


DbOption = Annotated[
    str,
    typer.Option(
        "--db",
        metavar="URL",
        callback=_resolve_db,
        show_default=False,
        help=f"Database URL (sqlite:///PATH or postgresql://...); else ${DB_ENV}, "
        f"else {DEFAULT_DB_URL}.",
    ),
]
"""The ``--db`` option; the command receives the resolved URL. Declare it as
``db: DbOption = ""`` (the empty default means: not given)."""


# -- long-running commands (run, scheduler, worker, api) ---------------------------------------

LOG_FORMATS = ("text", "json")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

LogLevelOption = Annotated[
    str, typer.Option("--log-level", metavar="LEVEL", help="DEBUG, INFO, WARNING, ERROR.")
]
LogFormatOption = Annotated[
    str, typer.Option("--log-format", metavar="FORMAT", help="text or json (one object a line).")
]


def duration_option(flag: str, what: str) -> Any:
    """A duration flag (``500ms``, ``2s``, ``5m``) for a Config field, whose help names its
    default and its environment variable (``--run-lease`` and ``TICKWORK_RUN_LEASE``)."""
    name = flag[2:].replace("-", "_")
    default = getattr(Config(), name)
    return typer.Option(
        flag,
        metavar="DURATION",
        show_default=False,
        help=f"{what}. Default {format_seconds(default.total_seconds())}; "
        f"env TICKWORK_{name.upper()}.",
    )


def duration_flag(name: str, raw: str | None) -> timedelta | None:
    """A duration flag's value, or None when it was not given."""
    return None if raw is None else parse_duration(raw, field=name)


def redact(url: str) -> str:
    """``url`` without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts``, ``level``, ``logger``, ``msg`` (and ``exc``)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, fmt: str) -> None:
    """Log lines to stderr: plain text (``ts level logger: message``) or JSON."""
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
            "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s",
            datefmt="%Y-%m-%dT%H:%M:%S",
        )
        text.converter = time.gmtime
        handler.setFormatter(text)
    root = logging.getLogger("tickwork")
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    root.propagate = False


def serve_until_signal(
    start: Callable[[], None],
    stop: Callable[[], None],
    *,
    hurry: Callable[[], None] | None = None,
) -> None:
    """Run a long-lived command: ``start()``, wait for SIGTERM or SIGINT, then ``stop()``.

    A second signal during ``stop()`` calls ``hurry()`` (cut a grace period short). Signal
    handlers are restored on the way out, so tests can call commands in-process.
    """
    stopping = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if stopping.is_set() and hurry is not None:
            hurry()
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        start()
        try:
            while not stopping.wait(1.0):
                pass
            logging.getLogger("tickwork").info("stopping on %s", signal.Signals(received[0]).name)
        finally:
            stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
