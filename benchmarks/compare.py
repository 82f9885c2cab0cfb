"""tickwork against its Python peers: the same no-op workload, one run, one PostgreSQL.

    python benchmarks/compare.py [--quick] [--runs N] [--repeat K] [--only a,b]

For each system, in a fresh database of its own (created, then dropped), two phases:

1. **Drain.** N no-op runs are enqueued (each system's bulk API when it has one: that
   rate is the *enqueue/s* column), then ONE worker process drains them; *runs/s* is N
   over the worker's wall time from the call that starts it working until it returns
   with everything finished and recorded.
2. **Start lag.** A fresh worker process idles; runs are then enqueued *scheduled* for
   the near future, ``--rate`` per second (500) for ``--lag-seconds``, all enqueued
   before the first is due. Lag is the moment the no-op handler starts minus the due
   time that the system itself stored for the run (p50, p99, max in ms).

Systems and how they are run (the configuration each one's docs recommend for
throughput, no-op async handlers where the peer supports them):

- ``pgqueuer``: ``QueueManager.run`` at its defaults (batch_size 10) on asyncpg, its
  default driver (its psycopg driver holds the one connection while it waits for
  notifications and drains ~25x slower);
- ``pgqueuer-b100``, ``pgqueuer-b500``: the same with ``batch_size=100`` and ``500``
  (``pgqueuer-bN`` works for any N: the best of them is pgqueuer's best configuration);
- ``procrastinate``: ``App.run_worker_async(concurrency=10)``, psycopg connector,
  defaults otherwise (listen/notify on, 5 s fetch polling);
- ``tickwork``: the real ``tickwork.worker.Worker`` (claim batch 100, concurrency 200,
  an async no-op task); in the lag phase the real ``Scheduler`` runs in the same
  process (as under ``tickwork run``): one-off jobs are submitted for their due time and
  the scheduler triggers each into a run on time;
- ``tickwork-b500`` (``tickwork-bN`` for any N): the same worker claiming N runs at a
  time, concurrency 2N (two batches in flight);
- ``tickwork-defaults``: the same worker with no settings at all (``Config()``: an
  async task's default concurrency and claim batch), against ``pgqueuer`` at its
  defaults: the row for users who never change a setting;
- ``tickwork-store``: no worker machinery, ``complete_and_claim(limit=100)`` in a loop
  (each call completes the batch before): the store alone, what the worker would reach
  if dispatch cost nothing (lag phase: same Scheduler, woken by LISTEN/NOTIFY).

Systems are interleaved (the order rotates per repeat) and each figure is the median of
``--repeat`` repeats. Below the ratios, the runs/s of each side's best worker
configuration (the best of ``tickwork``/``tickwork-bN`` over the best of
``pgqueuer``/``pgqueuer-bN``): the figure issue 5 sets a target for. ``--quick``
(N = 5,000, one repeat, 2 s of lag, without ``tickwork-store``) finishes in under three
minutes on an idle 2-core machine; the default is N = 20,000, three repeats, 5 s of lag.
``--enqueue-only`` measures the enqueue/s column alone (no worker, no lag phase): seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import PG_SERVER, fmt, fresh_database, machine, median, percentile, table

SYSTEMS = (
    "pgqueuer",
    "pgqueuer-b100",
    "pgqueuer-b500",
    "procrastinate",
    "tickwork",
    "tickwork-b500",
    "tickwork-defaults",
    "tickwork-store",
)
TICKWORK = "tickwork"
TICKWORK_STORE = "tickwork-store"
TICKWORK_DEFAULTS = "tickwork-defaults"
NOOP = "noop"
CLAIM_BATCH = 100
"""Runs per claim (tickwork's default claim batch)."""
SUBMIT_BATCH = 1000
"""One-off jobs per ``app.submit_many`` call (one transaction) when tickwork enqueues: the
public API, jobs as dicts checked against the task registry, as ``POST /jobs/batch``'s
1,000."""
TICKWORK_CONCURRENCY = 200
"""Runs in flight in tickwork's worker: two claim batches, so one batch executes while
the next is claimed (pgqueuer bounds nothing: it dispatches every batch it picks). At
100 every claim waits for the batch before it to be written: 0.9x the runs/s. The
default, 10, caps every claim at 10 runs."""
PROCRASTINATE_CONCURRENCY = 10
BUCKET = 0.010
"""Seconds: the lag phase's due times are spread over buckets this wide."""
LEAD_MIN = 1.0
"""Seconds: the first lag-phase run is due at least this long after enqueueing starts."""
WORKER_GRACE = 60.0
"""Seconds a worker process may take beyond the expected time before it is killed."""
SLOWEST = 25.0
"""Runs/s below which a drain is given up (the worker is killed, the sample noted)."""
READY = "READY"


# -- the worker process ---------------------------------------------------------------------


class Recorder:
    """Counts handler starts and the start lag of those with a due time."""

    def __init__(self, expect: int, on_done: Callable[[], None]) -> None:
        self.expect = expect
        self.count = 0
        self.lags_ms: list[float] = []
        self._on_done = on_done
        self._lock = threading.Lock()  # tickwork's handlers may run on several threads

    def started(self, due: datetime | None) -> None:
        now = time.time()
        with self._lock:
            self.count += 1
            if due is not None:
                self.lags_ms.append((now - due.timestamp()) * 1000.0)
            finished = self.count == self.expect
        if finished:
            self._on_done()

    def report(self, seconds: float, engine: str) -> dict[str, Any]:
        return {
            "handled": self.count,
            "seconds": seconds,
            "engine": engine,
            "lag_p50_ms": percentile(self.lags_ms, 50),
            "lag_p95_ms": percentile(self.lags_ms, 95),
            "lag_p99_ms": percentile(self.lags_ms, 99),
            "lag_max_ms": max(self.lags_ms, default=math.nan),
        }


def ready() -> None:
    print(READY, flush=True)


async def pgqueuer_worker(url: str, phase: str, expect: int, batch_size: int) -> dict[str, Any]:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.models import Job
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    conn = await asyncpg.connect(url)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))
    done = asyncio.Event()
    rec = Recorder(expect, done.set)

    @qm.entrypoint(NOOP)
    async def noop(job: Job) -> None:
        rec.started(job.execute_after if phase == "lag" else None)

    ready()
    t0 = time.perf_counter()
    if phase == "drain":
        await qm.run(batch_size=batch_size, mode=QueueExecutionMode.drain)
    else:
        running = asyncio.create_task(qm.run(batch_size=batch_size))
        await done.wait()
        qm.shutdown.set()
        await running
    seconds = time.perf_counter() - t0
    await conn.close()
    return rec.report(seconds, f"pgqueuer QueueManager batch_size={batch_size}")


