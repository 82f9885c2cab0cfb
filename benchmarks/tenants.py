"""Tenants: what fair share and limits cost the claim, on PostgreSQL.

    python benchmarks/tenants.py [--runs 20000] [--batches 40] [--tenants 1,100,1000,10000]

Two tables, each case in a fresh, bulk-loaded database (``bulk_load.py``), the store alone
(``Store.complete_and_claim(limit=100)`` in a loop, the call a busy worker makes, with no
worker machinery: what the claim path can reach):

- **runs/s**: ``--runs`` queued runs drained by that loop, with 1 tenant; with the runs
  dealt round 1,000 tenants and no limits (fair share: the limited path's walk); and with
  limits set on all 1,000 (max_running and a rate, both too high to bind: the cost of
  enforcing them, not their effect). The targets: at least 90% and 70% of 1 tenant.
- **claim cost by tenants**: the call's p50 and p99 (ms) with the runs dealt round 1, 100,
  1,000 and 10,000 tenants, no limits and limits on all; it should stay flat.

Short runs: on a loaded machine compare the columns of one run, not runs of two days.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from bulk_load import load_runs
from harness import PG_SERVER, fmt, fresh_database, machine, percentile, table

from tickwork.store.base import Completion
from tickwork.store.postgres import PostgresStore

CLAIM_LIMIT = 100
UNBINDING = {"max_running": 1_000_000, "rate": 1_000_000.0}
"""Limits that never bind: the limited path runs in full, and every run it finds is taken."""


def set_limits(url: str, tenants: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tickwork_tenants (tenant, max_running, rate, updated_at) "
            "SELECT CASE WHEN %(n)s = 1 THEN 'default' ELSE 't' || lpad(g::text, 5, '0') END, "
            "%(max_running)s, %(rate)s, now() FROM generate_series(0, %(n)s - 1) AS g",
            {"n": tenants, **UNBINDING},
        )


def drain(url: str, runs: int) -> tuple[float, list[float]]:
    """Runs/s draining the store, and each call's time (ms)."""
    store = PostgresStore(url)
    times: list[float] = []
    done: list[Completion] = []
    started = time.perf_counter()
    claimed = 0
    try:
        while claimed < runs:
            t0 = time.perf_counter()
            _, got = store.complete_and_claim(done, "bench", limit=CLAIM_LIMIT)
            times.append((time.perf_counter() - t0) * 1000)
            if not got:
                break
            claimed += len(got)
            done = [Completion(r.id, r.fencing_token) for r in got]
        store.complete_many(done)
        return claimed / (time.perf_counter() - started), times
    finally:
        store.close()


def case(runs: int, tenants: int, limited: bool) -> tuple[float, list[float]]:
    with fresh_database(PG_SERVER, "bench_tenants") as url:
        PostgresStore(url, migrate=True).close()
        load_runs(url, finished=0, queued=runs, tenants=tenants)
        if limited:
            set_limits(url, tenants)
        return drain(url, runs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--tenants", default="1,100,1000,10000")
    parser.add_argument("--costs", type=int, default=4_000, help="runs per claim-cost case")
    args = parser.parse_args(argv)
    print(machine(PG_SERVER))
    base, _ = case(args.runs, 1, False)
    rows = [["1 tenant", fmt(base), "100%"]]
    for label, tenants, limited in (
        ("1,000 tenants, no limits", 1000, False),
        ("1,000 tenants, limits on all", 1000, True),
    ):
        rate, _ = case(args.runs, tenants, limited)
        rows.append([label, fmt(rate), f"{rate / base:.0%}"])
    print(table(["case", "runs/s", "of 1 tenant"], rows))
    costs = []
    for tenants in (int(t) for t in args.tenants.split(",")):
        cells = [f"{tenants:,}"]
        for limited in (False, True):
            _, times = case(max(args.costs, tenants), tenants, limited)
            cells += [fmt(percentile(times, 50), 2), fmt(percentile(times, 99), 2)]
        costs.append(cells)
    print(table(["tenants", "p50 ms", "p99 ms", "limited p50", "limited p99"], costs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
