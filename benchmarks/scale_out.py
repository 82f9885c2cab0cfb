"""Scale-out and memory: I/O-bound runs over 1..8 worker processes, a worker's RSS idle and
holding 1,000 runs, and a soak that watches RSS over a long drain.

    python benchmarks/scale_out.py [--workers 1,2,4,8] [--concurrency 50] [--seconds 3]
                                   [--handler async,sync] [--repeat 1]
    python benchmarks/scale_out.py --memory          # RSS idle, and holding 1,000 runs
    python benchmarks/scale_out.py --soak 1000000    # RSS over a long drain (~10 min)

**Scale-out.** For each handler kind (``async``: ``await asyncio.sleep(0.05)``, ``sync``:
``time.sleep(0.05)``) and each worker count, a fresh PostgreSQL database gets ``--seconds``
worth of runs at the ideal rate (workers x concurrency / 0.05 s), all due now; then that
many worker processes (``tickwork.worker.Worker`` at ``--concurrency``) start together and
drain them. Printed: runs/s, its share of the ideal, and where the CPU went over the drain
(from ``/proc``: the workers' processes, every PostgreSQL process, the whole machine in %
of its cores, as ``cpu_split.py`` reads them). The verdict names what saturated: the
machine's CPU (busy >= 90% of all cores), one worker process (>= 90% of one core: the GIL),
or neither (the chain of round trips to the database, or the handlers' own sleep when the
share of ideal is near 100%).

**Memory.** One worker process (async no-op tasks, concurrency 1,000): its RSS
(``VmRSS``) after it started and idled a second, then with 1,000 runs claimed whose
handlers are all asleep (``await asyncio.sleep``), then after they finished.

**Soak.** One worker at default settings drains ``--soak`` async no-op runs, fed in
chunks so the queue never holds more than ~100,000; RSS is sampled every ``--sample``
seconds. Printed: the samples, and the growth from the sample at 10% of the runs to the
last one (a leak grows with the runs; a warm-up does not).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from cpu_split import machine_ticks, postgres_cpu, process_cpu
from harness import PG_SERVER, fmt, fresh_database, machine, median, table

SLEEP = 0.05
"""Seconds each scale-out handler waits (the I/O it stands for)."""
HOLD = 10.0
"""Seconds the memory phase's handlers sleep: longer than the measurement."""
HELD = 1000
"""Runs the memory phase's worker holds at once."""
SUBMIT_BATCH = 1000
SOAK_CHUNK = 50_000
"""Runs the soak submits at a time, whenever fewer than this many are queued."""
READY, GO, STOP = "READY", "GO", "STOP"
WORKER_START_TIMEOUT = 60.0


# -- the worker process ---------------------------------------------------------------------


def worker_main(url: str, handler: str, concurrency: int) -> None:
    """One worker process: READY once its store answers, work after GO, stop at STOP."""
    from tickwork.config import Config
    from tickwork.store import open_store
    from tickwork.tasks import Registry, Task
    from tickwork.worker import Worker

    async def io_async(ctx: Any) -> None:
        await asyncio.sleep(SLEEP)

    def io_sync(ctx: Any) -> None:
        time.sleep(SLEEP)

    async def hold(ctx: Any) -> None:
        await asyncio.sleep(HOLD)

    async def noop(ctx: Any) -> None:
        return None

    fn = {"async": io_async, "sync": io_sync, "hold": hold, "noop": noop}[handler]
    registry = Registry()
    registry.add(Task(handler, fn))
    config = Config(db_url=url, concurrency=concurrency or None)
    store = open_store(url, migrate=False)
    try:
        store.now()
        worker = Worker(store, registry, config)
        print(READY, flush=True)
        if sys.stdin.readline().strip() != GO:
            return
        worker.start()
        try:
            sys.stdin.readline()  # STOP, or the parent is gone
        finally:
            worker.stop()
    finally:
        store.close()


