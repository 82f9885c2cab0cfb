"""``tickwork runs``, the runs noun group: ``tickwork runs`` (or ``runs list``) lists runs,
newest first, as a table or one JSON document; ``tickwork runs show RUN_ID`` (or ``tickwork
show --run RUN_ID``) prints one run: its fields and its attempts, each with its worker,
fencing token, start, end, why it ended and its error. The actions on runs (``runs retry``,
``runs cancel``, ``runs dead``) are :mod:`tickwork.cli.commands`', the bulk ones (``runs
retry-all``, ``runs cancel-all``) :mod:`tickwork.cli.bulk`'s. ``tickwork run`` (no s) is
the all-in-one server, :mod:`tickwork.cli.all_in_one`::

    $ tickwork runs show 40
    Run 40 of job 12 (charge): succeeded, attempt 2 of 3
    ...
    Attempts (oldest first)
    TRY  WORKER  TOKEN  STARTED              ENDED                TOOK    ENDED BY    ERROR
    1    w-a     1      2026-12-01 09:00:00  2026-12-01 09:00:41  41.0 s  lease lost  lease ...
    2    w-b     2      2026-12-01 09:00:41  2026-12-01 09:00:42  0.9 s   succeeded

``--json``: the run's fields with ``attempts`` and ``attempts_dropped``, as
``GET /api/v1/runs/{id}`` answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

import typer

from tickwork.cli.app import Typer, app
from tickwork.cli.listing import collect, first_line, print_page, print_table, watch, when
from tickwork.cli.options import (
    DEFAULT_LIMIT,
    AfterOption,
    DbOption,
    JsonOption,
    LimitOption,
    QueueFilter,
    RunIdArgument,
    SinceFilter,
    TaskFilter,
    TenantOption,
    UntilFilter,
    WatchOption,
)
from tickwork.cli.output import echo, echo_json
from tickwork.client import Client
from tickwork.errors import ValidationError
from tickwork.inputs import check_id, run_filter, run_state
from tickwork.job import Run, RunState
from tickwork.records import AttemptEnd, AttemptRecord, InjectedRun, RunAttempts, to_json

RUN_HEADER = ("RUN", "JOB", "TASK", "STATE", "TRY", "SCHEDULED", "FINISHED", "WORKER", "ERROR")

runs_app = Typer(
    help="List runs, newest first; or act on them: tickwork runs retry RUN_ID. "
    "(tickwork run, no s, is the all-in-one server.)"
)
app.add_typer(runs_app, name="runs")


@runs_app.callback(invoke_without_command=True)
def runs(
    ctx: typer.Context,
    *,
    db: DbOption = "",
    job: Annotated[
        int | None,
        typer.Option("--job", metavar="ID", show_default=False, help="Runs of this job."),
    ] = None,
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            metavar="STATE",
            show_default=False,
            help="Only runs in this state: " + ", ".join(s.value for s in RunState) + ".",
        ),
    ] = None,
    tenant: TenantOption = None,
    injected: Annotated[
        bool,
        typer.Option(
            "--injected",
            help="Only runs that executed more than once because of injected faults "
            "(tickwork worker --inject-faults), with the faults.",
        ),
    ] = False,
    task: TaskFilter = None,
    queue: QueueFilter = None,
    since: SinceFilter = None,
    until: UntilFilter = None,
    limit: LimitOption = DEFAULT_LIMIT,
    after: AfterOption = None,
    as_json: JsonOption = False,
    watching: WatchOption = False,
) -> None:
    """List runs, newest first; or act on them (tickwork runs retry RUN_ID)."""
    if ctx.invoked_subcommand is not None:
        return
    # Every check before opening: bad input must not even create a database.
    wanted = run_state(state)
    filters = run_filter(
        job_id=job, tenant=tenant, task=task, queue=queue, since=since, until=until
    )
    if after is not None:
        check_id(after, "after")
    if injected:
        others = (job, state, task, queue, since, until)
        if any(v is not None for v in others):
            raise ValidationError(
                "--injected lists runs by their faults: no --job, --state, --task, --queue, "
                "--since or --until"
            )
        watch(lambda: injected_runs(db, tenant, limit, after, as_json), watching)
        return
    with Client.open(db) as client:

        def draw() -> None:
            found = collect(
                lambda cursor, size: client.list_runs(
                    state=wanted, after=cursor, limit=size, **filters
                ),
                limit,
                after,
            )
            if as_json:
                echo_json([to_json(run) for run in found])
            else:
                print_page(RUN_HEADER, run_rows(found), found, limit)

        watch(draw, watching)


runs_app.command("list", help="List runs, newest first.")(runs)


@runs_app.command("show")
def show(run_id: RunIdArgument, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """Show a run, and each of its attempts with its worker, end and error."""
    check_id(run_id, "run")
    with Client.open(db) as client:
        show_run(client, run_id, as_json)


def run_rows(found: Sequence[Run]) -> list[tuple[str, ...]]:
    """The rows of a table of runs, under RUN_HEADER."""
    return [
        (
            str(run.id),
            str(run.job_id),
            run.task,
            run.state.value,
            f"{run.attempt}/{run.max_attempts}",
            when(run.scheduled_for),
            when(run.finished_at),
            run.worker or "",
            first_line(run.error),
        )
        for run in found
    ]


INJECTED_HEADER = ("RUN", "JOB", "TASK", "STATE", "TRY", "WORKER", "FAULTS")


def injected_runs(
    db: str, tenant: str | None, limit: int, after: int | None, as_json: bool
) -> None:
    """``tickwork runs --injected``."""
    with Client.open(db) as client:
        found = collect(
            lambda cursor, size: client.injected_runs(tenant=tenant, after=cursor, limit=size),
            limit,
            after,
        )
    if as_json:
        echo_json([to_json(i) for i in found])
        return
    rows = [
        (
            str(i.run.id),
            str(i.run.job_id),
            i.run.task,
            i.run.state.value,
            f"{i.run.attempt}/{i.run.max_attempts}",
            i.run.worker or "",
            ", ".join(faults(i)),
        )
        for i in found
    ]
    print_page(INJECTED_HEADER, rows, found, limit)


def faults(injected: InjectedRun) -> list[str]:
    """Each fault as ``fault@attempt`` (``... by run N`` when another run's crash)."""
    return [
        f"{f.fault}@{f.attempt}" + (f" by run {f.by_run}" if f.by_run is not None else "")
        for f in injected.faults
    ]


ATTEMPT_HEADER = ("TRY", "WORKER", "TOKEN", "STARTED", "ENDED", "TOOK", "ENDED BY", "ERROR")
ENDED_BY = {
    AttemptEnd.SUCCEEDED: "succeeded",
    AttemptEnd.FAILED: "failed",
    AttemptEnd.TIMED_OUT: "timed out",
    AttemptEnd.LEASE_LOST: "lease lost",
    AttemptEnd.RELEASED: "released",
    AttemptEnd.CANCELLED: "cancelled",
    AttemptEnd.INJECTED_FAULT: "injected fault",
}
"""How an attempt's end reads in a table (``running``: it has none yet)."""


def run_detail_json(history: RunAttempts) -> dict[str, Any]:
    """A run with its attempts, as ``GET /api/v1/runs/{id}`` shapes it."""
    return {
        **to_json(history.run),
        "attempts": [to_json(a) for a in history.attempts],
        "attempts_dropped": history.dropped,
    }


def show_run(client: Client, run_id: int, as_json: bool) -> None:
    """``tickwork runs show RUN_ID`` (and ``tickwork show --run RUN_ID``)."""
    history = client.run_attempts(run_id)
    if as_json:
        echo_json(run_detail_json(history))
        return
    run = history.run
    echo(
        f"Run {run.id} of job {run.job_id} ({run.task}): {run.state.value}, attempt "
        f"{run.attempt} of {run.max_attempts}"
    )
    facts = [
        ("tenant", run.tenant),
        ("queue", f"{run.queue}, priority {run.priority}"),
        ("slot", when(run.scheduled_for)),
        ("next try", when(run.run_at) if run.state in (RunState.QUEUED, RunState.FAILED) else "-"),
        ("worker", run.worker or "-"),
        ("token", str(run.fencing_token)),
        ("started", when(run.started_at) or "-"),
        ("finished", when(run.finished_at) or "-"),
        ("error", first_line(run.error, 200) or "none"),
    ]
    for label, value in facts:
        echo(f"  {label:<10} {value}")
    echo("")
    attempts = history.attempts
    dropped = f"; {history.dropped} older dropped" if history.dropped else ""
    echo(f"Attempts (oldest first{dropped})" if attempts else "Attempts: none yet")
    if attempts:
        print_table(ATTEMPT_HEADER, [attempt_row(a) for a in attempts])
    traced = [a for a in attempts if a.traceback]
    if traced:
        last = traced[-1]
        echo("")
        echo(f"Traceback of attempt {last.attempt} ({ENDED_BY[last.ended] if last.ended else ''}):")
        for line in last.traceback.splitlines() if last.traceback else []:
            echo(f"  {line}")
        if len(traced) > 1:
            echo(f"({len(traced) - 1} earlier attempts' tracebacks: --json)")


def attempt_row(a: AttemptRecord) -> tuple[str, ...]:
    """One attempt in a table, under ATTEMPT_HEADER."""
    return (
        str(a.attempt),
        a.worker or "",
        str(a.fencing_token),
        when(a.started_at),
        when(a.ended_at),
        took(a.started_at, a.ended_at),
        ENDED_BY[a.ended] if a.ended is not None else "running",
        first_line(a.error),
    )


def took(start: datetime | None, end: datetime | None) -> str:
    """How long an attempt ran, ``41.0 s``, or empty."""
    if start is None or end is None:
        return ""
    return f"{(end - start).total_seconds():.1f} s"
