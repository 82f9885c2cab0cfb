"""The ``tickwork`` typer app every command module registers on, and :func:`run`, the one
place errors become exit codes.

This module imports no command module, so a command module can import it without a cycle
(``from tickwork.cli.app import app``); :mod:`tickwork.cli` imports the command modules.
"""

from __future__ import annotations

from collections.abc import Sequence

import typer

# typer >= 0.29 vendors click privately; this is the one click exception it does not
# re-export that we must tell apart (it carries the help text, not an error message).
from typer._click.exceptions import NoArgsIsHelpError

from tickwork.cli.output import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    error,
    stderr,
)
from tickwork.errors import TickworkError, ValidationError

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
