"""Start lag, hop by hop: where the milliseconds between a run's slot and its handler's
start go.

    python benchmarks/start_lag.py [--store postgres|sqlite] [--rate 500] [--seconds 5]
                                   [--warmup 1] [--repeat 1]

PostgreSQL (the default): a scheduler process and a worker process, as ``tickwork
scheduler`` and ``tickwork worker`` run them (``Scheduler`` and ``Worker`` at default
settings, one async no-op task), on a fresh database. SQLite: one process with both, as
``tickwork run`` (a ``Node``), on a temporary file. This process submits one-off jobs due
``--rate`` per second for ``--warmup`` + ``--seconds`` seconds (10 ms buckets, as in
compare.py), all submitted before the first is due; runs of the warm-up are not counted.

The processes time their own steps on this machine's wall clock (``time.time()``): the
trigger loop's cycles and ``store.trigger`` calls, the worker's listener wake-ups, its
``complete_and_claim`` calls and each handler's start. No product code is changed: the
store's and the loop's methods are wrapped on the instances. Per run, the hops are:

    timer     the trigger loop's cycle begins        - the run's slot
    plan      store.trigger is called                - the cycle began (reads first,
              unless the loop woke on its own timer)
    trigger   store.trigger returned                 - it was called (statements, commit;
              the NOTIFY is sent at the commit)
    notify    the worker's listener woke             - store.trigger returned (< 0 when
              delivered before the call returned)
    wake      the claim call began                   - the listener woke
    claim     the claim call returned                - it began (one round trip, commit)
    dispatch  the handler started                    - the claim returned
    total     the handler started                    - the slot: the start lag

A run whose claim began without a wake-up from the listener since its trigger began (the
claim loop was already going round) has no *notify* hop; its *wake* is measured from the
trigger's return, and it is counted in the "claimed without a wake-up" line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_left
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import PG_SERVER, fmt, fresh_database, machine, median, percentile, table

HOPS = ("timer", "plan", "trigger", "notify", "wake", "claim", "dispatch", "total")
TASK = "noop"
BUCKET = 0.010
"""Seconds: due times are spread over buckets this wide (compare.py's lag phase)."""
LEAD = 1.5
"""Seconds between the end of submitting and the first due time, at least."""
SUBMIT_BATCH = 1000
READY, DONE, STOP = "READY", "DONE", "STOP"


# -- the instrumented processes -------------------------------------------------------------


class Timings:
    """What one process saw, as lists of plain values (sent to the driver as JSON)."""

    def __init__(self, expect: int) -> None:
        self.expect = expect
        self.lock = threading.Lock()
        self.cycle_started = 0.0
        self.triggers: list[tuple[float, float, float, list[tuple[int, float]]]] = []
        self.heard: list[float] = []
        self.claims: list[tuple[float, float, list[int]]] = []
        self.started: dict[int, float] = {}
        self.done = threading.Event()

    def json(self) -> dict[str, Any]:
        return {
            "triggers": self.triggers,
            "heard": self.heard,
            "claims": self.claims,
            "started": self.started,
        }


def instrument_scheduler(scheduler: Any, store: Any, timings: Timings) -> None:
    trigger_loop = scheduler.trigger
    real_cycle = trigger_loop._cycle
    real_trigger = store.trigger

    def cycle(on_time: bool) -> Any:
        timings.cycle_started = time.time()
        return real_cycle(on_time)

    def trigger(*args: Any, **kwargs: Any) -> Any:
        began = time.time()
        result = real_trigger(*args, **kwargs)
        ended = time.time()
        runs = [(run.id, run.scheduled_for.timestamp()) for run in result.runs]
        if runs:
            timings.triggers.append((timings.cycle_started, began, ended, runs))
        return result

    trigger_loop._cycle = cycle
    store.trigger = trigger


class HeardListener:
    """A listener whose wake-ups are timed (only the runs channel's)."""

    def __init__(self, inner: Any, timings: Timings) -> None:
        self._inner = inner
        self._timings = timings

    def wait(self, timeout: float) -> bool:
        arrived = bool(self._inner.wait(timeout))
        if arrived:
            self._timings.heard.append(time.time())
        return arrived

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def instrument_worker(store: Any, timings: Timings) -> None:
    from tickwork.store.base import CHANNEL_RUNS

    real_claim = store.complete_and_claim
    real_listener = store.listener

    def complete_and_claim(*args: Any, **kwargs: Any) -> Any:
        began = time.time()
        rejected, runs = real_claim(*args, **kwargs)
        ended = time.time()
        if runs:
            timings.claims.append((began, ended, [run.id for run in runs]))
        return rejected, runs

    def listener(channels: Sequence[str]) -> Any:
        inner = real_listener(channels)
        return HeardListener(inner, timings) if CHANNEL_RUNS in channels else inner

    store.complete_and_claim = complete_and_claim
    store.listener = listener


def registry_for(timings: Timings) -> Any:
    from tickwork.tasks import Registry, Task

    async def noop(ctx: Any) -> None:
        now = time.time()
        with timings.lock:
            timings.started[ctx.run_id] = now
            if len(timings.started) >= timings.expect:
                timings.done.set()

    registry = Registry()
    registry.add(Task(TASK, noop))
    return registry


def child_main(role: str, url: str, expect: int) -> None:
    """One process: ``scheduler``, ``worker`` or ``node`` (both, as ``tickwork run``)."""
    from tickwork.config import Config
    from tickwork.node import Node

    timings = Timings(expect)
    config = Config(db_url=url)
    registry = registry_for(timings)
    node = Node(config, registry, scheduler=role != "worker", worker=role != "scheduler")
    if node.scheduler is not None:
        instrument_scheduler(node.scheduler, node.store, timings)
    if node.worker is not None:
        instrument_worker(node.store, timings)
    node.store.now()  # connected before READY
    node.start()
    if node.scheduler is not None:
        while not node.scheduler.leading:
            time.sleep(0.005)
    print(READY, flush=True)
    if node.worker is not None:
        threading.Thread(target=_say_done, args=(timings,), daemon=True).start()
    sys.stdin.readline()  # STOP
    node.stop()
    print(json.dumps(timings.json()), flush=True)


def _say_done(timings: Timings) -> None:
    timings.done.wait()
    print(DONE, flush=True)


# -- the driver -----------------------------------------------------------------------------


class Child:
    def __init__(self, role: str, url: str, expect: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", role, "--url", url, "--expect", str(expect)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def expect_line(self, word: str, timeout: float) -> None:
        assert self.proc.stdout is not None
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        said = box[0].strip() if box else "(nothing)"
        if said != word:
            self.proc.kill()
            raise RuntimeError(f"child said {said!r}, not {word}")

    def finish(self) -> dict[str, Any]:
        out, _ = self.proc.communicate(STOP + "\n", timeout=60)
        return dict(json.loads(out.strip().splitlines()[-1]))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def due_times(start: float, rate: float, seconds: float) -> list[float]:
    return [start + math.floor(i / rate / BUCKET) * BUCKET for i in range(round(rate * seconds))]


def submit(url: str, dues: Sequence[float]) -> None:
    from tickwork.job import JobSpec
    from tickwork.schedule import Once
    from tickwork.store import open_store

    store = open_store(url)
    try:
        specs = [JobSpec(task=TASK, schedule=Once(at=datetime.fromtimestamp(d, UTC))) for d in dues]
        for start in range(0, len(specs), SUBMIT_BATCH):
            store.submit_many(specs[start : start + SUBMIT_BATCH])
    finally:
        store.close()


def run_once(url: str, kind: str, rate: float, seconds: float, warmup: float) -> dict[str, Any]:
    expect = round(rate * (warmup + seconds))
    roles = ["scheduler", "worker"] if kind == "postgres" else ["node"]
    children = [Child(role, url, expect) for role in roles]
    try:
        for child in children:
            child.expect_line(READY, 60)
        submit_seconds = expect / 5000  # a guess for the lead; checked below
        first = time.time() + LEAD + 2 * submit_seconds
        dues = due_times(first, rate, warmup + seconds)
        t = time.time()
        submit(url, dues)
        if time.time() > first:
            raise RuntimeError(f"submitting took {time.time() - t:.1f} s: past the first due")
        children[-1].expect_line(DONE, warmup + seconds + LEAD + 60)
        seen = [child.finish() for child in children]
    finally:
        for child in children:
            child.kill()
    merged: dict[str, Any] = {"triggers": [], "heard": [], "claims": [], "started": {}}
    for part in seen:
        for key in ("triggers", "heard", "claims"):
            merged[key] += part[key]
        merged["started"].update({int(k): v for k, v in part["started"].items()})
    return hops(merged, measured_from=first + warmup)


def hops(seen: dict[str, Any], measured_from: float) -> dict[str, Any]:
    """Per-run hops (ms) of the runs due at or after ``measured_from``."""
    trigger_of: dict[int, tuple[float, float, float, float]] = {}
    for cycle, began, ended, runs in seen["triggers"]:
        for run_id, slot in runs:
            trigger_of[run_id] = (slot, cycle, began, ended)
    claim_of: dict[int, tuple[float, float]] = {}
    for began, ended, run_ids in seen["claims"]:
        for run_id in run_ids:
            claim_of[run_id] = (began, ended)
    heard = sorted(seen["heard"])
    out: dict[str, list[float]] = {hop: [] for hop in HOPS}
    unwoken = 0
    for run_id, handler in seen["started"].items():
        if run_id not in trigger_of or run_id not in claim_of:
            continue
        slot, cycle, began, ended = trigger_of[run_id]
        if slot < measured_from - 1e-6:  # float: the first measured bucket is due at it
            continue
        claim_began, claim_ended = claim_of[run_id]
        i = bisect_left(heard, began)
        woke = heard[i] if i < len(heard) and heard[i] <= claim_began else None
        parts = {
            "timer": cycle - slot,
            "plan": began - cycle,
            "trigger": ended - began,
            "wake": claim_began - (woke if woke is not None else ended),
            "claim": claim_ended - claim_began,
            "dispatch": handler - claim_ended,
            "total": handler - slot,
        }
        if woke is not None:
            parts["notify"] = woke - ended
        else:
            unwoken += 1
        for hop, seconds in parts.items():
            out[hop].append(seconds * 1000)
    return {"hops": out, "unwoken": unwoken, "runs": len(out["total"])}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", choices=("postgres", "sqlite"), default="postgres")
    p.add_argument("--rate", type=float, default=500.0, help="due runs per second")
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds of due runs")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds of runs not counted")
    p.add_argument("--repeat", type=int, default=1, help="repeats; medians of percentiles")
    p.add_argument("--pg", default=PG_SERVER, help="PostgreSQL server URL, no database")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child_main(args.child, args.url, args.expect)
        return 0
    print(machine(args.pg if args.store == "postgres" else None), flush=True)
    results = []
    for k in range(args.repeat):
        if args.store == "postgres":
            with fresh_database(args.pg, "bench_lag") as url:
                from tickwork.store.postgres import PostgresStore

                PostgresStore(url, migrate=True).close()
                result = run_once(url, "postgres", args.rate, args.seconds, args.warmup)
        else:
            with tempfile.TemporaryDirectory(prefix="tickwork-lag-") as tmp:
                url = "sqlite:///" + os.path.join(tmp, "lag.db")
                result = run_once(url, "sqlite", args.rate, args.seconds, args.warmup)
        results.append(result)
        total = result["hops"]["total"]
        print(
            f"  [{k + 1}/{args.repeat}] {result['runs']} runs: lag p50 "
            f"{fmt(percentile(total, 50), 1)} ms, p99 {fmt(percentile(total, 99), 1)} ms",
            flush=True,
        )
    rows = []
    for hop in HOPS:
        cells = [hop]
        for p_ in (50, 99):
            cells.append(fmt(median([percentile(r["hops"][hop], p_) for r in results]), 2))
        cells.append(fmt(median([max(r["hops"][hop], default=math.nan) for r in results]), 2))
        rows.append(cells)
    layout = (
        "scheduler and worker processes"
        if args.store == "postgres"
        else "one process (tickwork run)"
    )
    print(
        f"\n{args.store}, {layout}, defaults; {args.rate:g} due runs/s for {args.seconds:g} s "
        f"(+{args.warmup:g} s warm-up); median of {args.repeat}"
    )
    print(table(["hop", "p50 ms", "p99 ms", "max ms"], rows))
    unwoken = sum(r["unwoken"] for r in results)
    counted = sum(r["runs"] for r in results)
    print(f"claimed without a wake-up from the listener: {unwoken} of {counted} runs")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
