"""The ``tickwork`` typer app every command module registers on, and :func:`run`, the one
place errors become exit codes.

This module imports no command module, so a command module can import it without a cycle
(``from tickwork.cli.app import app``). :data:`COMMANDS` is the command map: each top-level
command, the modules that register it, and its place in ``tickwork --help``. A module is
imported only when its command runs (:class:`Root`), so a command pays only for its own
imports. Add a command to the map when you add its module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Annotated, Any

import typer
from typer import _click as click

# typer >= 0.29 vendors click privately; this is the one click exception it does not
# re-export that we must tell apart (it carries the help text, not an error message).
from typer._click.exceptions import NoArgsIsHelpError
from typer._coercion import RuntimeParam, build_runtime_param
from typer.core import TyperCommand, TyperGroup, _TyperParameter

from tickwork.cli import help as helptext
from tickwork.cli.output import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    error,
    write_stderr,
)
from tickwork.errors import TickworkError, ValidationError

EVERYDAY, OPERATIONS, SERVERS = "Everyday", "Operations", "Servers"


@dataclass(frozen=True)
class Entry:
    """One top-level command in the map: the modules that register it (imported only when
    it runs), its panel in ``tickwork --help`` and its one line there. An alias has no
    panel: it runs, and ``--help`` names it only in the closing note."""

    name: str
    modules: tuple[str, ...]
    panel: str | None
    summary: str = ""


COMMANDS = (
    Entry("submit", ("submit",), EVERYDAY, "Submit a job and print its id; or many, --file."),
    Entry(
        "jobs",
        ("jobs", "commands", "explain"),
        EVERYDAY,
        "List jobs; act on one: jobs show|explain|pause|resume|trigger|cancel JOB_ID.",
    ),
    Entry(
        "runs",
        ("runs", "commands", "bulk"),
        EVERYDAY,
        "List runs; act on them: runs show|retry|cancel RUN_ID, runs dead|retry-all|cancel-all.",
    ),
    Entry("show", ("jobs",), EVERYDAY, "Show a job in full (same as jobs show JOB_ID)."),
    Entry("explain", ("explain",), EVERYDAY, "Say why a job did or did not run at a slot."),
    Entry("next", ("next",), EVERYDAY, "Print the next fire times of a cron expression."),
    Entry("queues", ("bulk",), OPERATIONS, "Backlog, running and consumers of each queue."),
    Entry("cluster", ("cluster",), OPERATIONS, "The leader and the nodes; cluster forget NODE."),
    Entry("tenants", ("tenants",), OPERATIONS, "Tenants' limits and their runs now."),
    Entry("calendars", ("calendars",), OPERATIONS, "Business-day calendars."),
    Entry("keys", ("keys",), OPERATIONS, "API keys of the HTTP API and the dashboard."),
    Entry("db", ("db",), OPERATIONS, "The database schema: migrate, status."),
    Entry("bench", ("bench",), OPERATIONS, "Measure submit, drain and start lag here."),
    Entry("run", ("all_in_one",), SERVERS, "Scheduler, worker and API in one process."),
    Entry("scheduler", ("scheduler",), SERVERS, "A scheduler node: lead or stand by."),
    Entry("worker", ("worker",), SERVERS, "A worker: claim runs and execute them."),
    Entry("api", ("api",), SERVERS, "The HTTP API, the dashboard and /metrics."),
    # The verbs of before the noun groups: they keep working, so no script breaks.
    Entry("pause", ("commands",), None),
    Entry("resume", ("commands",), None),
    Entry("trigger", ("commands",), None),
    Entry("cancel", ("commands",), None),
    Entry("retry", ("commands",), None),
    Entry("dead", ("commands",), None),
    Entry("retry-all", ("bulk",), None),
    Entry("cancel-all", ("bulk",), None),
)
"""The command map: ``tickwork --help`` lists it in this order, panel by panel."""
MAP = {entry.name: entry for entry in COMMANDS}
ALIASES_NOTE = (
    "Old verbs still work: pause, resume, trigger, cancel JOB_ID (jobs pause ...); "
    "retry RUN_ID, cancel --run RUN_ID (runs retry ...); dead, retry-all, cancel-all "
    "(runs dead ...). Servers: tickwork run is the all-in-one server, tickwork runs the "
    "list of runs. The map: docs/cli.md."
)


_NOT_PLAIN = object()
_INT_DIGITS = 18  # fewer than any int's limit: int() of these never raises on length


def _plain(annotation: Any, info: Any, value: Any) -> Any:
    """``value`` as typer's pydantic adapter would return it, for the values whose answer
    is plain (a ``str`` as it is, an ``int`` of ASCII digits within its bounds, a ``bool``);
    :data:`_NOT_PLAIN` for anything else, which goes to typer's adapter and its error."""
    kind = type(value)
    if annotation is str and kind is str:
        return value
    if annotation is bool and kind is bool:
        return value
    if annotation is int:
        if kind is int:
            number = value
        elif (
            kind is str
            and 0 < len(value.removeprefix("-")) <= _INT_DIGITS
            and (value.removeprefix("-").isascii() and value.removeprefix("-").isdigit())
        ):
            number = int(value)
        else:
            return _NOT_PLAIN
        if (info.min is not None and number < info.min) or (
            info.max is not None and number > info.max
        ):
            return _NOT_PLAIN
        return number
    return _NOT_PLAIN


