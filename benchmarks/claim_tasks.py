"""The claim's tasks filter: what it costs the store's drain, on PostgreSQL.

    python benchmarks/claim_tasks.py [--runs 20000] [--repeat 3] [--others 100000]

Each case in a fresh, bulk-loaded database (``bulk_load.py``: ``--runs`` queued runs of
task ``noop``, one tenant), drained by the store alone (``Store.complete_and_claim(limit=100)``
in a loop, the call a busy worker makes, with no worker machinery), the cases interleaved
and each figure the median of ``--repeat``:

- **every task** (``tasks=None``): the claim as a caller that has every task makes it;
- **its tasks** (``tasks=["http", "noop"]``, as a worker passes them): the statement's gate
  (the waiting runs' tasks, up to the first the claimer lacks) finds none it lacks;
- **one other run waiting**: one run of a task the claimer lacks is queued, due, first in
  claim order (a shell run under a worker without ``--allow-shell``): the claim takes the
  limited path, each of its tasks read apart through ``tickwork_runs_task``;
- **others backlog**: ``--others`` such runs waiting (a worker started without ``--app``
  beside a backlog): the same path, stepping over the backlog.

With the claim's p50 and p99 (ms). Short runs: on a loaded machine compare the columns
of one run, not runs of two days.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from bulk_load import load_runs
from harness import PG_SERVER, fmt, fresh_database, machine, percentile, table

from tickwork.store.base import Completion
from tickwork.store.postgres import PostgresStore

CLAIM_LIMIT = 100
MINE = ["http", "noop"]
CASES = ("every task", "its tasks", "one other run waiting", "others backlog")


def add_others(url: str, n: int) -> None:
    """``n`` queued runs of task ``other``, due an hour ago (first in claim order)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tickwork_runs (job_id, tenant, task, args, queue, priority, "
            "max_attempts, backoff_base, backoff_cap, scheduled_for, run_at, state, created_at) "
            "SELECT (SELECT min(id) FROM tickwork_jobs), 'default', 'other', '{}', 'default', "
            "0, 3, 1.0, 300.0, now() - interval '1 hour' - g * interval '1 us', "
            "now() - interval '1 hour', 'queued', now() FROM generate_series(1, %(n)s) AS g",
            {"n": n},
        )
        conn.execute("VACUUM ANALYZE tickwork_runs")


def drain(url: str, runs: int, tasks: list[str] | None) -> tuple[float, list[float]]:
    """Runs/s draining the store's ``noop`` runs, and each call's time (ms)."""
    store = PostgresStore(url)
    times: list[float] = []
    done: list[Completion] = []
    claimed = 0
    started = time.perf_counter()
    try:
        while claimed < runs:
            t0 = time.perf_counter()
            # Without tasks= when None: the same call the code before the filter took.
            given: dict[str, Any] = {} if tasks is None else {"tasks": tasks}
            _, got = store.complete_and_claim(done, "bench", limit=CLAIM_LIMIT, **given)
            times.append((time.perf_counter() - t0) * 1000)
            if not got:
                break
            claimed += len(got)
            done = [Completion(r.id, r.fencing_token) for r in got]
        store.complete_many(done)
        assert claimed == runs, f"claimed {claimed} of {runs}"
        return claimed / (time.perf_counter() - started), times
    finally:
        store.close()


def case(name: str, runs: int, others: int) -> tuple[float, list[float]]:
    with fresh_database(PG_SERVER, "bench_claim_tasks") as url:
        PostgresStore(url, migrate=True).close()
        load_runs(url, finished=0, queued=runs)
        if name == "one other run waiting":
            add_others(url, 1)
        elif name == "others backlog":
            add_others(url, others)
        return drain(url, runs, None if name == "every task" else MINE)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--others", type=int, default=100_000)
    parser.add_argument("--cases", default=",".join(CASES), help="a comma-separated subset")
    args = parser.parse_args(argv)
    cases = tuple(c for c in CASES if c in args.cases.split(","))
    print(machine(PG_SERVER))
    rates: dict[str, list[float]] = {name: [] for name in cases}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(args.repeat):
        order = cases[i % len(cases) :] + cases[: i % len(cases)]
        for name in order:
            rate, took = case(name, args.runs, args.others)
            rates[name].append(rate)
            times[name] += took
    base = statistics.median(rates[cases[0]])
    rows = []
    for name in cases:
        rate = statistics.median(rates[name])
        p50, p99 = percentile(times[name], 50), percentile(times[name], 99)
        rows.append([name, fmt(rate), f"{rate / base:.0%}", fmt(p50, 2), fmt(p99, 2)])
    print(table(["case", "runs/s", f"of {cases[0]}", "claim p50 ms", "claim p99 ms"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
