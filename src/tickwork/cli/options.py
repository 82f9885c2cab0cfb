"""The options several commands share, declared once as ``Annotated`` aliases: a command
writes ``db: DbOption = ""`` or ``as_json: JsonOption = False`` rather than its own
``typer.Option(...)``, so a flag reads and behaves the same in every command.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

import typer

from tickwork.config import (
    ASYNC_CONCURRENCY,
    DB_ENV,
    DEFAULT_DB_URL,
    HTTP_ALLOW_FLAG,
    SYNC_CONCURRENCY,
    Config,
    resolve_db_url,
)
from tickwork.timetext import format_seconds, parse_duration


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


DEFAULT_LIMIT = 50
MAX_LIMIT = 10_000
"""Rows one listing command prints at most (several store pages)."""
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document, nothing else.")]
WatchOption = Annotated[
    bool,
    typer.Option(
        "--watch",
        "-w",
        help="Redraw every second: in place on a terminal, else one listing after another "
        "(--json: one document a line). Ctrl-C stops.",
    ),
]
TenantOption = Annotated[
    str | None,
    typer.Option("--tenant", metavar="NAME", show_default=False, help="Only this tenant's."),
]
LimitOption = Annotated[
    int, typer.Option("--limit", "-n", metavar="N", min=1, max=MAX_LIMIT, help="At most this many.")
]
AfterOption = Annotated[
    int | None,
    typer.Option(
        "--after",
        metavar="ID",
        show_default=False,
        help="Only ids below this one: the next page after a listing that ended at ID.",
    ),
]
JobIdArgument = Annotated[int, typer.Argument(metavar="JOB_ID", show_default=False)]
RunIdArgument = Annotated[int, typer.Argument(metavar="RUN_ID", show_default=False)]
AppOption = Annotated[
    str | None,
    typer.Option(
        "--app",
        metavar="MODULE",
        show_default=False,
        help="Module (or module:attribute) whose App registers the tasks; env TICKWORK_APP_MODULE.",
    ),
]
HttpAllowOption = Annotated[
    list[str] | None,
    typer.Option(
        HTTP_ALLOW_FLAG,
        metavar="CIDR|HOST",
        show_default=False,
        help="Let http runs reach this network or host name too (default: public addresses "
        "only). Repeatable or comma-separated; env TICKWORK_HTTP_ALLOW.",
    ),
]
FORWARDED_ALLOW_IPS_ENV = "TICKWORK_FORWARDED_ALLOW_IPS"
HostOption = Annotated[
    str,
    typer.Option(
        "--host",
        metavar="ADDRESS",
        help="Address to listen on. A non-loopback address requires API keys.",
    ),
]
PortOption = Annotated[
    int,
    typer.Option(
        "--port", metavar="PORT", min=0, max=65535, help="Port to listen on (0: any free port)."
    ),
]
ForwardedAllowIpsOption = Annotated[
    str,
    typer.Option(
        "--forwarded-allow-ips",
        metavar="IPS",
        envvar=FORWARDED_ALLOW_IPS_ENV,
        help="Proxies (addresses or CIDR networks, comma-separated, or * for any) whose "
        "X-Forwarded-Proto and X-Forwarded-For are believed: put your TLS proxy's here, so "
        f"that the sign-in cookie is Secure. Env {FORWARDED_ALLOW_IPS_ENV}.",
    ),
]
OpenOption = Annotated[
    bool,
    typer.Option(
        "--open",
        help="Let callers without a key act as an admin even though keys exist (loopback "
        "addresses only). Without it the API is open only while no key was ever created.",
    ),
]

ConcurrencyOption = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        "-c",
        min=1,
        show_default=False,
        help=f"Runs executed at once. Default {ASYNC_CONCURRENCY} when every task of the app is "
        f"async, else {SYNC_CONCURRENCY}; env TICKWORK_CONCURRENCY.",
    ),
]
"""A worker's concurrency (``tickwork worker`` and ``tickwork run``); None: the config's."""
ExitOnUnavailableOption = Annotated[
    bool,
    typer.Option(
        "--exit-on-unavailable",
        help="Exit 1 at once when the database does not answer at start, instead of waiting "
        "for it. Env TICKWORK_EXIT_ON_UNAVAILABLE.",
    ),
]

AllowShellOption = Annotated[
    bool,
    typer.Option(
        "--allow-shell",
        help="Run shell tasks (commands from the database). Env TICKWORK_ALLOW_SHELL.",
    ),
]


def _cron_rule(flag: str, metavar: str, text: str) -> Any:
    return typer.Option(flag, metavar=metavar, show_default=False, help=text)


DstGapOption = Annotated[
    str | None,
    _cron_rule(
        "--dst-gap",
        "run-after|skip",
        "A slot in a DST spring-forward gap: run right after it, or skip it "
        "(default: Debian cron's; docs/time.md).",
    ),
]
DstRepeatOption = Annotated[
    str | None,
    _cron_rule(
        "--dst-repeat",
        "once|twice",
        "A slot in a DST fall-back repeated hour: run at the first pass only, or at both.",
    ),
]
CalendarOption = Annotated[
    str | None,
    _cron_rule("--calendar", "NAME", "A business-day calendar (tickwork calendars create)."),
]
OnHolidayOption = Annotated[
    str | None,
    _cron_rule(
        "--on-holiday",
        "skip|next-business-day|previous-business-day",
        "A slot on a day off in --calendar (default skip).",
    ),
]
BusinessDaysOnlyOption = Annotated[
    bool,
    typer.Option(
        "--business-days-only",
        help="Short for --on-holiday skip: run on the calendar's business days only.",
    ),
]
BusinessDayOption = Annotated[
    int | None,
    _cron_rule(
        "--business-day",
        "N",
        "Run on the month's N-th business day of --calendar (-1: the last), at the "
        "expression's times: @monthly --business-day -1.",
    ),
]


# Filters of runs (tickwork runs, retry-all, cancel-all).
TaskFilter = Annotated[
    str | None,
    typer.Option("--task", metavar="TASK", show_default=False, help="Runs of this task."),
]
QueueFilter = Annotated[
    str | None,
    typer.Option("--queue", metavar="QUEUE", show_default=False, help="Runs in this queue."),
]
JobFilter = Annotated[
    int | None,
    typer.Option("--job", metavar="ID", show_default=False, help="Runs of this job."),
]
SinceFilter = Annotated[
    str | None,
    typer.Option(
        "--since", metavar="TIME", show_default=False, help="Slots at or after (ISO-8601)."
    ),
]
UntilFilter = Annotated[
    str | None,
    typer.Option("--until", metavar="TIME", show_default=False, help="Slots before (ISO-8601)."),
]
