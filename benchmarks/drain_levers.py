"""What-if: how fast could one process drain the PostgreSQL store with other SQL or batching?

    python benchmarks/drain_levers.py [--runs 20000] [--repeat 5] [--only a,b]

Not a benchmark of shipped code except ``store``: the other variants run the store's
queries changed in one way each, to put a number on a change before anyone makes it.
Every sample drains ``--runs`` bulk-loaded queued runs in a fresh database, 100 per claim,
with no handler; variants are interleaved (order rotating) and the median of
``--repeat`` is printed with its ratio to ``store``.

- ``store``: ``PostgresStore.claim`` + ``complete_many`` as shipped (two transactions per
  batch);
- ``returning-id``: ``claim`` and the ``complete`` query with ``RETURNING r.id`` (before
  ``complete_many`` had a query of its own, it parsed whole rows and threw them away);
- ``combined``: one statement per batch completes the previous batch and claims the next
  (one round trip and one commit per batch instead of two); fencing unchanged;
- ``pipelined``: claims on one connection while a second thread completes the previous
  batch on another (``RETURNING r.id``): the two commits overlap;
- ``store-lean`` / ``combined-lean``: as ``store`` / ``combined`` on a ``tickwork_runs``
  without the indexes ``tickwork_runs_state``, ``tickwork_runs_tenant`` and
  ``tickwork_runs_started``: every claim and complete writes an entry in each index a run
  is in (no HOT update is possible: ``state`` is indexed), so this is what they cost.
  Since migration 0003 the store's schema is the lean one (those indexes are gone or
  partial), so ``store`` equals ``store-lean`` and ``combined`` (which is now
  ``Store.complete_and_claim``) equals ``combined-lean``: the script stays to price the
  next change the same way.
"""

from __future__ import annotations

import argparse
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from bulk_load import load_runs
from harness import PG_SERVER, fmt, fresh_database, machine, median, table
from psycopg.rows import DictRow, dict_row

from tickwork.job import Run
from tickwork.store import rows as mapping
from tickwork.store.base import Completion
from tickwork.store.postgres import PostgresStore
from tickwork.store.postgres.driver import PG_CODEC, Q
from tickwork.store.queries import for_queues

BATCH = 100
LEASE = timedelta(seconds=15)
LEAN_DROPS = ("tickwork_runs_state", "tickwork_runs_tenant", "tickwork_runs_started")
COMPLETE_IDS = Q["complete"].replace("RETURNING r.*", "RETURNING r.id")
COMPLETE_THEN_CLAIM = """
WITH done AS (
    UPDATE tickwork_runs r
    SET state = 'succeeded', finished_at = now(), lease_expires_at = NULL, result = c.result,
        error = NULL
    FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[], %(results)s::jsonb[])
        AS c (id, token, result)
    WHERE r.id = ANY(%(ids)s::bigint[]) AND r.id = c.id AND r.fencing_token = c.token
      AND r.state = 'running'
    RETURNING r.id
), picked AS (
    SELECT id FROM tickwork_runs
    WHERE state IN ('queued', 'failed') AND run_at <= now()
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE tickwork_runs r
SET state = 'running', worker = %(worker)s, fencing_token = r.fencing_token + 1,
    lease_expires_at = now() + %(lease)s::interval, started_at = now()
FROM picked WHERE r.id = picked.id
RETURNING r.*, (SELECT count(*) FROM done) AS completed
"""

Conn = psycopg.Connection[DictRow]


def _claim(conn: Conn) -> list[Run]:
    params = {"worker": "bench", "now": None, "limit": BATCH, "lease": LEASE}
    return [
        mapping.run(r, PG_CODEC)
        for r in conn.execute(for_queues(Q["claim"], None), params).fetchall()
    ]


def _complete_ids(conn: Conn, runs: list[Run]) -> None:
    params = {
        "ids": [r.id for r in runs],
        "tokens": [r.fencing_token for r in runs],
        "results": [None] * len(runs),
        "now": None,
    }
    if len(conn.execute(COMPLETE_IDS, params).fetchall()) != len(runs):
        raise RuntimeError("a completion was rejected")


def store(url: str) -> int:
    s = PostgresStore(url)
    done = 0
    try:
        while runs := s.claim("bench", limit=BATCH):
            if s.complete_many([Completion(r.id, r.fencing_token) for r in runs]):
                raise RuntimeError("a completion was rejected")
            done += len(runs)
    finally:
        s.close()
    return done


def returning_id(url: str) -> int:
    done = 0
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        while runs := _claim(conn):
            _complete_ids(conn, runs)
            done += len(runs)
    return done


def combined(url: str) -> int:
    done = 0
    previous: list[Run] = []
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        while True:
            params = {
                "ids": [r.id for r in previous],
                "tokens": [r.fencing_token for r in previous],
                "results": [None] * len(previous),
                "worker": "bench",
                "limit": BATCH,
                "lease": LEASE,
            }
            rows = conn.execute(COMPLETE_THEN_CLAIM, params).fetchall()
            done += len(previous)
            previous = [mapping.run(r, PG_CODEC) for r in rows]
            if not previous:
                return done


def pipelined(url: str) -> int:
    batches: queue.Queue[list[Run] | None] = queue.Queue(maxsize=2)
    failure: list[BaseException] = []

    def completer() -> None:
        try:
            with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
                while (runs := batches.get()) is not None:
                    _complete_ids(conn, runs)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=completer)
    thread.start()
    done = 0
    try:
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            while runs := _claim(conn):
                batches.put(runs)
                done += len(runs)
    finally:
        batches.put(None)
        thread.join()
    if failure:
        raise failure[0]
    return done


VARIANTS: dict[str, tuple[Callable[[str], int], bool]] = {
    "store": (store, False),
    "returning-id": (returning_id, False),
    "combined": (combined, False),
    "pipelined": (pipelined, False),
    "store-lean": (store, True),
    "combined-lean": (combined, True),
}


def sample(server: str, name: str, runs: int) -> float:
    drain, lean = VARIANTS[name]
    with fresh_database(server, "bench_levers") as url:
        PostgresStore(url, migrate=True).close()
        if lean:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"DROP INDEX IF EXISTS {', '.join(LEAN_DROPS)}")
        load_runs(url, finished=0, queued=runs)
        t0 = time.perf_counter()
        done = drain(url)
        seconds = time.perf_counter() - t0
    if done != runs:
        raise RuntimeError(f"{name}: drained {done} of {runs}")
    return runs / seconds


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--only", help=f"comma-separated subset of {','.join(VARIANTS)}")
    p.add_argument("--pg", default=PG_SERVER, help="PostgreSQL server URL, no database")
    args = p.parse_args(argv)
    names = args.only.split(",") if args.only else list(VARIANTS)
    print(machine(args.pg), flush=True)
    rates: dict[str, list[float]] = {n: [] for n in names}
    for k in range(args.repeat):
        for name in names[k % len(names) :] + names[: k % len(names)]:
            rates[name].append(sample(args.pg, name, args.runs))
        line = ", ".join(f"{n} {fmt(rates[n][-1])}" for n in names)
        print(f"  [{k + 1}/{args.repeat}] {line}", flush=True)
    base = median(rates[names[0]])
    rows: list[list[Any]] = [
        [
            n,
            fmt(median(rates[n])),
            fmt(min(rates[n])),
            fmt(max(rates[n])),
            fmt(median(rates[n]) / base, 2),
        ]
        for n in names
    ]
    print(f"\n{args.runs:,} runs drained, {BATCH} per claim; median of {args.repeat}")
    print(table(["variant", "runs/s", "min", "max", f"vs {names[0]}"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
