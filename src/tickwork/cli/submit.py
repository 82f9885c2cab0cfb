"""``tickwork submit``: submit one job and print its id, or many from a file.

::

    tickwork submit shell -- /usr/local/bin/backup.sh --full        # now
    tickwork submit --in 10m http https://example.com/hook --method POST
    tickwork submit --cron '*/5 * * * *' --tz Europe/Berlin shell -- backup.sh
    tickwork submit --every 30s --app myapp.tasks ping --args '{"host": "db1"}'
    tickwork submit --cron '30 2 * * *' --tz Europe/Berlin --dst-gap skip shell -- nightly.sh
    tickwork submit --cron @monthly --calendar de-by --business-day -1 shell -- payroll.sh
    tickwork submit --file jobs.jsonl --app myapp.tasks                # many, all or none

The schedule is at most one of ``--at ISO`` / ``--in DURATION`` / ``--cron EXPR`` /
``--every DURATION`` (none: now). Then the task: ``shell -- CMD ARGS...`` (everything after
``--`` is the command), ``http URL [--method M]``, or a task the ``--app`` module
registers. ``--args`` is a JSON object: the handler's keyword arguments (for ``shell`` it
may add ``cwd`` and ``env``, for ``http`` ``headers``, ``json`` and ``allow_private``).

The job id is printed alone on the last line of stdout, so ``JOB=$(tickwork submit ... |
tail -n1)`` works; ``--json`` prints ``{"created", "job", "warnings"}`` instead (with
``--file``: ``{"created", "matched", "job_ids"}``). Bad input exits 2 with one line on
stderr, and nothing is written: every check runs before the database is opened (an
unknown ``--calendar`` is found in the submit's transaction, which then writes nothing).
A schedule that meets a DST change in the next year gets a ``tickwork: warning:`` line on
stderr per change; the job is submitted.

``--file PATH`` (``-`` for stdin) takes one job per line, a JSON object of ``task`` and
the options of Python's ``app.submit`` (``{"task": "ping", "args": {"host": "db1"},
"delay": "10m", "idempotency_key": "ping-db1"}``; ``at``, ``delay``, ``cron`` with ``tz``,
``every`` with ``anchor``, ``name``, ``tenant``, ``queue``, ``priority``, ``max_attempts``,
``timeout``, ``misfire``, ``misfire_grace``, ``overlap``, and a cron schedule's
``dst_gap``, ``dst_repeat``, ``calendar``, ``on_holiday``, ``business_day``,
``business_days_only``); blank lines are skipped. Every
line is checked first (a progress bar shows it on a terminal), then all jobs are submitted
in ONE transaction: all or none. A bad line exits 2 naming its line number, and nothing is
written. It prints how many jobs were created and how many matched an idempotency key.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

from tickwork.cli.app import app
from tickwork.cli.options import (
    AppOption,
    BusinessDayOption,
    BusinessDaysOnlyOption,
    CalendarOption,
    DbOption,
    DstGapOption,
    DstRepeatOption,
    JsonOption,
    OnHolidayOption,
)
from tickwork.cli.output import echo, echo_json, stderr, warn
from tickwork.cli.worker import app_and_db
from tickwork.client import Client
from tickwork.errors import UnknownTask, ValidationError
from tickwork.inputs import job_spec, make_spec
from tickwork.job import JobSpec, parse_args
from tickwork.records import to_json
from tickwork.tasks.builtins import HTTP, SHELL
from tickwork.tasks.registry import Registry


def _opt(flag: str, metavar: str, text: str) -> Any:
    return typer.Option(flag, metavar=metavar, show_default=False, help=text)


@app.command("submit")
def submit(
    task: Annotated[
        str | None,
        typer.Argument(
            metavar="TASK",
            show_default=False,
            help="shell, http, or a task registered by --app.",
        ),
    ] = None,
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
    file: Annotated[
        str | None,
        _opt("--file", "PATH", "Submit one job per line of this JSON-lines file (- : stdin)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Submit a job; print its id on the last line. Or many, with --file."""
    if file is not None:
        given = [k for k, v in locals().items() if k not in _FILE_KEEPS and v not in (None, False)]
        if given:
            raise ValidationError(
                f"--file takes every job from the file; drop {_shown_option(given[0])}",
                field="file",
            )
        _submit_file(file, app_module, db, as_json)
        return
    if task is None:
        raise ValidationError("name a TASK to submit, or give --file", field="task")
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
            dst_gap=dst_gap,  # unset (None/False) rules: as if not given
            dst_repeat=dst_repeat,
            calendar=calendar,
            on_holiday=on_holiday,
            business_day=business_day,
            business_days_only=business_days_only,
        )
    except UnknownTask:
        hint = "" if loaded is not None else "; load your tasks with --app MODULE"
        raise ValidationError(
            f"unknown task {task!r} (known: {', '.join(registry.names())}{hint})", field="task"
        ) from None
    client = Client.open(url, registry)  # only now: bad input must not create a database file
    try:
        submitted = client.submit_spec(spec)
        if calendar is not None and tz is None and submitted.created:
            _warn_utc_calendar(client, calendar)
    finally:
        client.close()
        if loaded is not None:
            loaded.close()
    job = submitted.job
    for message in submitted.warnings:
        warn(message)
    if as_json:
        echo_json(
            {
                "created": submitted.created,
                "job": to_json(job),
                "warnings": list(submitted.warnings),
            }
        )
        return
    if submitted.created:
        echo(f"submitted job {job.id}: {job.task}, {job.schedule.describe()}")
    else:
        echo(f"job {job.id} exists with idempotency key {job.idempotency_key!r}: not submitted")
    echo(str(job.id))