async def procrastinate_worker(url: str, phase: str, expect: int) -> dict[str, Any]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    done = asyncio.Event()
    rec = Recorder(expect, done.set)

    @app.task(name=NOOP, pass_context=True)
    async def noop(context: procrastinate.JobContext) -> None:
        assert context.job is not None
        rec.started(context.job.scheduled_at if phase == "lag" else None)

    options: dict[str, Any] = {
        "concurrency": PROCRASTINATE_CONCURRENCY,
        "install_signal_handlers": False,
    }
    async with app.open_async():
        ready()
        t0 = time.perf_counter()
        if phase == "drain":
            await app.run_worker_async(wait=False, **options)
        else:
            running = asyncio.create_task(app.run_worker_async(wait=True, **options))
            await done.wait()
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
        seconds = time.perf_counter() - t0
    engine = f"procrastinate run_worker_async concurrency={PROCRASTINATE_CONCURRENCY}"
    return rec.report(seconds, engine)


def tickwork_worker(
    url: str, phase: str, expect: int, batch: int | None = CLAIM_BATCH
) -> dict[str, Any]:
    """The real ``tickwork.worker.Worker`` with an async no-op task, claiming ``batch``
    runs at a time with two batches in flight (None: every setting at its default); in
    the lag phase the real ``Scheduler`` runs in the same process (as under ``tickwork
    run``)."""
    from tickwork.config import Config
    from tickwork.scheduler import Scheduler
    from tickwork.store.postgres import PostgresStore
    from tickwork.tasks import Registry, Task
    from tickwork.worker import Worker

    done = threading.Event()
    rec = Recorder(expect, done.set)

    async def noop(ctx: Any) -> None:
        rec.started(ctx.scheduled_for if phase == "lag" else None)

    registry = Registry()
    registry.add(Task(NOOP, noop))
    if batch is None:
        config = Config(db_url=url)
    else:
        concurrency = TICKWORK_CONCURRENCY * batch // CLAIM_BATCH
        config = Config(db_url=url, concurrency=concurrency, claim_batch=batch)
    store = PostgresStore(url)
    scheduler = None
    if phase == "lag":
        scheduler = Scheduler(store, config)
        scheduler.start()
        while not scheduler.leading:
            time.sleep(0.01)
    worker = Worker(store, registry, config)
    ready()
    t0 = time.perf_counter()
    worker.start()
    done.wait()
    worker.stop_gracefully()  # waits for the last handlers and writes every outcome
    seconds = time.perf_counter() - t0
    if scheduler is not None:
        scheduler.stop()
    store.close()
    settings = "defaults: " if batch is None else ""
    engine = (
        f"tickwork Worker {settings}concurrency={worker.concurrency} "
        f"claim_batch={config.claim_batch}, async no-op"
    )
    return rec.report(seconds, engine + (", Scheduler in-process" if scheduler else ""))