@dataclass(frozen=True)
class PlainParam(RuntimeParam):
    """typer's coercion of one ``str``, ``int`` or ``bool`` parameter without pydantic.

    typer >= 0.29 coerces every parameter of the command that runs through a pydantic
    ``TypeAdapter``, and importing pydantic and building the adapters was about a third of
    ``tickwork jobs`` (benchmarks/README.md, CLI start-up). Every tickwork option is a str,
    an int or a bool, and their values from a command line are plain; anything else
    (``-n abc``, ``-n 0``) falls back to typer's own adapter, so its errors stay word for
    word. A test checks that ``tickwork next`` and ``jobs`` import no pydantic."""

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: click.Context) -> Any:
        plain = _plain(self.annotation, self.parameter_info, value)
        if plain is not _NOT_PLAIN:
            return plain
        fallback = build_runtime_param(param.type_descriptor)
        return fallback._coerce_value(value, param=param, ctx=ctx)


def coerce_plainly(params: Sequence[click.Parameter]) -> None:
    """Give each plain ``str``, ``int`` or ``bool`` parameter of ``params`` a
    :class:`PlainParam`, before typer builds its adapter on first use."""
    for param in params:
        if not isinstance(param, _TyperParameter) or param._runtime_param is not None:
            continue
        described = param.type_descriptor
        info = described.parameter_info
        if (
            described.annotation in (str, int, bool)
            and described.file_annotation is None
            and info.parser is None
            and not info.clamp
            and param.nargs == 1
            and not param.multiple
        ):
            param._runtime_param = PlainParam(parameter_info=info, annotation=described.annotation)


class Command(TyperCommand):
    """A command whose ``--help`` is :mod:`tickwork.cli.help`'s plain text, and whose plain
    parameters are coerced without pydantic (:class:`PlainParam`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        coerce_plainly(self.params)

    def get_help_option(self, ctx: click.Context) -> Any:
        option = super().get_help_option(ctx)
        coerce_plainly([option] if option is not None else [])
        return option

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write(helptext.render(self, ctx))


class Group(TyperGroup):
    """A group (``tickwork jobs``, ``tickwork db``) with the same plain ``--help``, and
    its own options coerced as :class:`Command`'s."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        coerce_plainly(self.params)

    def get_help_option(self, ctx: click.Context) -> Any:
        option = super().get_help_option(ctx)
        coerce_plainly([option] if option is not None else [])
        return option

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (name, helptext.summary(command))
            for name in self.list_commands(ctx)
            if (command := self.get_command(ctx, name)) is not None and not command.hidden
        ]
        formatter.write(helptext.render(self, ctx, [("Commands", rows)]))


class Typer(typer.Typer):
    """typer's app whose commands and groups are :class:`Command` and :class:`Group`."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("cls", Group)
        options.setdefault("add_completion", False)
        options.setdefault("pretty_exceptions_show_locals", False)
        super().__init__(**options)

    def command(self, name: str | None = None, **options: Any) -> Callable[[Any], Any]:
        options.setdefault("cls", Command)
        return super().command(name, **options)


class Root(Group):
    """The ``tickwork`` group: it imports a command's module only when that command runs,
    so ``tickwork next`` pays for cron and not for the HTTP server; and its ``--help``
    comes from the map alone, importing none."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*MAP, *(name for name in self.commands if name not in MAP)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = self.commands.get(cmd_name)
        entry = MAP.get(cmd_name)
        if found is None and entry is not None:
            for module in entry.modules:
                importlib.import_module(f"tickwork.cli.{module}")
            found = registered(cmd_name)
            if found is not None:
                self.commands[cmd_name] = found
        return found

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return self._click_resolve_command(ctx, args)
        except click.exceptions.UsageError as exc:
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if matches:
                suggestions = ", ".join(repr(m) for m in matches)
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {suggestions}?"
            raise

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        panels = [
            (panel, [(e.name, e.summary) for e in COMMANDS if e.panel == panel])
            for panel in (EVERYDAY, OPERATIONS, SERVERS)
        ]
        formatter.write(helptext.render(self, ctx, panels))


def registered(name: str) -> click.Command | None:
    """The click command or group that an imported module registered on ``app`` as ``name``."""
    from typer.main import get_command_from_info, get_group_from_info

    for info in app.registered_commands:
        if info.name == name:
            return get_command_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
    for group in app.registered_groups:
        if group.name == name:
            return get_group_from_info(
                group,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
                suggest_commands=app.suggest_commands,
            )
    return None


def _version(value: bool) -> None:
    if value:
        from tickwork import __version__

        print(f"{PROG} {__version__}")
        raise typer.Exit(EXIT_OK)


app = Typer(
    name=PROG,
    cls=Root,
    no_args_is_help=True,
    # Tracebacks are for bugs only; their locals could hold a database password.
    pretty_exceptions_show_locals=False,
    help="tickwork runs jobs on time, once per slot, across many machines.",
    epilog=ALIASES_NOTE,
)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
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
        # `tickwork` alone: the help is the message; a usage error all the same, as in
        # click, so a script that forgot its command fails.
        write_stderr(exc.format_message())
        return EXIT_USAGE
    except typer.TyperException as exc:  # click's ClickException: usage errors and the like
        error(exc.format_message())
        return exc.exit_code
    except typer.Abort:
        error("aborted")
        return EXIT_INTERRUPTED
    # standalone_mode=False returns typer.Exit's code, or the command's return value.
    return result if isinstance(result, int) else EXIT_OK
