"""Trigger throughput: slots turned into queued runs per second by the PostgreSQL store.

    python benchmarks/trigger.py [--jobs 100000] [--batch 1000] [--repeat 1] [--breakdown]

In a fresh database, ``--jobs`` recurring jobs (interval 60 s, each with its own anchor,
misfire ``once``) are bulk-loaded due one second ago; this process takes the leader
lease and calls ``store.trigger(epoch, limit=--batch)`` until a call finds nothing due.
Printed: slots/s (runs created over the whole loop), per-call p50/p99/max in ms, and a
check that every job got exactly one run and moved to its next slot.

``--breakdown`` also splits each ``trigger`` call into the time spent waiting on PostgreSQL
(every exchange with the server, pipelined or not: psycopg's ``Connection.wait``) and the
rest, the Python that maps rows, plans slots and builds the result; and prints the CPU
each slot cost this process and the database's backends (from ``/proc``): on a loaded
machine wall times stretch with the load, CPU per slot much less.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from bulk_load import load_due_jobs
from harness import PG_SERVER, fmt, fresh_database, machine, median, percentile, table

from tickwork.store.postgres import PostgresStore

LEASE = timedelta(minutes=10)
WAITED = [0.0]
"""Seconds spent waiting on PostgreSQL, while ``timed_waits`` is active."""


@contextlib.contextmanager
def timed_waits() -> Iterator[None]:
    """Time psycopg's ``Connection.wait``: every blocking exchange with the server (sending,
    executing, receiving, committing) goes through it, pipelined or not."""
    original = psycopg.Connection.wait

    def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            WAITED[0] += time.perf_counter() - t

    psycopg.Connection.wait = wait  # type: ignore[method-assign]
    try:
        yield
    finally:
        psycopg.Connection.wait = original  # type: ignore[method-assign]


def backend_cpu(url: str) -> float:
    """Seconds of CPU used so far by the PostgreSQL backends connected to ``url``'s
    database (other than the one asking), from ``/proc``: the server is on this host."""
    with psycopg.connect(url) as conn:
        pids = [
            r[0]
            for r in conn.execute(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        ]
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def run_once(server: str, jobs: int, batch: int, breakdown: bool) -> dict[str, float]:
    with fresh_database(server, "bench_trigger") as url:
        store = PostgresStore(url, migrate=True)
        try:
            load_due_jobs(url, jobs)
            lease = store.acquire_leadership("bench", LEASE)
            assert lease is not None
            calls: list[float] = []
            created = 0
            WAITED[0] = 0.0
            backends0 = backend_cpu(url)
            cpu0 = time.process_time()
            with timed_waits() if breakdown else contextlib.nullcontext():
                t0 = time.perf_counter()
                while True:
                    t = time.perf_counter()
                    result = store.trigger(lease.epoch, limit=batch)
                    calls.append((time.perf_counter() - t) * 1000)
                    created += len(result.runs)
                    if not result.batch_full:
                        break
                seconds = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
            backends = backend_cpu(url) - backends0
        finally:
            store.close()
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM tickwork_runs), "
                "(SELECT count(DISTINCT job_id) FROM tickwork_runs), "
                "(SELECT count(*) FROM tickwork_jobs WHERE next_run_at <= now())"
            ).fetchone()
        assert row is not None
        if (row[0], row[1], row[2]) != (jobs, jobs, 0):
            raise RuntimeError(f"expected {jobs} runs, one per job, none due; got {row}")
    if breakdown:
        waited = WAITED[0] * 1000 / len(calls)
        python = sum(calls) / len(calls) - waited
        print(
            f"  per trigger call: {waited:.1f} ms waiting on PostgreSQL, {python:.1f} ms in Python;"
            f" CPU per slot: {cpu / created * 1e6:.1f} us here, {backends / created * 1e6:.1f} us"
            " in PostgreSQL",
            flush=True,
        )
    return {
        "slots_per_s": created / seconds,
        "seconds": seconds,
        "calls": len(calls),
        "p50": percentile(calls, 50),
        "p99": percentile(calls, 99),
        "max": max(calls),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=100_000, help="due recurring jobs")
    p.add_argument("--batch", type=int, default=1000, help="trigger(limit=...)")
    p.add_argument("--repeat", type=int, default=1, help="repeats, median reported")
    p.add_argument("--pg", default=PG_SERVER, help="PostgreSQL server URL, no database")
    p.add_argument("--breakdown", action="store_true", help="time each statement too")
    args = p.parse_args(argv)
    print(machine(args.pg), flush=True)
    results = []
    for k in range(args.repeat):
        r = run_once(args.pg, args.jobs, args.batch, args.breakdown)
        results.append(r)
        print(f"  [{k + 1}/{args.repeat}] {fmt(r['slots_per_s'])} slots/s", flush=True)
    header = ["jobs", "batch", "calls", "seconds", "slots/s", "call p50 ms", "p99 ms", "max ms"]
    row = [
        f"{args.jobs:,}",
        str(args.batch),
        fmt(median([r["calls"] for r in results])),
        fmt(median([r["seconds"] for r in results]), 2),
        fmt(median([r["slots_per_s"] for r in results])),
        fmt(median([r["p50"] for r in results]), 1),
        fmt(median([r["p99"] for r in results]), 1),
        fmt(median([r["max"] for r in results]), 1),
    ]
    what = f"store.trigger(epoch, limit={args.batch}) until nothing is due"
    print(f"\n{what}; median of {args.repeat}")
    print(table(header, [row]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