def tickwork_store_worker(url: str, phase: str, expect: int) -> dict[str, Any]:
    """Store-level drain: ``claim`` + ``complete_many`` in a loop, no handler dispatch: the
    floor under the worker's cost. Lag phase: Scheduler in-process, woken by NOTIFY."""
    from tickwork.config import Config
    from tickwork.scheduler import Scheduler
    from tickwork.store.base import CHANNEL_RUNS, Completion
    from tickwork.store.postgres import PostgresStore

    store = PostgresStore(url)
    done = threading.Event()
    rec = Recorder(expect, done.set)
    worker_id = f"bench-{os.getpid()}"
    scheduler = None
    listener = None
    if phase == "lag":
        scheduler = Scheduler(store, Config(db_url=url))
        scheduler.start()
        while not scheduler.leading:
            time.sleep(0.01)
        listener = store.listener([CHANNEL_RUNS])
    ready()
    t0 = time.perf_counter()
    runs: list[Any] = []
    while not done.is_set():
        finished = [Completion(r.id, r.fencing_token) for r in runs]
        _, runs = store.complete_and_claim(finished, worker_id, limit=CLAIM_BATCH)
        if runs:
            for run in runs:
                rec.started(run.scheduled_for if phase == "lag" else None)
        elif listener is None:
            break  # drain: the queue was filled before we started, so empty means done
        else:
            listener.wait(1.0)
    seconds = time.perf_counter() - t0
    if listener is not None:
        listener.close()
    if scheduler is not None:
        scheduler.stop()
    store.close()
    engine = f"store-level loop: complete_and_claim(limit={CLAIM_BATCH}), no handlers"
    return rec.report(seconds, engine + (", Scheduler in-process" if scheduler else ""))


def quiet_logs() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # It warns that an App defined in __main__ cannot be found by its CLI: not used here.
    logging.getLogger("procrastinate").setLevel(logging.ERROR)


