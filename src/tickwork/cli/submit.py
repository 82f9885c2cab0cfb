"""``tickwork submit``: submit one job and print its id.

::

    tickwork submit shell -- /usr/local/bin/backup.sh --full        # now
    tickwork submit --in 10m http https://example.com/hook --method POST
    tickwork submit --cron '*/5 * * * *' --tz Europe/Berlin shell -- backup.sh
    tickwork submit --every 30s --app myapp.tasks ping --args '{"host": "db1"}'
    tickwork submit --cron '30 2 * * *' --tz Europe/Berlin --dst-gap skip shell -- nightly.sh
    tickwork submit --cron @monthly --calendar de-by --business-day -1 shell -- payroll.sh

The schedule is at most one of ``--at ISO`` / ``--in DURATION`` / ``--cron EXPR`` /
``--every DURATION`` (none: now). Then the task: ``shell -- CMD ARGS...`` (everything after
``--`` is the command), ``http URL [--method M]``, or a task the ``--app`` module
registers. ``--args`` is a JSON object: the handler's keyword arguments (for ``shell`` it
may add ``cwd`` and ``env``, for ``http`` ``headers``, ``json`` and ``allow_private``).

The job id is printed alone on the last line of stdout, so ``JOB=$(tickwork submit ... |
tail -n1)`` works. Bad input exits 2 with one line on stderr, and nothing is written:
every check runs before the database is opened (an unknown ``--calendar`` is found in the
submit's transaction, which then writes nothing). A schedule that meets a DST change in the
next year gets a ``tickwork: warning:`` line on stderr per change; the job is submitted.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tickwork.cli.app import app
from tickwork.cli.options import (
    AppOption,
    BusinessDayOption,
    BusinessDaysOnlyOption,
    CalendarOption,
    DbOption,
    DstGapOption,
    DstRepeatOption,
    OnHolidayOption,
    cron_rules,
)
from tickwork.cli.output import echo, warn
from tickwork.cli.worker import app_and_db
from tickwork.client import Client
from tickwork.errors import UnknownTask, ValidationError
from tickwork.inputs import make_spec
from tickwork.job import parse_args
from tickwork.worker.builtins import HTTP, SHELL
from tickwork.worker.registry import Registry


def _opt(flag: str, metavar: str, text: str) -> Any:
    return typer.Option(flag, metavar=metavar, show_default=False, help=text)


@app.command("submit")
def submit(
    task: Annotated[
        str,
        typer.Argument(
            metavar="TASK",
            show_default=False,
            help="shell, http, or a task registered by --app.",
        ),
    ],
    task_args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[-- CMD ARGS... | URL]",
            show_default=False,
            help="shell: the command after --; http: the URL.",
        ),
    ] = None,
    *,
    db: DbOption = "",
    app_module: AppOption = None,
    at: Annotated[
        str | None, _opt("--at", "ISO", "Run once at this instant (with offset).")
    ] = None,
    in_: Annotated[
        str | None, _opt("--in", "DURATION", "Run once after this delay (10s, 5m, 1h30m).")
    ] = None,
    cron: Annotated[str | None, _opt("--cron", "EXPR", "Recur on this cron expression.")] = None,
    tz: Annotated[
        str | None, _opt("--tz", "ZONE", "IANA time zone of --cron (default UTC).")
    ] = None,
    every: Annotated[str | None, _opt("--every", "DURATION", "Recur at this interval.")] = None,
    name: Annotated[
        str | None, _opt("--name", "NAME", "A name for the job, unique per tenant.")
    ] = None,
    args: Annotated[
        str | None, _opt("--args", "JSON", "The task's arguments, a JSON object.")
    ] = None,
    max_attempts: Annotated[
        int | None, _opt("--max-attempts", "N", "Attempts before the run is dead (default 3).")
    ] = None,
    timeout: Annotated[
        str | None, _opt("--timeout", "DURATION", "Fail an attempt that runs longer.")
    ] = None,
    misfire: Annotated[
        str | None,
        _opt("--misfire", "skip|once|all", "Slots missed while down (default once)."),
    ] = None,
    overlap: Annotated[
        str | None,
        _opt("--overlap", "allow|forbid|replace", "A slot while the last run is unfinished."),
    ] = None,
    queue: Annotated[str | None, _opt("--queue", "NAME", "Queue (default 'default').")] = None,
    priority: Annotated[
        int | None, _opt("--priority", "N", "Higher runs first, -1000..1000 (default 0).")
    ] = None,
    tenant: Annotated[
        str | None, _opt("--tenant", "NAME", "Owner of the job (default 'default').")
    ] = None,
    idempotency_key: Annotated[
        str | None,
        _opt("--idempotency-key", "KEY", "Submitting the same key again returns the same job."),
    ] = None,
    method: Annotated[
        str | None, _opt("--method", "METHOD", "http only: the request method (default GET).")
    ] = None,
    dst_gap: DstGapOption = None,
    dst_repeat: DstRepeatOption = None,
    calendar: CalendarOption = None,
    on_holiday: OnHolidayOption = None,
    business_days_only: BusinessDaysOnlyOption = False,
    business_day: BusinessDayOption = None,
) -> None:
    """Submit a job; print its id on the last line."""
    loaded, url = app_and_db(app_module, db)
    registry = loaded.registry if loaded is not None else Registry()
    job_args = _task_args(
        task, task_args or [], parse_args(args) if args is not None else {}, method
    )
    try:
        spec = make_spec(
            registry,
            task,
            args=job_args,
            at=at,
            delay=in_,
            cron=cron,
            tz=tz,
            every=every,
            name=name,
            tenant=tenant,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            timeout=timeout,
            misfire=misfire,
            overlap=overlap,
            idempotency_key=idempotency_key,
            **cron_rules(
                dst_gap=dst_gap,
                dst_repeat=dst_repeat,
                calendar=calendar,
                on_holiday=on_holiday,
                business_day=business_day,
                business_days_only=business_days_only,
            ),
        )
    except UnknownTask:
        hint = "" if loaded is not None else "; load your tasks with --app MODULE"
        raise ValidationError(
            f"unknown task {task!r} (known: {', '.join(registry.names())}{hint})", field="task"
        ) from None
    client = Client.open(url, registry)  # only now: bad input must not create a database file
    try:
        submitted = client.submit_spec(spec)
    finally:
        client.close()
        if loaded is not None:
            loaded.close()
    job = submitted.job
    for message in submitted.warnings:
        warn(message)
    if submitted.created:
        echo(f"submitted job {job.id}: {job.task}, {job.schedule.describe()}")
    else:
        echo(f"job {job.id} exists with idempotency key {job.idempotency_key!r}: not submitted")
    echo(str(job.id))


def _task_args(
    task: str, positional: list[str], args: dict[str, Any], method: str | None
) -> dict[str, Any]:
    """The job's args from ``--args`` and what follows the task name."""
    if method is not None and task != HTTP:
        raise ValidationError("--method applies only to the http task", field="method")
    if task == SHELL:
        if not positional and "argv" not in args:
            raise ValidationError(
                "shell needs a command: tickwork submit shell -- CMD ARGS...", field="args"
            )
        if positional and "argv" in args:
            raise ValidationError(
                "give the command after -- or as argv in --args, not both", field="args"
            )
        return {**args, "argv": positional} if positional else args
    if task == HTTP:
        if len(positional) > 1:
            raise ValidationError(f"http takes one URL, got {' '.join(positional)!r}", field="args")
        extra = {"url": positional[0]} if positional else {}
        if method is not None:
            extra["method"] = method.upper()
        if extra.keys() & args.keys():
            raise ValidationError(
                "give the url and method as arguments or in --args, not both", field="args"
            )
        return {**args, **extra}
    if positional:
        raise ValidationError(
            f"task {task!r} takes its arguments as --args JSON, not {' '.join(positional)!r}",
            field="args",
        )
    return args
