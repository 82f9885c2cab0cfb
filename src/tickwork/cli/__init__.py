"""The ``tickwork`` command line: a thin adapter over the client, with typer and rich.

How the package is laid out:

- :mod:`tickwork.cli.app` holds the typer ``app`` and :func:`~tickwork.cli.app.run`, the
  mapping of errors to exit codes; :mod:`tickwork.cli.output` what a command prints (plain
  lines, JSON, the one-line error message); :mod:`tickwork.cli.options` the options
  several commands share (``DbOption``, ``JsonOption`` ...); :mod:`tickwork.cli.serve` what
  the long-running commands share. None of them imports a command module.
- One module per command or command group (``next.py``, ``db.py``, ``run.py`` ...). Each
  registers itself on the shared app when imported::

      from tickwork.cli.app import app
      from tickwork.cli.options import DbOption
      from tickwork.cli.output import echo

      @app.command("jobs")
      def jobs(db: DbOption = "") -> None:
          ...  # raise TickworkError subclasses for errors; never sys.exit()

- This module imports every command module, in the explicit list below: add yours there.
  ``main`` is the console script (``tickwork = "tickwork.cli:main"``) and the body of
  ``python -m tickwork``.

Errors are mapped in one place, :func:`tickwork.cli.app.run`: a ValidationError or a
usage error exits 2, any other TickworkError exits 1, each with one line on stderr
(``tickwork: error: <message>``) and no traceback.
"""

from __future__ import annotations

from collections.abc import Sequence

# The command modules, imported for the commands they register on `app`. Add yours here.
from tickwork.cli import (  # noqa: F401
    all_in_one,
    api,
    bench,
    bulk,
    calendars,
    cluster,
    commands,
    db,
    explain,
    jobs,
    keys,
    next,
    runs,
    scheduler,
    submit,
    tenants,
    worker,
)
from tickwork.cli.app import app, run


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    return run(argv)


__all__ = ["app", "main"]
