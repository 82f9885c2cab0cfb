"""Acting on jobs and runs: ``jobs pause|resume|trigger|cancel JOB_ID``, ``runs retry|cancel
RUN_ID``, and ``runs dead``, the dead-letter list that ``retry`` empties.

::

    tickwork jobs pause 12       # no slot of job 12 is triggered until resume
    tickwork jobs resume 12      # slots that fell while paused are recorded as skipped
    tickwork jobs trigger 12     # one extra run now; prints the run id on its last line
    tickwork jobs cancel 12      # no more slots; waiting runs are cancelled
    tickwork runs cancel 40      # cancel one run (a running handler stops at its heartbeat)
    tickwork runs dead           # runs that exhausted their attempts
    tickwork runs retry 40       # a dead or failed run back to queued, attempts afresh

The verbs of before stay, hidden, as aliases: ``tickwork pause 12``, ``tickwork cancel
--run 40``, ``tickwork retry 40``, ``tickwork dead`` ... do the same.

Each prints one line saying what the job or run is now (``--json``: the job or run as a
JSON object). An unknown id, or a state that forbids the change (pausing a cancelled job,
retrying a succeeded run), exits 1 with one line on stderr and changes nothing.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork.cli.app import app
from tickwork.cli.jobs import jobs_app
from tickwork.cli.listing import collect, print_page
from tickwork.cli.options import (
    DEFAULT_LIMIT,
    AfterOption,
    DbOption,
    JobIdArgument,
    JsonOption,
    LimitOption,
    RunIdArgument,
    TenantOption,
)
from tickwork.cli.output import echo, echo_json
from tickwork.cli.runs import RUN_HEADER, run_rows, runs_app
from tickwork.client import Client
from tickwork.inputs import check_id
from tickwork.job import Job, Run
from tickwork.records import to_json


@app.command("cancel", hidden=True)
def cancel(
    ident: Annotated[
        int,
        typer.Argument(
            metavar="JOB_ID", show_default=False, help="The job's id (with --run: a run's)."
        ),
    ],
    *,
    run: Annotated[
        bool, typer.Option("--run", help="The id is a run's: cancel that run only.")
    ] = False,
    db: DbOption = "",
    as_json: JsonOption = False,
) -> None:
    """Cancel a job: no more slots, its waiting runs cancelled (a running one finishes)."""
    check_id(ident, "run" if run else "job")
    with Client.open(db) as client:
        if run:
            _say_run(client.cancel_run(ident), as_json)
        else:
            _say_job(client.cancel_job(ident), as_json)


@jobs_app.command("cancel")
def cancel_job(job_id: JobIdArgument, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """Cancel a job: no more slots, its waiting runs cancelled (a running one finishes)."""
    check_id(job_id, "job")
    with Client.open(db) as client:
        _say_job(client.cancel_job(job_id), as_json)


@runs_app.command("cancel")
def cancel_run(run_id: RunIdArgument, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """Cancel one run: a waiting one at once, a running one at its next heartbeat."""
    check_id(run_id, "run")
    with Client.open(db) as client:
        _say_run(client.cancel_run(run_id), as_json)


@jobs_app.command("pause")
@app.command("pause", hidden=True)
def pause(job_id: JobIdArgument, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """Pause a job: no slot is triggered until it is resumed."""
    check_id(job_id, "job")
    with Client.open(db) as client:
        _say_job(client.pause_job(job_id), as_json)


@jobs_app.command("resume")
@app.command("resume", hidden=True)
def resume(job_id: JobIdArgument, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """Resume a paused job from its next slot (slots missed while paused are skipped)."""
    check_id(job_id, "job")
    with Client.open(db) as client:
        _say_job(client.resume_job(job_id), as_json)


@jobs_app.command("trigger")
@app.command("trigger", hidden=True)
def trigger_job(job_id: JobIdArgument, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """Run a job now, once, besides its schedule; print the run id on the last line."""
    check_id(job_id, "job")
    with Client.open(db) as client:
        run = client.trigger_job(job_id)
    if as_json:
        echo_json(to_json(run))
        return
    echo(f"triggered job {run.job_id}: run {run.id} is {run.state}")
    echo(str(run.id))


@runs_app.command("retry")
@app.command("retry", hidden=True)
def retry(run_id: RunIdArgument, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """Queue a dead or failed run again now, with a fresh allowance of attempts."""
    check_id(run_id, "run")
    with Client.open(db) as client:
        _say_run(client.retry_run(run_id), as_json)


@runs_app.command("dead")
@app.command("dead", hidden=True)
def dead(
    *,
    db: DbOption = "",
    tenant: TenantOption = None,
    limit: LimitOption = DEFAULT_LIMIT,
    after: AfterOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the dead-letter runs (attempts exhausted or discarded), newest first."""
    if after is not None:
        check_id(after, "after")
    with Client.open(db) as client:
        found = collect(
            lambda cursor, size: client.dead_runs(tenant=tenant, after=cursor, limit=size),
            limit,
            after,
        )
    if as_json:
        echo_json([to_json(run) for run in found])
        return
    print_page(RUN_HEADER, run_rows(found), found, limit)


def _say_job(job: Job, as_json: bool) -> None:
    if as_json:
        echo_json(to_json(job))
    else:
        echo(f"job {job.id} is {job.state}")


def _say_run(run: Run, as_json: bool) -> None:
    if as_json:
        echo_json(to_json(run))
    else:
        echo(f"run {run.id} of job {run.job_id} is {run.state}")
