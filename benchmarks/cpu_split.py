"""Where a drain's CPU goes: the worker process's, PostgreSQL's, and the machine's.

    python benchmarks/cpu_split.py [--runs N] [--repeat K] [--only a,b]

Each system drains N no-op runs exactly as in ``compare.py`` (the same worker processes).
Around the drain (from the worker's READY to its exit) it reads, from ``/proc``:

- *worker us/run*: the worker process's user+system CPU over the drain, per run;
- *postgres us/run*: every PostgreSQL process's, reaped backends included (the
  postmaster's children time), per run: the queries, their commits, autovacuum;
- *busy*: the whole machine's non-idle time, in % of one core (200% is both cores).

A system whose busy figure is well under 200% is waiting, not computing: its runs/s is
bound by the chain of round trips, not by CPU. Linux only; PostgreSQL on this host.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare
from harness import PG_SERVER, fmt, fresh_database, machine, median, table

DEFAULT = ("pgqueuer-b100", "tickwork", "tickwork-store")
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int | str) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    return text[text.rindex(")") + 2 :].split()


def process_cpu(pid: int) -> float:
    """Seconds of user+system CPU ``pid`` has used."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / TICK


def postgres_cpu() -> float:
    """Seconds of CPU used by every PostgreSQL process, exited backends included."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "postgres":
                    continue
            fields = _stat(pid)
        except OSError:
            continue  # gone meanwhile
        total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # own + reaped children
    return total / TICK


def machine_ticks() -> tuple[int, int]:
    """(all, idle) jiffies of every CPU since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return sum(values), values[3] + values[4]


def drain(system: str, server: str, runs: int) -> dict[str, float]:
    with fresh_database(server, "bench_cpu") as url:
        asyncio.run(compare.install(system, url))
        asyncio.run(compare.enqueue(system, url, None, runs))
        worker = compare.WorkerProcess(system, url, "drain", runs)
        worker.wait_ready()
        pid = worker.proc.pid
        w0, p0, m0 = process_cpu(pid), postgres_cpu(), machine_ticks()
        # The worker's own figure is read just before it exits: poll for the exit.
        w1 = w0
        while worker.proc.poll() is None:
            try:
                w1 = process_cpu(pid)
            except OSError:
                break
            time.sleep(0.01)
        result = worker.result(timeout=compare.WORKER_GRACE)
        p1, m1 = postgres_cpu(), machine_ticks()
    handled = result["handled"]
    all_ticks, idle = m1[0] - m0[0], m1[1] - m0[1]
    return {
        "runs_per_s": handled / result["seconds"],
        "worker_us": (w1 - w0) / handled * 1e6,
        "postgres_us": (p1 - p0) / handled * 1e6,
        "busy_pct": (all_ticks - idle) / all_ticks * 100 * (os.cpu_count() or 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=60_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", help=f"comma-separated systems (default {','.join(DEFAULT)})")
    p.add_argument("--pg", default=PG_SERVER, help="PostgreSQL server URL, no database")
    args = p.parse_args(argv)
    systems = args.only.split(",") if args.only else list(DEFAULT)
    compare.quiet_logs()
    print(machine(args.pg), flush=True)
    samples: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
    for _ in range(args.repeat):
        for system in systems:
            sample = drain(system, args.pg, args.runs)
            samples[system].append(sample)
            print(f"  {system}: {fmt(sample['runs_per_s'])} runs/s", flush=True)
    header = ["system", "runs/s", "worker us/run", "postgres us/run", "busy % of a core"]
    rows = [
        [
            system,
            fmt(median([s["runs_per_s"] for s in mine])),
            fmt(median([s["worker_us"] for s in mine]), 1),
            fmt(median([s["postgres_us"] for s in mine]), 1),
            fmt(median([s["busy_pct"] for s in mine])),
        ]
        for system, mine in samples.items()
    ]
    print(f"\nruns={args.runs}, median of {args.repeat}")
    print(table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
