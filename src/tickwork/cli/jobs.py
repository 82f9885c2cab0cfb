"""``tickwork jobs``, the jobs noun group: ``tickwork jobs`` (or ``jobs list``) lists jobs,
``tickwork jobs show JOB_ID`` (or ``tickwork show JOB_ID``) shows one in full; the actions on
a job (``jobs pause|resume|trigger|cancel``) are :mod:`tickwork.cli.commands`', ``jobs
explain`` :mod:`tickwork.cli.explain`'s. ``tickwork show --run RUN_ID`` (``runs show``) is
one run and its attempts, :mod:`tickwork.cli.runs`.

``show`` prints the job, its schedule in plain English, its next five fire times, its
latest runs and its slot ledger (the slots it skipped, and why); ``--json`` prints the
same as one object: ``{"job", "schedule", "next_fire_times", "runs", "slot_ledger"}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, timezone
from typing import Annotated
from zoneinfo import ZoneInfo

import typer

from tickwork import cron
from tickwork.cli.app import Typer, app
from tickwork.cli.listing import collect, fire_line, print_page, print_table, watch, when
from tickwork.cli.options import (
    DEFAULT_LIMIT,
    AfterOption,
    DbOption,
    JsonOption,
    LimitOption,
    TenantOption,
    WatchOption,
)
from tickwork.cli.output import echo, echo_json
from tickwork.cli.runs import RUN_HEADER, run_rows, show_run
from tickwork.client import Client
from tickwork.inputs import check_id, job_state
from tickwork.job import Job, JobState, shown_json
from tickwork.records import SlotSkip, to_json
from tickwork.schedule import Cron, Interval, Once, Schedule
from tickwork.timetext import format_seconds

SHOW_RUNS = 10
"""Runs ``show`` lists: the newest."""
SHOW_LEDGER = 10
"""Slot ledger entries ``show`` lists: the newest."""
FIRE_TIMES = 5

jobs_app = Typer(help="List jobs, newest first; or act on one: tickwork jobs pause JOB_ID.")
app.add_typer(jobs_app, name="jobs")


@jobs_app.callback(invoke_without_command=True)
def jobs(
    ctx: typer.Context,
    *,
    db: DbOption = "",
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            metavar="STATE",
            show_default=False,
            help="Only jobs in this state: " + ", ".join(s.value for s in JobState) + ".",
        ),
    ] = None,
    tenant: TenantOption = None,
    task: Annotated[
        str | None,
        typer.Option("--task", metavar="NAME", show_default=False, help="Only this task's."),
    ] = None,
    search: Annotated[
        str | None,
        typer.Option(
            "--search",
            metavar="TEXT",
            show_default=False,
            help="Only jobs whose name or task contains TEXT (any case).",
        ),
    ] = None,
    limit: LimitOption = DEFAULT_LIMIT,
    after: AfterOption = None,
    as_json: JsonOption = False,
    watching: WatchOption = False,
) -> None:
    """List jobs, newest first; or act on one (tickwork jobs pause JOB_ID)."""
    if ctx.invoked_subcommand is not None:
        return
    wanted = job_state(state)  # before opening: bad input must not create a database
    if after is not None:
        check_id(after, "after")
    with Client.open(db) as client:

        def draw() -> None:
            found = collect(
                lambda cursor, size: client.list_jobs(
                    tenant=tenant, state=wanted, task=task, after=cursor, limit=size, search=search
                ),
                limit,
                after,
            )
            _print_jobs(found, limit, as_json)

        watch(draw, watching)


def _print_jobs(found: list[Job], limit: int, as_json: bool) -> None:
    if as_json:
        echo_json([to_json(job) for job in found])
        return
    header = ("JOB", "NAME", "TENANT", "TASK", "STATE", "SCHEDULE", "NEXT RUN")
    rows = [
        (
            str(job.id),
            job.name or "",
            job.tenant,
            job.task,
            job.state.value,
            short_schedule(job.schedule),
            when(job.next_run_at),
        )
        for job in found
    ]
    print_page(header, rows, found, limit)


jobs_app.command("list", help="List jobs, newest first.")(jobs)


@app.command("show")
@jobs_app.command("show")
def show(
    ident: Annotated[
        int,
        typer.Argument(
            metavar="JOB_ID", show_default=False, help="The job's id (with --run: a run's)."
        ),
    ],
    *,
    run: Annotated[
        bool,
        typer.Option("--run", help="The id is a run's: show that run and its attempts."),
    ] = False,
    db: DbOption = "",
    as_json: JsonOption = False,
) -> None:
    """Show a job: its schedule in plain English, next fire times, runs and skipped slots
    (with --run: a run, and each of its attempts with its worker, end and error)."""
    check_id(ident, "run" if run else "job")
    if run:
        with Client.open(db) as client:
            show_run(client, ident, as_json)
        return
    job_id = ident
    with Client.open(db) as client:
        job = client.get_job(job_id)
        fires = client.upcoming(job, FIRE_TIMES)
        recent = client.list_runs(job_id=job.id, limit=SHOW_RUNS).items
        ledger = client.slot_ledger(job.id, limit=SHOW_LEDGER)
    if as_json:
        echo_json(
            {
                "job": to_json(job),
                "schedule": job.schedule.describe(),
                "next_fire_times": [f.at.isoformat() for f in fires if not f.skipped],
                "upcoming": [
                    {"at": f.at.isoformat(), "run": not f.skipped, "note": f.note} for f in fires
                ],
                "runs": [to_json(run) for run in recent],
                "slot_ledger": [to_json(skip) for skip in ledger],
            }
        )
        return
    echo(f"Job {job.id}" + (f" ({job.name})" if job.name else ""))
    for label, value in _facts(job):
        echo(f"  {label:<10} {value}")
    echo("")
    zone = job_zone(job)
    echo("Next fire times" + (f" ({zone})" if fires else ": none"))
    for fire in fires:
        echo(f"  {fire_line(fire, zone)}")
    echo("")
    echo(f"Latest runs (newest {SHOW_RUNS})" if recent else "Runs: none")
    if recent:
        print_table(RUN_HEADER, run_rows(recent))
    echo("")
    echo(f"Skipped slots (newest {SHOW_LEDGER})" if ledger else "Skipped slots: none")
    if ledger:
        print_table(LEDGER_HEADER, ledger_rows(ledger))


def job_zone(job: Job) -> ZoneInfo | timezone:
    """The zone a job's schedule times are shown in: its cron's, else UTC."""
    if isinstance(job.schedule, Cron):
        return cron.zone(job.schedule.tz)
    return UTC


def _facts(job: Job) -> list[tuple[str, str]]:
    retry = job.retry
    return [
        ("tenant", job.tenant),
        ("task", f"{job.task} {json.dumps(shown_json(job.args), ensure_ascii=False)}"),
        ("state", job.state.value),
        ("schedule", f"{job.schedule.describe()}  [{short_schedule(job.schedule)}]"),
        ("next run", when(job.next_run_at, job_zone(job)) or "-"),
        ("queue", f"{job.queue}, priority {job.priority}"),
        (
            "retries",
            f"{retry.max_attempts} attempts, backoff {retry.backoff_base:g} s "
            f"doubling up to {retry.backoff_cap:g} s",
        ),
        ("timeout", format_seconds(job.timeout.total_seconds()) if job.timeout else "none"),
        (
            "misfire",
            f"{job.misfire} (grace {format_seconds(job.misfire_grace.total_seconds())})",
        ),
        ("overlap", job.overlap.value),
        ("key", job.idempotency_key or "-"),
        ("created", when(job.created_at)),
        ("updated", when(job.updated_at)),
    ]


LEDGER_HEADER = ("FIRST SLOT", "LAST SLOT", "SLOTS", "FATE", "INTO RUN", "RECORDED")


def ledger_rows(ledger: Sequence[SlotSkip]) -> list[tuple[str, ...]]:
    return [
        (
            when(skip.first_slot),
            when(skip.last_slot),
            f"{skip.count}{'+' if skip.more else ''}",
            skip.fate.value,
            str(skip.run_id) if skip.run_id else "",
            when(skip.recorded_at),
        )
        for skip in ledger
    ]


def short_schedule(schedule: Schedule) -> str:
    """A schedule in a table cell: ``cron 0 9 * * * Europe/Berlin``, ``every 30 seconds``."""
    if isinstance(schedule, Cron):
        return f"cron {schedule.expr}" + (f" {schedule.tz}" if schedule.tz != "UTC" else "")
    if isinstance(schedule, Interval):
        return f"every {format_seconds(schedule.every.total_seconds())}"
    assert isinstance(schedule, Once)
    return f"once at {when(schedule.at)}" if schedule.at else "once"