def _warn_utc_calendar(client: Client, name: str) -> None:
    """A calendar of a country's holidays, with a cron read in UTC: its times are UTC's,
    not the country's (``@monthly`` runs at 01:00 in Berlin)."""
    country = client.get_calendar(name).calendar.country
    if country is not None:
        warn(
            f"calendar {name} has {country}'s holidays, but the cron's times are UTC: "
            "give --tz (as --tz Europe/Berlin) to run at local times"
        )


_FILE_KEEPS = frozenset({"file", "db", "app_module", "as_json"})
"""The options that go with --file; every other one is a job's, and lives in the file."""


def _shown_option(name: str) -> str:
    """How the user typed the option ``name``: ``TASK``, ``--in``, ``--max-attempts``."""
    if name.startswith("task"):
        return "TASK" if name == "task" else "the task's arguments"
    return "--" + name.rstrip("_").replace("_", "-")


def _submit_file(path: str, app_module: str | None, db: str, as_json: bool) -> None:
    loaded, url = app_and_db(app_module, db)
    registry = loaded.registry if loaded is not None else Registry()
    try:
        specs = _read_specs(path, registry)
        if not specs:
            raise ValidationError(f"{path}: no jobs in the file", field="file")
        with _progress() as progress:
            if progress is not None:
                progress.add_task(f"submitting {len(specs)} jobs", total=None)
            client = Client.open(url, registry)  # only now: bad input creates no file
            try:
                submitted = client.submit_specs(specs)
            finally:
                client.close()
    finally:
        if loaded is not None:
            loaded.close()
    created = sum(s.created for s in submitted)
    if as_json:
        echo_json(
            {
                "created": created,
                "matched": len(submitted) - created,
                "job_ids": [s.job.id for s in submitted],
            }
        )
        return
    echo(f"submitted {created} jobs; {len(submitted) - created} matched an idempotency key")


def _read_specs(path: str, registry: Registry) -> list[JobSpec]:
    """Every line's spec, checked; ValidationError naming the line of the first bad one."""
    specs: list[JobSpec] = []
    with ExitStack() as stack:
        stream = _open(path, stack)
        progress = stack.enter_context(_progress())
        size = _size(stream)
        bar = progress.add_task(f"checking {path}", total=size) if progress else None
        for number, line in _lines(stream, path):
            if progress is not None and bar is not None:
                progress.advance(bar, len(line))
            if not line.strip():
                continue
            try:
                job = json.loads(line)
            except ValueError as exc:
                raise ValidationError(f"{path}:{number}: not JSON ({exc})", field="file") from None
            try:
                specs.append(job_spec(registry, job))
            except ValidationError as exc:
                raise ValidationError(f"{path}:{number}: {exc.message}", field=exc.field) from None
    return specs


def _open(path: str, stack: ExitStack) -> IO[str]:
    if path == "-":
        return sys.stdin
    try:
        return stack.enter_context(Path(path).open(encoding="utf-8"))
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror}", field="file") from None


def _size(stream: IO[str]) -> int | None:
    """The file's size (the bar's total, in characters of ASCII lines), or None for a pipe."""
    try:
        return os.fstat(stream.fileno()).st_size if stream.seekable() else None
    except (OSError, ValueError):
        return None


def _lines(stream: IO[str], path: str) -> Iterator[tuple[int, str]]:
    number = 0
    try:
        for number, line in enumerate(stream, start=1):
            yield number, line
    except UnicodeDecodeError:
        raise ValidationError(f"{path}:{number + 1}: not UTF-8 text", field="file") from None


@contextmanager
def _progress() -> Iterator[Progress | None]:
    """A rich progress bar on stderr when it is a terminal; None otherwise."""
    if not stderr.is_terminal:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn())
    with Progress(*columns, console=stderr, transient=True) as progress:
        yield progress


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
