"""Transactional submit: from the caller's COMMIT to the run's start, on PostgreSQL.

    python benchmarks/outbox_wake.py [--jobs 200] [--every 0.02] [--repeat 3]

A worker *process* (its own App on the same database, one no-op async task) waits idle;
this process submits one job at a time with ``app.submit(..., conn=conn)`` inside its
own psycopg transaction, commits, and waits ``--every`` seconds. The job's run is
written in that transaction (a one-off due now), and its wake-up NOTIFY is delivered at
the commit; so what is measured is the notification, the worker's wake and its claim.
Per job: the run's ``started_at`` (the database's clock, in the claim) minus the moment
just before COMMIT was sent (this host's clock, which is the database's clock here): an
upper bound of commit-to-start. p50, p99 and max, median of ``--repeat``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from harness import PG_SERVER, fmt, fresh_database, machine, median, percentile, table

from tickwork.app import App
from tickwork.store.postgres import PostgresStore

TASK = "noop"


def make_app(url: str) -> App:
    app = App(url)

    @app.task(name=TASK)
    async def noop(ctx: Any) -> None:
        return None

    return app


def worker_main(url: str, ready: Any, stop: Any) -> None:
    app = make_app(url)
    worker = app.worker(concurrency=10)
    worker.start()
    ready.set()
    stop.wait()
    worker.stop()
    app.close()


def run_once(jobs: int, every: float) -> list[float]:
    """Commit-to-start of each job, in ms."""
    with fresh_database(PG_SERVER, "bench_outbox") as url:
        PostgresStore(url, migrate=True).close()
        ctx = multiprocessing.get_context("spawn")
        ready, stop = ctx.Event(), ctx.Event()
        child = ctx.Process(target=worker_main, args=(url, ready, stop))
        child.start()
        try:
            if not ready.wait(30):
                raise SystemExit("the worker did not start")
            time.sleep(1.0)  # idle: waiting on its notification
            app = make_app(url)
            sent: dict[int, float] = {}
            with psycopg.connect(url) as conn:
                for _ in range(jobs):
                    job = app.submit(TASK, conn=conn)
                    sent[job.id] = time.time()
                    conn.commit()
                    time.sleep(every)
            deadline = time.monotonic() + 30
            lags: list[float] = []
            while time.monotonic() < deadline:
                runs = [r for r in app.store.list_runs(limit=jobs + 10).items if r.started_at]
                if len(runs) >= jobs:
                    lags = [
                        (r.started_at - datetime.fromtimestamp(sent[r.job_id], UTC)).total_seconds()
                        * 1000
                        for r in runs
                        if r.started_at is not None
                    ]
                    break
                time.sleep(0.2)
            app.close()
            if len(lags) < jobs:
                raise SystemExit(f"only {len(lags)} of {jobs} runs started")
            return lags
        finally:
            stop.set()
            child.join(30)
            if child.is_alive():
                child.kill()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--every", type=float, default=0.02)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(machine(PG_SERVER))
    rows = []
    for _ in range(args.repeat):
        lags = run_once(args.jobs, args.every)
        rows.append((percentile(lags, 50), percentile(lags, 99), max(lags)))
    p50, p99, top = (median([r[i] for r in rows]) for i in range(3))
    print(
        table(
            ["commit to start", "p50 ms", "p99 ms", "max ms"],
            [["median of runs", fmt(p50, 2), fmt(p99, 2), fmt(top, 2)]],
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
