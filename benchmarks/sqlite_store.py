"""The embedded SQLite store: submit rate and runs/s through claim + complete_many batches.

    python benchmarks/sqlite_store.py [--runs 5000] [--repeat 3] [--dir /tmp]

Each repeat uses a fresh database file (WAL, ``synchronous=FULL``: every commit is durable,
as the store sets it). Three numbers:

- *submit/s*: ``store.submit`` of one-off jobs due now, one after another in one thread
  (each creates its run at once, in the same transaction);
- *store runs/s*: those runs drained by ``claim(limit=100)`` + ``complete_many`` in a loop,
  no handler dispatch (the store's own ceiling);
- *worker runs/s*: the same number of runs drained by the real ``tickwork.worker.Worker``
  (concurrency 100, claim batch 100) running an async no-op task, in this process, from
  ``start()`` until ``stop_gracefully()`` has written every outcome.

The target (issue 5) is >= 3,000 runs/s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import fmt, machine, median, table

from tickwork.config import Config
from tickwork.job import JobSpec
from tickwork.schedule import Once
from tickwork.store.base import Completion
from tickwork.store.sqlite import SqliteStore
from tickwork.tasks import Registry, Task
from tickwork.worker import Worker

NOOP = "noop"
CLAIM_BATCH = 100
CONCURRENCY = 100


def submit(store: SqliteStore, n: int) -> float:
    spec = JobSpec(task=NOOP, schedule=Once(delay=timedelta(0)))
    t0 = time.perf_counter()
    for _ in range(n):
        store.submit(spec)
    return n / (time.perf_counter() - t0)


def store_drain(store: SqliteStore) -> tuple[int, float]:
    done = 0
    t0 = time.perf_counter()
    while runs := store.claim("bench", limit=CLAIM_BATCH):
        store.complete_many([Completion(r.id, r.fencing_token) for r in runs])
        done += len(runs)
    return done, done / (time.perf_counter() - t0)


def worker_drain(store: SqliteStore, n: int) -> float:
    finished = threading.Event()
    lock = threading.Lock()
    count = 0

    async def noop(ctx: Any) -> None:
        nonlocal count
        with lock:
            count += 1
            if count == n:
                finished.set()

    registry = Registry()
    registry.add(Task(NOOP, noop))
    config = Config(db_url=store.url, concurrency=CONCURRENCY, claim_batch=CLAIM_BATCH)
    worker = Worker(store, registry, config)
    t0 = time.perf_counter()
    worker.start()
    finished.wait()
    worker.stop_gracefully()
    return n / (time.perf_counter() - t0)


def run_once(directory: str, n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        store = SqliteStore(f"sqlite:///{tmp}/bench.db", migrate=True)
        try:
            submitted = submit(store, n)
            drained, store_rate = store_drain(store)
            if drained != n:
                raise RuntimeError(f"drained {drained} of {n}")
            submit(store, n)
            worker_rate = worker_drain(store, n)
            if store.claim("bench", limit=1):
                raise RuntimeError("the worker left runs behind")
        finally:
            store.close()
    return {"submit": submitted, "store": store_rate, "worker": worker_rate}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5_000, help="runs per phase")
    p.add_argument("--repeat", type=int, default=3, help="repeats, median reported")
    p.add_argument("--dir", default=None, help="where the database files go (default: tmp)")
    args = p.parse_args(argv)
    print(machine(), flush=True)
    results = []
    for k in range(args.repeat):
        r = run_once(args.dir or tempfile.gettempdir(), args.runs)
        results.append(r)
        print(
            f"  [{k + 1}/{args.repeat}] submit {fmt(r['submit'])}/s, store {fmt(r['store'])} "
            f"runs/s, worker {fmt(r['worker'])} runs/s",
            flush=True,
        )
    header = ["runs", "submit/s", "store runs/s", "worker runs/s"]
    row = [
        f"{args.runs:,}",
        fmt(median([r["submit"] for r in results])),
        fmt(median([r["store"] for r in results])),
        fmt(median([r["worker"] for r in results])),
    ]
    print(f"\nSQLite store, median of {args.repeat}")
    print(table(header, [row]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
