"""``tickwork next``: when would this cron expression fire?

Reads the expression exactly as a job's schedule reads it (:class:`tickwork.schedule.Cron`,
DST included), so the times it prints are the slots a job with that schedule gets.
"""

from __future__ import annotations

from itertools import islice
from typing import Annotated

import typer

from tickwork import cron
from tickwork.cli.app import app
from tickwork.cli.output import echo, echo_json
from tickwork.clock import SYSTEM_CLOCK
from tickwork.schedule import Cron, parse_instant

DEFAULT_COUNT = 5
MAX_COUNT = 1000


@app.command("next")
def next_fire_times(
    expr: Annotated[
        str,
        typer.Argument(
            metavar="EXPR",
            help="Cron expression: 5 fields, 6 with seconds first, or a nickname (@hourly). "
            "Quote it.",
            show_default=False,
        ),
    ],
    tz: Annotated[
        str,
        typer.Option(
            "--tz",
            metavar="ZONE",
            help="IANA time zone the expression is read in, and the times are shown in.",
        ),
    ] = "UTC",
    start: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="ISO-8601",
            help="List the fire times strictly after this instant, which must carry an "
            "offset (2026-03-29T00:00:00+01:00 or ...Z). Default: now.",
            show_default=False,
        ),
    ] = None,
    count: Annotated[
        int,
        typer.Option("-n", "--count", min=1, max=MAX_COUNT, help="How many fire times."),
    ] = DEFAULT_COUNT,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of the times, nothing else.")
    ] = False,
) -> None:
    """Print the next fire times of a cron expression, one a line, then what it means."""
    schedule = Cron(expr, tz)
    after = parse_instant(start, field="--from") if start is not None else SYSTEM_CLOCK.now()
    zone = cron.zone(schedule.tz)
    times = [
        fire.astimezone(zone).isoformat()
        for fire in islice(cron.iterate(schedule.expr, schedule.tz, after), count)
    ]
    if as_json:
        echo_json(times)
        return
    for line in times:
        echo(line)
    echo(schedule.describe())