def worker_main(system: str, url: str, phase: str, expect: int) -> None:
    quiet_logs()
    if system == "pgqueuer":
        result = asyncio.run(pgqueuer_worker(url, phase, expect, batch_size=10))
    elif system.startswith("pgqueuer-b"):
        batch = int(system.removeprefix("pgqueuer-b"))
        result = asyncio.run(pgqueuer_worker(url, phase, expect, batch_size=batch))
    elif system == "procrastinate":
        result = asyncio.run(procrastinate_worker(url, phase, expect))
    elif system == TICKWORK_DEFAULTS:
        result = tickwork_worker(url, phase, expect, batch=None)
    elif system == TICKWORK_STORE:
        result = tickwork_store_worker(url, phase, expect)
    elif system.startswith("tickwork-b"):
        batch = int(system.removeprefix("tickwork-b"))
        result = tickwork_worker(url, phase, expect, batch=batch)
    else:
        result = tickwork_worker(url, phase, expect)
    print(json.dumps(result), flush=True)


# -- enqueueing (the driving process) -------------------------------------------------------


async def install(system: str, url: str) -> None:
    if system.startswith("pgqueuer"):
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        conn = await asyncpg.connect(url)
        try:
            await Queries(AsyncpgDriver(conn)).install()
        finally:
            await conn.close()
    elif system == "procrastinate":
        app = _procrastinate_app(url)
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
    else:
        from tickwork.store.postgres import PostgresStore

        PostgresStore(url, migrate=True).close()


def _procrastinate_app(url: str) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    app.task(name=NOOP)(_never_called)
    return app


def _never_called() -> None:
    raise AssertionError("the driving process never runs tasks")


def _never_run(ctx: Any) -> None:
    """tickwork's task in the driving process: registered so submits are checked, not run."""
    _never_called()


async def enqueue(system: str, url: str, dues: Sequence[float] | None, n: int) -> float:
    """Enqueue ``n`` runs due now (``dues`` None) or at the given epoch seconds; return
    the seconds it took. The peers take one bulk statement per 10,000 runs, tickwork one
    ``app.submit_many`` call (one transaction) per SUBMIT_BATCH one-off jobs."""
    buckets = _buckets(dues) if dues is not None else [(None, n)]
    t0 = time.perf_counter()
    if system.startswith("pgqueuer"):
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        conn = await asyncpg.connect(url)
        try:
            queries = Queries(AsyncpgDriver(conn))
            for start in range(0, n, 10_000):  # one statement per 10,000 rows
                count = min(10_000, n - start)
                after = None
                if dues is not None:
                    now = time.time()
                    after = [timedelta(seconds=d - now) for d in dues[start : start + count]]
                await queries.enqueue([NOOP] * count, [None] * count, [0] * count, after)
        finally:
            await conn.close()
    elif system == "procrastinate":
        app = _procrastinate_app(url)
        async with app.open_async():
            if dues is None:
                deferrer = app.configure_task(NOOP)
                for start in range(0, n, 10_000):
                    await deferrer.batch_defer_async(*[{}] * min(10_000, n - start))
            else:
                # batch_defer shares one schedule_at; the job manager's batch takes each
                # job's own, still one statement per 10,000 jobs.
                jobs = [
                    app.configure_task(NOOP, schedule_at=datetime.fromtimestamp(d, UTC)).job
                    for d in dues
                ]
                for start in range(0, n, 10_000):
                    await app.job_manager.batch_defer_jobs_async(jobs[start : start + 10_000])
    else:
        from tickwork.app import App

        # The public API, as a user's code would enqueue: app.submit_many with one dict per
        # job, validated against the task registry, one transaction per SUBMIT_BATCH.
        app = App(url)
        app.task(name=NOOP)(_never_run)
        try:
            submits: list[dict[str, Any]] = []
            for due, count in buckets:
                job = {"task": NOOP} if due is None else {"task": NOOP, "at": _utc(due)}
                submits += [job] * count
            for start in range(0, n, SUBMIT_BATCH):
                app.submit_many(submits[start : start + SUBMIT_BATCH])
        finally:
            app.close()
    return time.perf_counter() - t0


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _buckets(dues: Sequence[float]) -> list[tuple[float | None, int]]:
    out: list[tuple[float | None, int]] = []
    for due in dues:
        if out and out[-1][0] == due:
            out[-1] = (due, out[-1][1] + 1)
        else:
            out.append((due, 1))
    return out


