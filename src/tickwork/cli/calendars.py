"""``tickwork calendars``: business-day calendars that cron schedules name.

::

    tickwork calendars create de-by --country DE --subdiv BY --add 2026-12-24 --add 2026-12-31
    tickwork calendars update de-by --remove 2026-12-31      # a business day after all
    tickwork calendars                                       # list (also: calendars list)
    tickwork calendars show de-by                            # its days off in the next year
    tickwork calendars delete de-by

A calendar is a weekend (``--weekend SAT,SUN``, the default; ``--weekend none``), the public
holidays of ``--country`` (and ``--subdiv``, a region) from the ``holidays`` package, plus
``--add`` dates, minus ``--remove`` dates. ``update`` re-plans the jobs that use the calendar
in the same transaction. ``delete`` refuses (exit 1) while an active or paused job uses it,
naming the jobs. Bad input (an unknown country or region, a malformed date) exits 2 and
writes nothing.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Annotated

import typer

from tickwork.calendar import WEEKDAYS, Calendar, make_calendar, parse_date
from tickwork.cli.app import Typer, app
from tickwork.cli.listing import print_table, when
from tickwork.cli.options import DbOption, JsonOption
from tickwork.cli.output import echo, echo_json
from tickwork.client import Client
from tickwork.records import CalendarRecord, to_json

calendars_app = Typer(help="Business-day calendars: create, update, list, show, delete.")
app.add_typer(calendars_app, name="calendars")

NameArgument = Annotated[
    str, typer.Argument(metavar="NAME", show_default=False, help="The calendar's name.")
]
CountryOption = Annotated[
    str | None,
    typer.Option(
        "--country",
        metavar="CC",
        show_default=False,
        help="Public holidays of this country (ISO 3166-1 code: DE, US, GB ...).",
    ),
]
SubdivOption = Annotated[
    str | None,
    typer.Option(
        "--subdiv", metavar="CODE", show_default=False, help="... and of this region (BY)."
    ),
]
AddOption = Annotated[
    list[str] | None,
    typer.Option(
        "--add", metavar="DATE", show_default=False, help="A day off (YYYY-MM-DD); repeatable."
    ),
]
RemoveOption = Annotated[
    list[str] | None,
    typer.Option(
        "--remove",
        metavar="DATE",
        show_default=False,
        help="A business day despite a holiday (YYYY-MM-DD); repeatable.",
    ),
]
WeekendOption = Annotated[
    str | None,
    typer.Option(
        "--weekend",
        metavar="DAYS",
        show_default=False,
        help="Weekend days: SAT,SUN (the default), FRI,SAT, or none.",
    ),
]
SHOW_DAYS = 366


@calendars_app.callback(invoke_without_command=True)
def calendars(ctx: typer.Context, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """List the calendars."""
    if ctx.invoked_subcommand is None:
        _list(db, as_json)


@calendars_app.command("list")
def list_calendars(*, db: DbOption = "", as_json: JsonOption = False) -> None:
    """List the calendars."""
    _list(db, as_json)


def _list(db: str, as_json: bool) -> None:
    with Client.open(db) as client:
        found = client.list_calendars()
    if as_json:
        echo_json([to_json(record) for record in found])
        return
    if not found:
        echo("(none)")
        return
    header = ("NAME", "COUNTRY", "WEEKEND", "ADDED", "REMOVED", "UPDATED")
    print_table(header, [_row(record) for record in found])


def _row(record: CalendarRecord) -> tuple[str, ...]:
    cal = record.calendar
    return (
        cal.name,
        (cal.country or "-") + (f"-{cal.subdiv}" if cal.subdiv else ""),
        _weekend(cal),
        str(len(cal.added)),
        str(len(cal.removed)),
        when(record.updated_at),
    )


def _weekend(cal: Calendar) -> str:
    return ",".join(WEEKDAYS[d] for d in sorted(cal.weekend)) or "none"


@calendars_app.command("create")
def create(
    name: NameArgument,
    *,
    country: CountryOption = None,
    subdiv: SubdivOption = None,
    add: AddOption = None,
    remove: RemoveOption = None,
    weekend: WeekendOption = None,
    db: DbOption = "",
) -> None:
    """Create a calendar."""
    rules = {"country": country, "subdiv": subdiv, "weekend": weekend}
    make_calendar(name, **rules, add=add or [], remove=remove or [])  # bad input: no file
    with Client.open(db) as client:
        record = client.create_calendar(name, **rules, add=add, remove=remove)
    echo(f"created calendar {record.calendar.describe()}")


@calendars_app.command("update")
def update(
    name: NameArgument,
    *,
    country: CountryOption = None,
    subdiv: SubdivOption = None,
    add: AddOption = None,
    remove: RemoveOption = None,
    weekend: WeekendOption = None,
    db: DbOption = "",
) -> None:
    """Change a calendar: add or remove days off, or its country, region or weekend. The
    jobs that use it are re-planned in the same transaction."""
    make_calendar(name, country=country, subdiv=subdiv, weekend=weekend)  # bad input first
    for text in add or []:
        parse_date(text, field="add")
    for text in remove or []:
        parse_date(text, field="remove")
    with Client.open(db) as client:
        change = client.update_calendar(
            name, country=country, subdiv=subdiv, weekend=weekend, add=add, remove=remove
        )
    replanned = ", ".join(str(i) for i in change.replanned) or "none"
    echo(f"updated calendar {change.record.calendar.describe()}; jobs re-planned: {replanned}")


@calendars_app.command("show")
def show(name: NameArgument, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """Show a calendar: its rules, its days off in the next year, and the jobs using it."""
    with Client.open(db) as client:
        record = client.get_calendar(name)
        jobs = client.calendar_jobs(name)
        today = client.now().date()
    cal = record.calendar
    days_off = cal.days_off(today, today + timedelta(days=SHOW_DAYS))
    if as_json:
        echo_json(
            {
                **to_json(record),
                "days_off": [{"date": d.isoformat(), "why": why} for d, why in days_off],
                "jobs": jobs,
            }
        )
        return
    echo(f"Calendar {cal.describe()}")
    echo(f"  weekend    {_weekend(cal)}")
    echo(f"  added      {_dates(cal.added)}")
    echo(f"  removed    {_dates(cal.removed)}")
    echo(f"  jobs       {', '.join(str(i) for i in jobs) or 'none'}")
    echo(f"  updated    {when(record.updated_at)}")
    echo("")
    echo(f"Days off besides weekends, {today.isoformat()} to {today + timedelta(SHOW_DAYS)}")
    for day, why in days_off:
        echo(f"  {day.isoformat()} {WEEKDAYS[day.weekday()]}  {why}")


def _dates(days: tuple[date, ...]) -> str:
    return ", ".join(d.isoformat() for d in days) or "none"


@calendars_app.command("delete")
def delete(name: NameArgument, *, db: DbOption = "") -> None:
    """Delete a calendar that no active or paused job uses."""
    with Client.open(db) as client:
        client.delete_calendar(name)
    echo(f"deleted calendar {name}")
