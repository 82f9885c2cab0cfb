"""Bulk commands on runs, and the queues: ``retry-all``, ``cancel-all``, ``queues``.

::

    tickwork runs retry-all --task send_report --since 2026-05-01T00:00Z   # dead runs of a task
    tickwork runs cancel-all --queue mail --max 5000 --yes             # waiting runs of a queue
    tickwork queues                                                    # backlog and consumers

``tickwork retry-all`` and ``tickwork cancel-all`` stay as aliases. A bulk command asks
before it acts, saying how many runs match ("Retry 8 dead runs matching task=flaky?"). It
never asks with ``--yes`` (do not ask), with ``--json``, or when stdin is not a terminal:
there it refuses (exit 2, nothing changed) unless ``--yes`` is given. It is all or
nothing: when more runs match than ``--max`` (default 1000, at most 10 000), it exits 2
and changes nothing. It prints how many runs it changed (``--json``: ``{"count",
"run_ids"}``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from tickwork.cli.app import app
from tickwork.cli.listing import collect, print_table, watch, when
from tickwork.cli.options import (
    DbOption,
    JobFilter,
    JsonOption,
    QueueFilter,
    SinceFilter,
    TaskFilter,
    TenantOption,
    UntilFilter,
    WatchOption,
)
from tickwork.cli.output import echo, echo_json
from tickwork.cli.runs import runs_app
from tickwork.client import Client
from tickwork.errors import ValidationError
from tickwork.inputs import run_filter
from tickwork.job import Run, RunState
from tickwork.records import DEFAULT_BULK, MAX_BULK, Page, QueueStatus, bulk_limit, to_json

MaxOption = Annotated[
    int,
    typer.Option(
        "--max",
        metavar="N",
        help=f"Change nothing when more than N runs match (at most {MAX_BULK}).",
    ),
]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def _bulk_command(  # noqa: PLR0917 (one table row each)
    name: str,
    act: Callable[..., list[int]],
    states: tuple[RunState, ...],
    verb: str,
    done: str,
    summary: str,
) -> None:
    """Register ``tickwork runs <name>`` (and the alias ``tickwork <name>``): ``act`` (a bulk
    method of Client) on the runs in ``states`` that the options filter; ``verb`` and
    ``done`` are what the question and the count after say it does."""

    def command(
        *,
        db: DbOption = "",
        job: JobFilter = None,
        task: TaskFilter = None,
        queue: QueueFilter = None,
        tenant: TenantOption = None,
        since: SinceFilter = None,
        until: UntilFilter = None,
        max_count: MaxOption = DEFAULT_BULK,
        yes: YesOption = False,
        as_json: JsonOption = False,
    ) -> None:
        filters = _filters(job, task, queue, tenant, since, until, max_count)
        with Client.open(db) as client:
            if not yes:
                matching = _count(client, states, filters)
                _confirm(name, verb, matching, states, filters, as_json)
            ids = act(client, **filters)
        _report(ids, done, as_json)

    command.__doc__ = summary
    runs_app.command(name)(command)
    app.command(name, hidden=True)(command)


_bulk_command(
    "retry-all",
    Client.retry_runs,
    (RunState.DEAD,),
    "Retry",
    "retried",
    "Retry every dead run matching the filters, with fresh attempts (all or none).",
)
_bulk_command(
    "cancel-all",
    Client.cancel_runs,
    (RunState.QUEUED, RunState.FAILED),
    "Cancel",
    "cancelled",
    """Cancel every waiting run (queued, or failed awaiting retry) matching the filters
    (all or none); running runs are left alone.""",
)


@app.command("queues")
def queues(
    *,
    db: DbOption = "",
    tenant: TenantOption = None,
    as_json: JsonOption = False,
    watching: WatchOption = False,
) -> None:
    """Queues with runs due or running, or a worker: backlog, running, oldest, consumers,
    and the due runs no live worker would claim (none has their task), with why."""
    with Client.open(db) as client:
        watch(lambda: _print_queues(client.queues(tenant=tenant), as_json), watching)


def _print_queues(found: list[QueueStatus], as_json: bool) -> None:
    if as_json:
        echo_json([to_json(q) for q in found])
        return
    rows = [
        (
            q.queue,
            str(q.due),
            str(q.running),
            when(q.oldest_due_at),
            ", ".join(q.workers) if q.workers else ("NONE: nothing claims it" if q.due else ""),
        )
        for q in found
    ]
    print_table(("QUEUE", "DUE", "RUNNING", "OLDEST DUE", "WORKERS"), rows)
    unserved = [u for q in found for u in q.unserved]
    if unserved:
        echo("")
        print_table(
            ("QUEUE", "TASK", "DUE", "OLDEST DUE", "WHY THEY WAIT"),
            [(u.queue, u.task, str(u.due), when(u.oldest_due_at), u.reason) for u in unserved],
        )


def _filters(  # noqa: PLR0917 (the command's options, in order)
    job: int | None,
    task: str | None,
    queue: str | None,
    tenant: str | None,
    since: str | None,
    until: str | None,
    max_count: int,
) -> dict[str, Any]:
    # Every check before opening: bad input must not even create a database.
    bulk_limit(max_count)
    run_filter(job_id=job, tenant=tenant, task=task, queue=queue, since=since, until=until)
    return {
        "job_id": job,
        "task": task,
        "queue": queue,
        "tenant": tenant,
        "since": since,
        "until": until,
        "max_count": max_count,
    }


def _count(client: Client, states: tuple[RunState, ...], filters: dict[str, Any]) -> int:
    """How many runs in ``states`` match, counted up to one past ``max_count`` (beyond it
    the bulk call refuses anyway)."""
    where = {k: v for k, v in filters.items() if k != "max_count"}
    cap = filters["max_count"] + 1
    total = 0
    for state in states:

        def page(cursor: int | None, size: int, state: RunState = state) -> Page[Run]:
            return client.list_runs(state=state, after=cursor, limit=size, **where)

        found = collect(page, cap - total, None)
        total += len(found)
        if total >= cap:
            break
    return total


def _confirm(  # noqa: PLR0917 (what the question says)
    name: str,
    verb: str,
    matching: int,
    states: tuple[RunState, ...],
    filters: dict[str, Any],
    as_json: bool,
) -> None:
    """Ask before acting, saying how many runs match; refuse (ValidationError, nothing
    changed) where there is no one to ask: under --json, or when stdin is no terminal."""
    if matching > filters["max_count"]:
        return  # the bulk call refuses, naming --max: no question to ask
    named = [
        f"{k.removesuffix('_id')}={v}"
        for k, v in filters.items()
        if v is not None and k != "max_count"
    ]
    kind = "dead" if states == (RunState.DEAD,) else "waiting"
    runs = f"{matching} {kind} run{'' if matching == 1 else 's'}"
    where = f" matching {' '.join(named)}" if named else ""
    question = f"{verb} {runs}{where}?"
    if as_json or not sys.stdin.isatty():
        why = "--json never asks" if as_json else "stdin is not a terminal to ask on"
        raise ValidationError(
            f"{name} would {verb.lower()} {runs}{where}: give --yes to do it ({why})",
            field="yes",
        )
    typer.confirm(question, abort=True)


def _report(ids: list[int], verb: str, as_json: bool) -> None:
    if as_json:
        echo_json({"count": len(ids), "run_ids": ids})
    else:
        echo(f"{verb} {len(ids)} runs")
