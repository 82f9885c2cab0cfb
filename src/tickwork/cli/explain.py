"""``tickwork explain JOB_ID [--at TIME]`` (or ``jobs explain``): why a job did or did not
run at a slot; ``tickwork explain --run RUN_ID``: at that run's slot (a one-off's, whose
slot carries microseconds nobody types).

::

    $ tickwork explain 12 --at 2026-12-01T09:00
    Job 12 (backup, At 09:00 every day (Europe/Berlin)) did not run at
    2026-12-01T09:00:00+01:00 (Europe/Berlin): the previous run was still unfinished and
    the overlap policy is 'forbid', so the slot was skipped; ...

``--at`` without an offset is read in the job's cron time zone (UTC for other schedules);
without ``--at`` the slot is the job's latest one at or before now. The answer comes from
the slot ledger (:mod:`tickwork.explain`). ``--json``: ``{"job_id", "slot", "run_id", "fate",
"explanation"}`` (``run_id`` when the slot was triggered, ``fate`` when it was skipped).
"""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork.cli.app import app
from tickwork.cli.jobs import jobs_app
from tickwork.cli.options import DbOption, JsonOption
from tickwork.cli.output import echo, echo_json
from tickwork.client import Client
from tickwork.errors import ValidationError
from tickwork.inputs import check_id
from tickwork.timetext import check_instant, read_time


@app.command("explain")
@jobs_app.command("explain")
def explain(
    ident: Annotated[
        int,
        typer.Argument(
            metavar="JOB_ID", show_default=False, help="The job's id (with --run: a run's)."
        ),
    ],
    *,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="TIME",
            show_default=False,
            help="The slot, ISO-8601 (2026-12-01T09:00, or with an offset). "
            "Default: the latest slot at or before now.",
        ),
    ] = None,
    run: Annotated[
        bool,
        typer.Option(
            "--run",
            help="The id is a run's: explain its job at its slot (a one-off's too, "
            "without typing the slot).",
        ),
    ] = False,
    db: DbOption = "",
    as_json: JsonOption = False,
) -> None:
    """Say in one paragraph why a job did or did not run at a slot."""
    check_id(ident, "run" if run else "job")
    if run and at is not None:
        raise ValidationError("--run explains the run's own slot: drop --at", field="at")
    if at is not None:
        _check_time(at)
    with Client.open(db) as client:
        if run:
            found_run = client.get_run(ident)
            job_id, slot = found_run.job_id, found_run.scheduled_for
            found = client.explain(job_id, slot)
        else:
            job_id = ident
            found = client.explain(job_id, at)
    if as_json:
        echo_json(
            {
                "job_id": job_id,
                "slot": found.slot.isoformat(),
                "run_id": found.run.id if found.run is not None else None,
                "fate": found.fate,
                "explanation": found.text,
            }
        )
        return
    echo(found.text)


def _check_time(text: str) -> None:
    """Reject what is no time, or a time with an offset out of range, before the store is
    opened (a time without an offset is read in the job's zone, which needs the job)."""
    value = read_time(text, field="--at")
    if value.tzinfo is not None:
        check_instant(value, field="--at", text=text)
