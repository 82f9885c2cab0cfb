"""``tickwork runs``: list runs, newest first, as a table or one JSON document."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tickwork.cli.output import DbOption, app, echo_json, stdout
from tickwork.client import Client, run_state, to_json
from tickwork.job import Run, RunState

DEFAULT_LIMIT = 50
MAX_LIMIT = 10_000
ERROR_WIDTH = 60


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
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", metavar="NAME", show_default=False, help="Only this tenant's."),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=MAX_LIMIT, help="At most this many.")
    ] = DEFAULT_LIMIT,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON list of runs, nothing else.")
    ] = False,
) -> None:
    """List runs, newest first."""
    wanted = run_state(state)  # before opening: bad input must not create a database
    with Client.open(db) as client:
        found = client.list_runs(job_id=job, state=wanted, tenant=tenant, limit=limit)
    if as_json:
        echo_json([to_json(run) for run in found])
        return
    header = ("RUN", "JOB", "TASK", "STATE", "TRY", "SCHEDULED", "FINISHED", "WORKER", "ERROR")
    rows = [
        (
            str(run.id),
            str(run.job_id),
            run.task,
            run.state.value,
            f"{run.attempt}/{run.max_attempts}",
            _when(run.scheduled_for),
            _when(run.finished_at),
            run.worker or "",
            _first_line(run)[:ERROR_WIDTH],
        )
        for run in found
    ]
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in header:
        table.add_column(column, no_wrap=True, overflow="ellipsis")
    for row in rows:
        table.add_row(*row)
    # A terminal gets a table that fits it; a pipe gets every character.
    full = sum(max(len(cell) for cell in column) + 2 for column in zip(header, *rows, strict=True))
    console = stdout if stdout.is_terminal else Console(file=stdout.file, width=full)
    console.print(table)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else ""


def _first_line(run: Run) -> str:
    return (run.error or "").partition("\n")[0]
