"""``tickwork runs``: list runs, newest first, as a table or one JSON document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer

from tickwork.cli.app import app
from tickwork.cli.listing import collect, first_line, print_page, when
from tickwork.cli.options import (
    DEFAULT_LIMIT,
    AfterOption,
    DbOption,
    JsonOption,
    LimitOption,
    QueueFilter,
    SinceFilter,
    TaskFilter,
    TenantOption,
    UntilFilter,
)
from tickwork.cli.output import echo_json
from tickwork.client import Client
from tickwork.errors import ValidationError
from tickwork.inputs import check_id, run_filter, run_state
from tickwork.job import Run, RunState
from tickwork.records import InjectedRun, to_json

RUN_HEADER = ("RUN", "JOB", "TASK", "STATE", "TRY", "SCHEDULED", "FINISHED", "WORKER", "ERROR")


@app.command("runs")
def runs(
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
) -> None:
    """List runs, newest first."""
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
        injected_runs(db, tenant, limit, after, as_json)
        return
    with Client.open(db) as client:
        found = collect(
            lambda cursor, size: client.list_runs(
                state=wanted, after=cursor, limit=size, **filters
            ),
            limit,
            after,
        )
    if as_json:
        echo_json([to_json(run) for run in found])
        return
    print_page(RUN_HEADER, run_rows(found), found, limit)


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