class Workers:
    """``count`` worker processes that start together."""

    def __init__(self, url: str, handler: str, concurrency: int, count: int) -> None:
        self.procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    handler,
                    "--url",
                    url,
                    "--c",
                    str(concurrency),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(count)
        ]
        for proc in self.procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != READY:
                self.stop()
                raise RuntimeError("a worker process did not start")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def go(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(GO + "\n")
            proc.stdin.flush()

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.write(STOP + "\n")
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- the driver -----------------------------------------------------------------------------


def migrate(url: str) -> None:
    from tickwork.store.postgres import PostgresStore

    PostgresStore(url, migrate=True).close()


def submit(url: str, task: str, n: int) -> None:
    from tickwork.job import JobSpec
    from tickwork.schedule import Once
    from tickwork.store.postgres import PostgresStore

    store = PostgresStore(url)
    try:
        spec = JobSpec(task=task, schedule=Once(delay=timedelta(0)))
        for start in range(0, n, SUBMIT_BATCH):
            store.submit_many([spec] * min(SUBMIT_BATCH, n - start))
    finally:
        store.close()


WAITING = "state IN ('queued', 'failed')"  # the claim index's rows
RUNNING = "lease_expires_at IS NOT NULL AND state = 'running'"  # the lease index's


def count(conn: psycopg.Connection[Any], where: str) -> int:
    """Runs matching ``where``, read through a partial index (never the finished runs)."""
    row = conn.execute(f"SELECT count(*) FROM tickwork_runs WHERE {where}").fetchone()
    return int(row[0]) if row else 0


def unfinished(conn: psycopg.Connection[Any]) -> int:
    return count(conn, WAITING) + count(conn, RUNNING)


def scale_once(
    server: str, handler: str, workers: int, concurrency: int, seconds: float
) -> dict[str, float]:
    ideal = workers * concurrency / SLEEP
    n = max(concurrency * workers, round(ideal * seconds))
    with fresh_database(server, "bench_scale") as url:
        migrate(url)
        submit(url, handler, n)
        procs = Workers(url, handler, concurrency, workers)
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                w0 = sum(process_cpu(pid) for pid in procs.pids)
                busiest0 = [process_cpu(pid) for pid in procs.pids]
                p0, m0 = postgres_cpu(), machine_ticks()
                t0 = time.perf_counter()
                procs.go()
                while unfinished(conn) > 0:
                    if time.perf_counter() - t0 > 120 + n / 100:
                        raise RuntimeError("the drain stalled")
                    time.sleep(0.05)
                took = time.perf_counter() - t0
                w1 = [process_cpu(pid) for pid in procs.pids]
                p1, m1 = postgres_cpu(), machine_ticks()
        finally:
            procs.stop()
    all_ticks, idle = m1[0] - m0[0], m1[1] - m0[1]
    cores = os.cpu_count() or 1
    return {
        "runs": n,
        "runs_per_s": n / took,
        "ideal": ideal,
        "workers_pct": (sum(w1) - w0) / took * 100,
        "busiest_pct": max(b - a for a, b in zip(busiest0, w1, strict=True)) / took * 100,
        "postgres_pct": (p1 - p0) / took * 100,
        "machine_pct": (all_ticks - idle) / all_ticks * 100,
        "cores": cores,
    }


def others_pct(r: dict[str, float]) -> float:
    """CPU of every other process over the drain, in % of one core."""
    return r["machine_pct"] * r["cores"] - r["workers_pct"] - r["postgres_pct"]


def verdict(r: dict[str, float]) -> str:
    if r["machine_pct"] >= 90:
        shares = {
            "the workers": r["workers_pct"],
            "PostgreSQL": r["postgres_pct"],
            "other processes": others_pct(r),
        }
        return f"CPU: the machine ({max(shares, key=lambda k: shares[k])} the largest share)"
    if r["busiest_pct"] >= 90:
        return "CPU: one worker process's core (the GIL)"
    if r["runs_per_s"] >= 0.9 * r["ideal"]:
        return "none: the handlers' own sleep"
    return "none saturated: round trips to the database"


def scale_out(args: argparse.Namespace) -> None:
    counts = [int(c) for c in args.workers.split(",")]
    header = [
        "handler",
        "workers",
        "runs",
        "runs/s",
        "of ideal",
        "workers %cpu",
        "busiest %",
        "postgres %cpu",
        "others %cpu",
        "machine %",
        "saturated",
    ]
    rows = []
    for handler in args.handler.split(","):
        for workers in counts:
            samples = []
            for _ in range(args.repeat):
                r = scale_once(args.pg, handler, workers, args.concurrency, args.seconds)
                samples.append(r)
                print(
                    f"  {handler} x{workers}: {fmt(r['runs_per_s'])} runs/s "
                    f"(ideal {fmt(r['ideal'])}), machine {fmt(r['machine_pct'])}%",
                    flush=True,
                )
            m = {k: median([s[k] for s in samples]) for k in samples[0]}
            rows.append(
                [
                    handler,
                    str(workers),
                    fmt(m["runs"]),
                    fmt(m["runs_per_s"]),
                    f"{m['runs_per_s'] / m['ideal'] * 100:.0f}%",
                    fmt(m["workers_pct"]),
                    fmt(m["busiest_pct"]),
                    fmt(m["postgres_pct"]),
                    fmt(others_pct(m)),
                    fmt(m["machine_pct"]),
                    verdict(m),
                ]
            )
    print(
        f"\nconcurrency {args.concurrency} per worker, {SLEEP * 1000:.0f} ms handlers, "
        f"~{args.seconds:g} s of runs each; median of {args.repeat}; %cpu in % of one core, "
        "machine % of all cores"
    )
    print(table(header, rows))


def memory(args: argparse.Namespace) -> None:
    with fresh_database(args.pg, "bench_mem") as url:
        migrate(url)
        procs = Workers(url, "hold", HELD, 1)
        pid = procs.pids[0]
        try:
            procs.go()
            time.sleep(1.0)
            idle = rss_mb(pid)
            submit(url, "hold", HELD)
            with psycopg.connect(url, autocommit=True) as conn:
                t0 = time.perf_counter()
                while count(conn, RUNNING) < HELD:
                    if time.perf_counter() - t0 > 60:
                        raise RuntimeError("the worker did not take 1,000 runs")
                    time.sleep(0.05)
                time.sleep(0.5)  # every claimed run started
                holding = rss_mb(pid)
                while unfinished(conn) > 0:
                    time.sleep(0.2)
                time.sleep(0.5)
                after = rss_mb(pid)
        finally:
            procs.stop()
    print(
        table(
            ["worker (async, concurrency 1,000)", "RSS MB"],
            [
                ["idle, 1 s after start", fmt(idle, 1)],
                [f"holding {HELD:,} runs (handlers asleep)", fmt(holding, 1)],
                ["after they finished", fmt(after, 1)],
            ],
        )
    )
    print(f"per held run: {(holding - idle) * 1024 / HELD:.1f} KiB")


def soak(args: argparse.Namespace) -> None:
    total = args.soak
    samples: list[tuple[float, int, float]] = []
    with fresh_database(args.pg, "bench_soak") as url:
        migrate(url)
        submitted = min(total, SOAK_CHUNK)
        submit(url, "noop", submitted)
        procs = Workers(url, "noop", 0, 1)  # 0: the default concurrency
        pid = procs.pids[0]
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                t0 = time.perf_counter()
                procs.go()
                next_sample = 0.0
                while True:
                    done = submitted - unfinished(conn)
                    now = time.perf_counter() - t0
                    if now >= next_sample or done >= total:
                        samples.append((now, done, rss_mb(pid)))
                        print(
                            f"  {now:7.1f} s  {done:>9,} runs  RSS {samples[-1][2]:.1f} MB",
                            flush=True,
                        )
                        next_sample = now + args.sample
                    if done >= total:
                        break
                    if submitted < total and submitted - done < SOAK_CHUNK:
                        more = min(SOAK_CHUNK, total - submitted)
                        submit(url, "noop", more)
                        submitted += more
                        # Finished runs are pruned by the leader in production; here the
                        # table just grows, which the worker never reads.
                    time.sleep(0.2)
                took = time.perf_counter() - t0
        finally:
            procs.stop()
    tenth = next((s for s in samples if s[1] >= total * 0.1), samples[0])
    last = samples[-1]
    per_run = (last[2] - tenth[2]) * 1024 * 1024 / max(1, last[1] - tenth[1])
    print(
        f"\n{total:,} runs in {took:.0f} s ({total / took:,.0f} runs/s), one worker at default "
        f"settings; RSS {tenth[2]:.1f} MB at {tenth[1]:,} runs, {last[2]:.1f} MB at the end: "
        f"{last[2] - tenth[2]:+.1f} MB ({per_run:.1f} bytes per run)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="1,2,4,8", help="worker process counts")
    p.add_argument("--concurrency", type=int, default=50, help="per worker")
    p.add_argument("--seconds", type=float, default=3.0, help="runs enough for ~this long")
    p.add_argument("--handler", default="async,sync", help="async, sync or both")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--memory", action="store_true", help="RSS idle and holding 1,000 runs")
    p.add_argument("--soak", type=int, metavar="RUNS", help="drain this many, watching RSS")
    p.add_argument("--sample", type=float, default=5.0, help="soak: seconds between samples")
    p.add_argument("--pg", default=PG_SERVER, help="PostgreSQL server URL, no database")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--c", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        worker_main(args.url, args.child, args.c)
        return 0
    print(machine(args.pg), flush=True)
    if args.memory:
        memory(args)
    elif args.soak:
        soak(args)
    else:
        scale_out(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