def lag_schedule(start: float, rate: float, seconds: float) -> list[float]:
    """Due times (epoch seconds) for ``rate`` runs per second over ``seconds``, bucketed."""
    total = round(rate * seconds)
    return [start + math.floor(i / rate / BUCKET) * BUCKET for i in range(total)]


# -- driving a worker process ---------------------------------------------------------------


class WorkerProcess:
    def __init__(self, system: str, url: str, phase: str, expect: int) -> None:
        cmd = [sys.executable, __file__, "--worker", system, "--url", url, "--phase", phase]
        self.proc = subprocess.Popen(
            [*cmd, "--expect", str(expect)],
            stdout=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != READY:
            self.proc.kill()
            raise RuntimeError(f"worker did not start (said {line!r})")

    def result(self, timeout: float) -> dict[str, Any]:
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise RuntimeError(f"worker did not finish within {timeout:.0f} s") from None
        if self.proc.returncode != 0:
            raise RuntimeError(f"worker exited {self.proc.returncode}")
        return dict(json.loads(out.strip().splitlines()[-1]))


@dataclass
class Sample:
    system: str
    enqueue_per_s: float = math.nan
    runs_per_s: float = math.nan
    lag_p50_ms: float = math.nan
    lag_p99_ms: float = math.nan
    lag_max_ms: float = math.nan
    engine: str = ""
    notes: list[str] = field(default_factory=list)
    parts: dict[str, float] = field(default_factory=dict)  # tickwork's lag, split (ms)


async def measure(
    system: str, server: str, runs: int, rate: float, lag_seconds: float, *, drain: bool = True
) -> Sample:
    sample = Sample(system)
    family = system.split("-", maxsplit=1)[0]
    with fresh_database(server, f"bench_{family}") as url:
        await install(system, url)
        seconds = await enqueue(system, url, None, runs)
        sample.enqueue_per_s = runs / seconds
        if not drain:
            return sample

        worker = WorkerProcess(system, url, "drain", runs)
        worker.wait_ready()
        drained = worker.result(timeout=WORKER_GRACE + runs / SLOWEST)
        if drained["handled"] != runs:
            sample.notes.append(f"drain handled {drained['handled']} of {runs}")
        sample.runs_per_s = drained["handled"] / drained["seconds"]
        sample.engine = drained["engine"]

        if lag_seconds > 0:
            dues_count = round(rate * lag_seconds)
            worker = WorkerProcess(system, url, "lag", dues_count)
            worker.wait_ready()
            # Everything is enqueued before the first run is due, so the lag measures
            # the worker's own timing, not the enqueue competing with it.
            lead = LEAD_MIN + 1.5 * dues_count / sample.enqueue_per_s
            dues = lag_schedule(time.time() + lead, rate, lag_seconds)
            await enqueue(system, url, dues, dues_count)
            late = time.time() - dues[0]
            if late > 0:
                sample.notes.append(f"lag enqueue ended {late * 1000:.0f} ms after first due")
            lagged = worker.result(timeout=WORKER_GRACE + lead + dues_count / SLOWEST)
            sample.lag_p50_ms = lagged["lag_p50_ms"]
            sample.lag_p99_ms = lagged["lag_p99_ms"]
            sample.lag_max_ms = lagged["lag_max_ms"]
            if system.startswith(TICKWORK):
                sample.parts = lag_parts(url, dues[0])
    return sample


def lag_parts(url: str, first_due: float) -> dict[str, float]:
    """tickwork's lag split at the store's own timestamps (each a transaction's start):
    *wake*, the trigger transaction's start minus the slot (the timer's precision), and
    *hand-off*, the claim transaction's start minus the trigger's (the trigger transaction
    and its commit, the NOTIFY, the worker waking). The rest of the lag is the claim
    transaction itself and the dispatch to the handler."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT extract(epoch FROM created_at - scheduled_for) * 1000, "
            "extract(epoch FROM started_at - created_at) * 1000 FROM tickwork_runs "
            "WHERE scheduled_for >= to_timestamp(%s) AND started_at IS NOT NULL",
            (first_due,),
        ).fetchall()
    wake = [float(r[0]) for r in rows]
    hand_off = [float(r[1]) for r in rows]
    return {
        "wake p50": percentile(wake, 50),
        "wake p99": percentile(wake, 99),
        "hand-off p50": percentile(hand_off, 50),
        "hand-off p99": percentile(hand_off, 99),
    }


# -- the report -----------------------------------------------------------------------------


def summarise(samples: list[Sample], systems: Sequence[str]) -> dict[str, Sample]:
    out: dict[str, Sample] = {}
    for system in systems:
        mine = [s for s in samples if s.system == system]
        if not mine:
            continue
        out[system] = Sample(
            system,
            median([s.enqueue_per_s for s in mine]),
            median([s.runs_per_s for s in mine]),
            median([s.lag_p50_ms for s in mine]),
            median([s.lag_p99_ms for s in mine]),
            median([s.lag_max_ms for s in mine]),
            next((s.engine for s in mine if s.engine), ""),
            [n for s in mine for n in s.notes],
            {k: median([s.parts.get(k, math.nan) for s in mine]) for s in mine for k in s.parts},
        )
    return out


def report(summary: dict[str, Sample], args: argparse.Namespace) -> str:
    header = ["system", "enqueue/s", "runs/s", "lag p50 ms", "lag p99 ms", "lag max ms"]
    rows = [
        [
            s.system,
            fmt(s.enqueue_per_s),
            fmt(s.runs_per_s),
            fmt(s.lag_p50_ms, 1),
            fmt(s.lag_p99_ms, 1),
            fmt(s.lag_max_ms, 1),
        ]
        for s in summary.values()
    ]
    lines = [
        f"runs={args.runs} repeat={args.repeat} lag: {args.rate:g} due runs/s for "
        f"{args.lag_seconds:g} s; median of {args.repeat} repeat(s)",
        table(header, rows),
        "",
    ]
    tick = summary.get(TICKWORK)
    if tick is not None and any(not name.startswith(TICKWORK) for name in summary):
        ratio_rows = []
        for peer in summary.values():
            if peer.system.startswith(TICKWORK):
                continue
            ratio_rows.append(
                [
                    f"tickwork / {peer.system}",
                    fmt(tick.enqueue_per_s / peer.enqueue_per_s, 2),
                    fmt(tick.runs_per_s / peer.runs_per_s, 2),
                    fmt(tick.lag_p99_ms / peer.lag_p99_ms, 2),
                ]
            )
        lines.append(table(["ratio", "enqueue/s", "runs/s", "lag p99 (lower: better)"], ratio_rows))
        lines.append("")
    for best in (best_of(summary), defaults_of(summary)):
        if best:
            lines.append(best)
            lines.append("")
    for s in summary.values():
        lines.append(f"{s.system}: {s.engine}")
        if s.parts:
            split = ", ".join(f"{k} {fmt(v, 1)}" for k, v in s.parts.items())
            lines.append(f"  lag split (ms, store timestamps): {split}")
        for note in sorted(set(s.notes)):
            lines.append(f"  note: {note}")
    return "\n".join(lines)


def best_of(summary: dict[str, Sample]) -> str | None:
    """The runs/s ratio of tickwork's best worker configuration (``tickwork``,
    ``tickwork-bN``) to pgqueuer's best (``pgqueuer``, ``pgqueuer-bN``), when both ran."""

    def best(family: str) -> Sample | None:
        mine = [
            s
            for name, s in summary.items()
            if (name == family or re.fullmatch(rf"{family}-b\d+", name))
            and not math.isnan(s.runs_per_s)
        ]
        return max(mine, key=lambda s: s.runs_per_s, default=None)

    tick, peer = best(TICKWORK), best("pgqueuer")
    if tick is None or peer is None:
        return None
    return (
        f"best worker configuration, runs/s: {tick.system} {fmt(tick.runs_per_s)} / "
        f"{peer.system} {fmt(peer.runs_per_s)} = {fmt(tick.runs_per_s / peer.runs_per_s, 2)}x"
    )


