"""The ``tickwork`` command line: a thin adapter over the client, with typer.

How the package is laid out:

- :mod:`tickwork.cli.app` holds the typer ``app``, the command map (:data:`COMMANDS`: every
  top-level command, the modules that register it, its panel in ``--help``) and
  :func:`~tickwork.cli.app.run`, the mapping of errors to exit codes;
  :mod:`tickwork.cli.output` what a command prints (plain lines, JSON, the one-line error
  message); :mod:`tickwork.cli.options` the options several commands share (``DbOption``,
  ``JsonOption`` ...); :mod:`tickwork.cli.help` how ``--help`` reads;
  :mod:`tickwork.cli.serve` what the long-running commands share. None of them imports a
  command module.
- One module per command or noun group (``next.py``, ``jobs.py``, ``db.py`` ...). Each
  registers itself on the shared app when imported::

      from tickwork.cli.app import app
      from tickwork.cli.options import DbOption
      from tickwork.cli.output import echo

      @app.command("queues")
      def queues(db: DbOption = "") -> None:
          ...  # raise TickworkError subclasses for errors; never sys.exit()

  and names itself in the map, which imports the module only when its command runs: a
  command pays for its own imports only (``tickwork --help`` imports none).
- Jobs and runs are noun groups, like ``tenants`` and ``keys``: ``tickwork jobs`` lists,
  ``tickwork jobs pause 12`` acts; ``tickwork runs``, ``tickwork runs retry 41``. The
  verbs of before (``pause 12``, ``retry 41``, ``dead``, ``retry-all`` ...) stay as hidden
  aliases. ``tickwork run`` is the all-in-one server, as it always was (docs/cli.md).

``main`` is the console script (``tickwork = "tickwork.cli:main"``) and the body of
``python -m tickwork``.

Errors are mapped in one place, :func:`tickwork.cli.app.run`: a ValidationError or a
usage error exits 2, any other TickworkError exits 1, each with one line on stderr
(``tickwork: error: <message>``) and no traceback.
"""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.cli.app import app, run


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    return run(argv)


__all__ = ["app", "main"]
