"""``tickwork next``: when would this cron expression fire?

Reads the expression exactly as a job's schedule reads it (:class:`tickwork.schedule.Cron`,
DST included), so the times it prints are the slots a job with that schedule gets. With a
DST policy or a calendar (``--dst-gap``, ``--calendar de-by --on-holiday ...``), each time
a DST change or the calendar touches says what happens there, and skipped slots are listed
as ``(no run)``. Only ``--calendar`` opens the database (``--db``), to read the calendar.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork import cron
from tickwork.cli.app import app
from tickwork.cli.listing import fire_line
from tickwork.cli.options import (
    BusinessDayOption,
    BusinessDaysOnlyOption,
    CalendarOption,
    DbOption,
    DstGapOption,
    DstRepeatOption,
    OnHolidayOption,
)
from tickwork.cli.output import echo, echo_json
from tickwork.client import Client, upcoming
from tickwork.clock import SYSTEM_CLOCK
from tickwork.inputs import cron_schedule
from tickwork.timetext import parse_instant

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
        typer.Option(
            "-n", "--count", metavar="N", min=1, max=MAX_COUNT, help="How many fire times."
        ),
    ] = DEFAULT_COUNT,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of the times, nothing else.")
    ] = False,
    *,
    dst_gap: DstGapOption = None,
    dst_repeat: DstRepeatOption = None,
    calendar: CalendarOption = None,
    on_holiday: OnHolidayOption = None,
    business_days_only: BusinessDaysOnlyOption = False,
    business_day: BusinessDayOption = None,
    db: DbOption = "",
) -> None:
    """Print the next fire times of a cron expression, one a line, then what it means."""
    schedule = cron_schedule(
        expr,
        tz,
        dst_gap=dst_gap,
        dst_repeat=dst_repeat,
        calendar=calendar,
        on_holiday=on_holiday,
        business_day=business_day,
        business_days_only=business_days_only,
    )
    after = parse_instant(start, field="--from") if start is not None else SYSTEM_CLOCK.now()
    if schedule.calendar is not None:
        with Client.open(db) as client:
            schedule = client.bind_calendar(schedule)
    zone = cron.zone(schedule.tz)
    fires = upcoming(schedule, after, count)
    if as_json:
        echo_json([f.at.astimezone(zone).isoformat() for f in fires if not f.skipped])
        return
    for fire in fires:
        echo(fire_line(fire, zone))
    echo(schedule.describe())
