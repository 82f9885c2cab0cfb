"""Bulk submit, layer by layer: how far below pgqueuer's bulk enqueue each layer of a
tickwork bulk submit already is, down to the database writing the rows by itself.

    python benchmarks/submit_floor.py [--jobs 20000] [--repeat 3]

Every row is N one-off no-op jobs due now, 1,000 per transaction, in a fresh database
of its own (created, then dropped); rows are interleaved per repeat, each figure is the
median of ``--repeat``:

- ``pgqueuer``: its bulk ``Queries.enqueue``, one statement per 10,000 (compare.py's).
- ``app.submit_many``: tickwork's public API (dicts checked against the task registry,
  a Job returned per dict): compare.py's enqueue/s column.
- ``Store.submit_many``: the store alone, with JobSpecs built beforehand (no dict
  checking, no App): the statement, its parameters and the returned records.
- ``rows, server-built``: no client data at all. One statement per 1,000 inserts the job
  row and the run row a due-now one-off writes, with the same columns and values, from
  ``generate_series``: what the database itself needs for the two rows and their
  indexes, the ceiling of any client code on this schema.
- ``rows, server-built, no FK``: the same after dropping ``tickwork_runs``'s foreign key
  to ``tickwork_jobs`` (a what-if on the throw-away database).
- ``job row only, server-built``: the job row alone: what one row per job would cost.

The last lines print the target issue 14 sets (1.5x pgqueuer) beside each layer.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import enqueue, install
from harness import PG_SERVER, fmt, fresh_database, machine, median, table

BATCH = 1000
TARGET = 1.5
"""Issue 14's target: tickwork's bulk submit at least this many times pgqueuer's."""

JOB_INSERT = """
INSERT INTO tickwork_jobs (tenant, task, args, schedule, state, queue, priority,
    max_attempts, backoff_base, backoff_cap, misfire, misfire_grace, overlap,
    created_at, updated_at)
SELECT 'default', 'noop', '{}'::jsonb, jsonb_build_object('kind', 'once', 'at', now()),
    'completed', 'default', 0, 1, 1.0, 60.0, 'run_once', 1.0, 'allow', now(), now()
FROM generate_series(1, %(n)s)
"""
ROWS_INSERT = f"""
WITH j AS ({JOB_INSERT} RETURNING id)
INSERT INTO tickwork_runs (job_id, tenant, task, args, queue, priority, max_attempts,
    backoff_base, backoff_cap, timeout, scheduled_for, run_at, state, created_at)
SELECT j.id, 'default', 'noop', '{{}}'::jsonb, 'default', 0, 1, 1.0, 60.0, NULL, now(),
    now(), 'queued', now()
FROM j
"""


def server_built(url: str, jobs: int, statement: str, *, drop_fk: bool = False) -> float:
    """Seconds to write ``jobs`` due-now one-offs with ``statement``, BATCH per commit."""
    with psycopg.connect(url) as conn:
        if drop_fk:
            conn.execute("ALTER TABLE tickwork_runs DROP CONSTRAINT tickwork_runs_job_id_fkey")
            conn.commit()
        t0 = time.perf_counter()
        for start in range(0, jobs, BATCH):
            conn.execute(statement, {"n": min(BATCH, jobs - start)})
            conn.commit()
        return time.perf_counter() - t0


def store_submit(url: str, jobs: int) -> float:
    from tickwork.job import JobSpec
    from tickwork.schedule import Once
    from tickwork.store import open_store

    store = open_store(url)
    try:
        now = datetime.now(UTC)
        specs = [JobSpec(task="noop", schedule=Once(at=now)) for _ in range(jobs)]
        t0 = time.perf_counter()
        for start in range(0, jobs, BATCH):
            store.submit_many(specs[start : start + BATCH])
        return time.perf_counter() - t0
    finally:
        store.close()


LAYERS: dict[str, tuple[str, Callable[[str, int], float]]] = {
    "pgqueuer": ("pgqueuer", lambda url, n: asyncio.run(enqueue("pgqueuer", url, None, n))),
    "app.submit_many": ("tickwork", lambda url, n: asyncio.run(enqueue("tickwork", url, None, n))),
    "Store.submit_many": ("tickwork", store_submit),
    "rows, server-built": ("tickwork", lambda url, n: server_built(url, n, ROWS_INSERT)),
    "rows, server-built, no FK": (
        "tickwork",
        lambda url, n: server_built(url, n, ROWS_INSERT, drop_fk=True),
    ),
    "job row only, server-built": ("tickwork", lambda url, n: server_built(url, n, JOB_INSERT)),
}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--pg", default=PG_SERVER, help="PostgreSQL server URL, no database")
    args = p.parse_args(argv)
    print(machine(args.pg))
    rates: dict[str, list[float]] = {name: [] for name in LAYERS}
    for k in range(args.repeat):
        order = list(LAYERS)
        order = order[k % len(order) :] + order[: k % len(order)]
        for name in order:
            system, measure = LAYERS[name]
            with fresh_database(args.pg, "bench_floor") as url:
                asyncio.run(install(system, url))
                rates[name].append(args.jobs / measure(url, args.jobs))
            print(f"  [{k + 1}/{args.repeat}] {name}: {fmt(rates[name][-1])} jobs/s", flush=True)
    pgq = median(rates["pgqueuer"])
    rows = [
        [name, fmt(median(r)), f"{1e6 / median(r):.1f}", f"{median(r) / pgq:.2f}"]
        for name, r in rates.items()
    ]
    print(
        f"\n{args.jobs} one-off no-op jobs due now, {BATCH} per transaction; median of "
        f"{args.repeat}"
    )
    print(table(["layer", "jobs/s", "us/job", "of pgqueuer"], rows))
    print(f"\nissue 14's target: {TARGET}x pgqueuer = {fmt(TARGET * pgq)} jobs/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
