"""Claim + complete latency as the PostgreSQL store grows: it must stay flat.

    python benchmarks/store_size.py [--sizes 10000,100000,1000000] [--queue 5000]
                                    [--batches 40] [--running 0]

For each size, in a fresh database: the store is bulk-loaded (``bulk_load.py``) with
``size`` runs in all: ``--queue`` of them queued and due, the rest succeeded (history
that pruning has not reached yet), plus ``--running`` runs held by other workers. Then
``--batches`` times: ``claim(limit=100)`` and ``complete_many`` of what it returned,
each call timed. Printed per size: p50 and p99 of each call and of the pair (ms), runs/s
of the loop, and the pair's p50 relative to the smallest size (the target: within 1.5x
from 10^4 to 10^6); then, per size, each hot query (claim, heartbeat of 100 leases,
complete) once under EXPLAIN ANALYZE: its plan, execution time and buffers touched, the
figure that does not move with the machine's load.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from bulk_load import load_runs
from harness import PG_SERVER, fmt, fresh_database, machine, percentile, table

from tickwork.store.base import Completion
from tickwork.store.postgres import PostgresStore, Q
from tickwork.store.queries import for_queues

CLAIM_LIMIT = 100
WARMUP_BATCHES = 3


def measure(url: str, batches: int) -> dict[str, list[float]]:
    store = PostgresStore(url)
    timings: dict[str, list[float]] = {"claim": [], "complete": [], "pair": []}
    try:
        for i in range(WARMUP_BATCHES + batches):
            t0 = time.perf_counter()
            runs = store.claim("bench", limit=CLAIM_LIMIT)
            t1 = time.perf_counter()
            rejected = store.complete_many([Completion(r.id, r.fencing_token) for r in runs])
            t2 = time.perf_counter()
            if len(runs) < CLAIM_LIMIT or rejected:
                raise RuntimeError(f"claimed {len(runs)}, {len(rejected)} rejected: queue short")
            if i >= WARMUP_BATCHES:
                timings["claim"].append((t1 - t0) * 1000)
                timings["complete"].append((t2 - t1) * 1000)
                timings["pair"].append((t2 - t0) * 1000)
    finally:
        store.close()
    return timings


def hold_running(url: str, n: int) -> None:
    """``n`` queued runs claimed by other workers and left running (a busy cluster)."""
    store = PostgresStore(url)
    try:
        for _ in range(0, n, 1000):
            store.claim("others", limit=1000, lease=timedelta(hours=1))
    finally:
        store.close()


def plans(url: str) -> list[str]:
    """Each hot query once more under EXPLAIN (ANALYZE, BUFFERS), rolled back: its scans,
    execution time and buffers touched. Buffers do not depend on the machine's load: flat
    buffers from 10^4 to 10^6 runs mean the work per call does not grow with the store."""
    out = []
    with psycopg.connect(url) as conn:
        params = {"worker": "x", "now": None, "limit": CLAIM_LIMIT, "lease": timedelta(seconds=15)}
        claim = for_queues(Q["claim"], None)
        claimed = conn.execute(claim, params).fetchall()  # to complete below
        held = conn.execute(
            "SELECT id, fencing_token FROM tickwork_runs WHERE worker = 'x' ORDER BY id"
        ).fetchall()
        if len(claimed) != len(held):
            raise RuntimeError("claimed rows vanished")
        ids = [r[0] for r in held]
        tokens = [r[1] for r in held]
        completion = {"ids": ids, "tokens": tokens, "results": [None] * len(ids), "now": None}
        beat = {"ids": ids, "tokens": tokens, "lease": timedelta(seconds=15), "now": None}
        for name, query, args in (
            ("claim", claim, params),
            ("heartbeat", Q["heartbeat"], beat),
            ("complete", Q["complete_ids"], completion),
            (
                "complete_then_claim",
                for_queues(Q["complete_then_claim"], None),
                {**completion, **params},
            ),
        ):
            explain = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + query
            rows = conn.execute(explain, args).fetchall()  # type: ignore[arg-type]
            out.append(f"{name}: {_summary([str(r[0]) for r in rows])}")
        conn.rollback()
    return out


def _summary(lines: list[str]) -> str:
    scans = []
    buffers = "?"
    executed = "?"
    for line in lines:
        text = line.strip().removeprefix("->").strip()
        if ("Scan" in text or "Join" in text or "Nested Loop" in text) and "(actual" in text:
            node, _, actual = text.partition(" (actual")
            rows = actual.split("rows=")[1].split()[0]
            loops = actual.split("loops=")[1].rstrip(")")
            scans.append(f"{node} [rows {rows} x{loops}]")
        elif text.startswith("Buffers:") and buffers == "?":
            buffers = text.removeprefix("Buffers:").strip()
        elif text.startswith("Execution Time:"):
            executed = text.removeprefix("Execution Time:").strip()
    return f"exec {executed}, buffers {buffers}; " + "; ".join(scans)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10000,100000,1000000", help="runs in the store")
    p.add_argument("--queue", type=int, default=5_000, help="queued runs among them")
    p.add_argument("--batches", type=int, default=40, help="timed claim+complete pairs")
    p.add_argument("--running", type=int, default=0, help="runs held by other workers")
    p.add_argument("--pg", default=PG_SERVER, help="PostgreSQL server URL, no database")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    needed = args.queue + args.running
    if min(sizes) < needed or args.queue < (WARMUP_BATCHES + args.batches) * CLAIM_LIMIT:
        print("each size must hold the queue and the running runs; the queue the batches")
        return 2
    print(machine(args.pg), flush=True)
    rows = []
    explained = []
    base = None
    for size in sizes:
        with fresh_database(args.pg, "bench_size") as url:
            PostgresStore(url, migrate=True).close()
            t = time.perf_counter()
            load_runs(url, finished=size - needed, queued=needed)
            hold_running(url, args.running)
            loaded = time.perf_counter() - t
            timings = measure(url, args.batches)
            explained += [f"{size:>9,}  {line}" for line in plans(url)]
        pair50 = percentile(timings["pair"], 50)
        base = base or pair50
        rows.append(
            [
                f"{size:,}",
                fmt(percentile(timings["claim"], 50), 2),
                fmt(percentile(timings["claim"], 99), 2),
                fmt(percentile(timings["complete"], 50), 2),
                fmt(percentile(timings["complete"], 99), 2),
                fmt(pair50, 2),
                fmt(percentile(timings["pair"], 99), 2),
                fmt(CLAIM_LIMIT * len(timings["pair"]) / (sum(timings["pair"]) / 1000)),
                fmt(pair50 / base, 2),
            ]
        )
        print(f"  {size:,} runs: loaded in {loaded:.0f} s, pair p50 {pair50:.2f} ms", flush=True)
    header = [
        "runs in store",
        "claim p50",
        "claim p99",
        "complete p50",
        "complete p99",
        "pair p50",
        "pair p99",
        "runs/s",
        "pair p50 / first",
    ]
    print(
        f"\nclaim(limit={CLAIM_LIMIT}) + complete_many, {args.batches} batches per size, "
        f"ms; queue {args.queue:,}, running {args.running:,}"
    )
    print(table(header, rows))
    print("\nplans (EXPLAIN ANALYZE, one call each, rolled back):")
    print("\n".join(explained))
    return 0


if __name__ == "__main__":
    sys.exit(main())
