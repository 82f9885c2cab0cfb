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
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.console import Console
from rich.text import Text

from tickwork.job import show_controls

PROG = "tickwork"
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


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


def warn(message: str) -> None:
    """One warning line on stderr, ``tickwork: warning: <message>``; the command goes on."""
    line = " ".join(message.splitlines())
    stderr.print(Text.assemble(f"{PROG}: ", ("warning:", "bold yellow"), f" {line}"))


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Stop a command with an error line and ``code`` (default: bad input, 2)."""
    error(message)
    raise typer.Exit(code)


def redact(url: str) -> str:
    """``url`` without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
