"""``tickwork bench``: how fast is tickwork here? Submit rate, drain rate, start lag.

Without ``--db`` it measures a fresh SQLite file in a temporary directory (deleted after;
``./tickwork.db`` and ``TICKWORK_DB`` are not touched). With ``--db`` it needs a scratch
database: an empty one is migrated; one holding jobs is refused (exit 2); the bench's own
jobs and runs stay there afterwards. The phases are described in :mod:`tickwork.bench`.

Progress goes to stderr; the figures to stdout, as a table or (``--json``) one JSON object.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork.bench import (
    DEFAULT_LAG_RATE,
    DEFAULT_LAG_SECONDS,
    DEFAULT_RUNS,
    DEFAULT_WORKERS,
    SUBMIT_BATCH,
    BenchOptions,
    BenchResult,
    run_bench,
)
from tickwork.cli.app import app
from tickwork.cli.listing import print_table
from tickwork.cli.options import JsonOption
from tickwork.cli.output import echo, echo_json, redact, stderr
from tickwork.config import SYNC_CONCURRENCY


@app.command("bench")
def bench(
    *,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="URL",
            show_default=False,
            help="A scratch database (sqlite:///PATH or postgresql://...): empty, or refused. "
            "Default: a temporary SQLite file.",
        ),
    ] = None,
    runs: Annotated[
        int, typer.Option("--runs", "-n", min=1, help="No-op runs to submit, then drain.")
    ] = DEFAULT_RUNS,
    workers: Annotated[
        int, typer.Option("--workers", "-w", min=1, help="Worker processes that drain them.")
    ] = DEFAULT_WORKERS,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "-c",
            min=1,
            show_default=False,
            help=f"Runs each worker executes at once. Default {SYNC_CONCURRENCY} (a sync task); "
            "env TICKWORK_CONCURRENCY.",
        ),
    ] = None,
    lag_rate: Annotated[
        float,
        typer.Option("--lag-rate", metavar="R", help="Lag phase: runs falling due per second."),
    ] = DEFAULT_LAG_RATE,
    lag_seconds: Annotated[
        float,
        typer.Option("--lag-seconds", metavar="S", help="Lag phase: over this many seconds."),
    ] = DEFAULT_LAG_SECONDS,
    as_json: JsonOption = False,
) -> None:
    """Measure this set-up: submit rate, drain rate with W workers, start lag."""
    if db is not None and not db.strip():
        raise typer.BadParameter("--db needs a URL", param_hint="'--db'")
    options = BenchOptions(
        db_url=db,
        runs=runs,
        workers=workers,
        concurrency=concurrency,
        lag_rate=lag_rate,
        lag_seconds=lag_seconds,
    )
    result = run_bench(
        options,
        progress=None if as_json else lambda message: stderr.print(f"  {message}", markup=False),
    )
    if as_json:
        echo_json(result.to_json())
        return
    _print_summary(result, redact(db) if db else "a temporary file")


def _print_summary(result: BenchResult, where: str) -> None:
    figures = result.to_json()
    lag_what = f"{len(result.lag_ms):,} runs due over {result.lag_seconds:g} s"
    echo(
        f"tickwork bench: {result.store} ({where}), {result.workers} worker process"
        f"{'es' if result.workers != 1 else ''} x concurrency {result.concurrency}"
    )
    print_table(
        ["measure", "value", "how"],
        [
            [
                "submit",
                f"{result.submit_per_s:,.0f} runs/s",
                f"{result.runs:,} runs in {result.submit_seconds:.2f} s, "
                f"batches of {SUBMIT_BATCH:,}",
            ],
            [
                "drain",
                f"{result.runs_per_s:,.0f} runs/s",
                f"{result.runs:,} runs in {result.drain_seconds:.2f} s",
            ],
            ["start lag p50", f"{figures['lag_p50_ms']:.1f} ms", lag_what],
            ["start lag p95", f"{figures['lag_p95_ms']:.1f} ms", f"at {result.lag_rate:g}/s"],
            ["start lag p99", f"{figures['lag_p99_ms']:.1f} ms", ""],
            ["start lag max", f"{figures['lag_max_ms']:.1f} ms", ""],
        ],
    )