def defaults_of(summary: dict[str, Sample]) -> str | None:
    """The runs/s ratio of tickwork to pgqueuer, both at their default settings."""
    tick, peer = summary.get(TICKWORK_DEFAULTS), summary.get("pgqueuer")
    if tick is None or peer is None:
        return None
    return (
        f"default settings, runs/s: {tick.system} {fmt(tick.runs_per_s)} / "
        f"{peer.system} {fmt(peer.runs_per_s)} = {fmt(tick.runs_per_s / peer.runs_per_s, 2)}x"
    )


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="5,000 runs, 1 repeat, 2 s of lag")
    p.add_argument("--runs", type=int, help="runs to drain (default 20,000; quick 5,000)")
    p.add_argument("--repeat", type=int, help="repeats, median reported (default 3; quick 1)")
    p.add_argument("--rate", type=float, default=500.0, help="due runs/s in the lag phase")
    p.add_argument("--lag-seconds", type=float, help="lag phase length (default 5; quick 2)")
    p.add_argument("--only", help=f"comma-separated subset of {','.join(SYSTEMS)}")
    p.add_argument("--pg", default=PG_SERVER, help="PostgreSQL server URL, no database")
    p.add_argument("--json", type=Path, help="also write every sample to this file")
    p.add_argument("--enqueue-only", action="store_true", help="measure the enqueue/s column alone")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--phase", help=argparse.SUPPRESS)
    p.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.runs is None:
        args.runs = 5_000 if args.quick else 20_000
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.lag_seconds is None:
        args.lag_seconds = 2.0 if args.quick else 5.0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.worker:
        worker_main(args.worker, args.url, args.phase, args.expect)
        return 0
    quiet_logs()
    if args.only:
        systems = args.only.split(",")
    else:  # --quick leaves out the store-level floor: the table the issue asks for, sooner
        systems = [s for s in SYSTEMS if not (args.quick and s == TICKWORK_STORE)]
    unknown = {s for s in systems if not re.fullmatch(r"(pgqueuer|tickwork)-b\d+", s)}
    unknown -= set(SYSTEMS)
    if unknown:
        print(f"unknown systems: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    print(machine(args.pg), flush=True)
    started = time.perf_counter()
    samples: list[Sample] = []
    for k in range(args.repeat):
        order = systems[k % len(systems) :] + systems[: k % len(systems)]
        for system in order:
            t = time.perf_counter()
            try:
                sample = asyncio.run(
                    measure(
                        system,
                        args.pg,
                        args.runs,
                        args.rate,
                        args.lag_seconds,
                        drain=not args.enqueue_only,
                    )
                )
            except RuntimeError as exc:  # a worker that failed or stalled: note it, go on
                sample = Sample(system, notes=[f"repeat {k + 1} failed: {exc}"])
            samples.append(sample)
            print(
                f"  [{k + 1}/{args.repeat}] {system}: {fmt(sample.runs_per_s)} runs/s, "
                f"lag p99 {fmt(sample.lag_p99_ms, 1)} ms ({time.perf_counter() - t:.0f} s)",
                flush=True,
            )
    print()
    print(report(summarise(samples, systems), args))
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([s.__dict__ for s in samples], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
