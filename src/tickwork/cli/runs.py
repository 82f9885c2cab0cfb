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
from tickwork.inputs import check_id, run_filter, run_state
from tickwork.job import Run, RunState
from tickwork.records import to_json

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
