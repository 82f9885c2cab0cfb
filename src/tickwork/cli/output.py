"""What a command prints: plain lines, JSON, the one error line and its exit code.

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
import sys
from functools import cache
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import typer

if TYPE_CHECKING:
    from rich.console import Console

PROG = "tickwork"
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


@cache
def _console(to_stderr: bool) -> Console:
    from rich.console import (
        Console,  # here, not at the top: rich costs start-up: only once it prints
    )

    return Console(stderr=to_stderr, highlight=False, soft_wrap=True, emoji=False)


def __getattr__(name: str) -> Any:
    # ``stdout`` and ``stderr``, rich consoles made on first use, so that a command that
    # prints nothing through rich (``--help``, ``--version``) does not import it.
    if name in ("stdout", "stderr"):
        return _console(name == "stderr")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def echo(text: str) -> None:
    """One line of plain text on stdout: no markup, no highlighting, no wrapping; control
    and bidi characters in it (from names, errors, output) are written as their codes, so
    they cannot drive the terminal or reorder the line."""
    from tickwork.job import show_controls  # here, not at the top: job imports the schedules

    shown = show_controls(text)
    if "\t" in shown or "\r" in shown:
        # rich writes a tab as spaces to the next tab stop and drops a carriage return
        _console(False).print(shown, markup=False)
    else:
        _write_line(shown)


def echo_json(value: Any) -> None:
    """``value`` as JSON on stdout, for scripts (``--json``)."""
    _write_line(json.dumps(value, ensure_ascii=False))  # JSON holds no tab, no CR


def _write_line(line: str) -> None:
    # What rich's console writes for a line with neither tab nor carriage return (and
    # then it flushes), without importing rich: ``tickwork next`` prints nothing else.
    sys.stdout.write(f"{line}\n")
    sys.stdout.flush()


def _line(kind: str, style: str, message: str) -> None:
    from rich.text import Text  # here, not at the top: as _console

    line = " ".join(message.splitlines())
    _console(True).print(Text.assemble(f"{PROG}: ", (f"{kind}:", style), f" {line}"))


def error(message: str) -> None:
    """The one error line on stderr: ``tickwork: error: <message>``."""
    _line("error", "bold red", message or "unknown error")


def warn(message: str) -> None:
    """One warning line on stderr, ``tickwork: warning: <message>``; the command goes on."""
    _line("warning", "bold yellow", message)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Stop a command with an error line and ``code`` (default: bad input, 2)."""
    error(message)
    raise typer.Exit(code)


def write_stderr(text: str) -> None:
    """Text on stderr as it is (the help of a bare ``tickwork``)."""
    sys.stderr.write(text)


def redact(url: str) -> str:
    """``url`` without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
