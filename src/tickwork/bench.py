"""``tickwork bench``: measure this set-up (its store, its host) with no-op runs.

Three phases, one after the other, on one store:

1. **submit**: ``runs`` one-off jobs due now, through :meth:`Store.submit_many` in batches of
   SUBMIT_BATCH; each becomes a queued run at once. Reports jobs submitted per second.
2. **drain**: ``workers`` worker OS processes, each the real :class:`~tickwork.worker.Worker`
   with the configuration ``tickwork worker`` would use (``TICKWORK_*`` variables apply;
   ``concurrency`` overrides its own). The processes start, open the store and say they are
   ready *before* the clock starts, then all begin at once: process start-up (a second or so
   of imports) is not counted. The clock stops when the store counts every run succeeded
   (polled every POLL_INTERVAL). Reports runs per second.
3. **lag**: with a scheduler running in this process and the same workers, ``lag_rate``
   one-off jobs per second falling due over ``lag_seconds``, submitted in advance; once all
   ran, the start lag of each (its first attempt's ``started_at`` minus its
   ``scheduled_for``: the scheduler's trigger plus a worker's claim) as p50, p95, p99 and
   max, in milliseconds.

Which store
-----------
By default a fresh SQLite file in a temporary directory, deleted afterwards: it never
touches ``./tickwork.db`` (nor ``TICKWORK_DB``; only ``--db`` names another store). Point
``db_url`` at a **scratch database**: the bench migrates an empty one, refuses one that
holds any job (its workers would run, and fail, other people's runs) or another
tickwork schema version, and leaves its own jobs and runs behind (drop the database
afterwards; a second bench needs an empty one again).

The figures are the user's own: no-op handlers, so they measure tickwork and the database,
not the work. Nothing here asserts a speed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

from tickwork.app import App
from tickwork.config import Config, default_node_id, resolve_db_url
from tickwork.errors import BenchError, ValidationError
from tickwork.inputs import make_spec
from tickwork.job import JobSpec, RunState
from tickwork.records import MAX_PAGE
from tickwork.schedule import Once
from tickwork.scheduler import Scheduler
from tickwork.stats import percentile
from tickwork.store import SQLITE_PREFIX, Store, open_store
from tickwork.tasks.task import Context

log = logging.getLogger("tickwork.bench")

DEFAULT_RUNS = 10_000
DEFAULT_WORKERS = 1
DEFAULT_LAG_RATE = 500.0
"""Runs falling due per second in the lag phase (the issue's target: p99 <= 10 ms at 500/s)."""
DEFAULT_LAG_SECONDS = 5.0
SUBMIT_BATCH = 1000
"""Jobs per submit_many call (one transaction each)."""
POLL_INTERVAL = 0.05
"""Seconds between the run counts that tell when a phase is done (three cheap queries)."""
STALL_TIMEOUT = 60.0
"""Seconds without one more succeeded run before a phase is given up."""
WORKER_START_TIMEOUT = 60.0
"""Seconds a worker process may take to import, open the store and say it is ready."""
WORKER_STOP_TIMEOUT = 30.0
"""Seconds a worker process may take to stop gracefully before it is killed."""
LEADER_TIMEOUT = 30.0
"""Seconds the in-process scheduler may take to lead (a fresh store's lease is free)."""
LAG_LEAD = 1.0
"""Seconds at least between planning the lag phase and its first slot, so every lag job is
submitted before it falls due..."""
LAG_LEAD_FACTOR = 3.0
"""...or this many times the time its submit should take at the measured submit rate."""
READY = "ready"
GO = "go"
STOP = "stop"
TASK_NAME = "tickwork.bench.noop"


def noop(ctx: Context) -> None:
    """Does nothing: the bench measures tickwork, not a handler (the task TASK_NAME)."""


@functools.cache
def bench_app() -> App:
    """The bench's tasks, built on first use (not at import: every tickwork command imports
    this module). ``tickwork worker --app tickwork.bench:app`` runs them too (to add workers
    on other hosts by hand).

    Not ``App()``: that reads every TICKWORK_* variable, so one bad variable would crash
    the bench with a traceback instead of its one-line error. Only the database URL of the
    environment is needed here.
    """
    app = App(config=Config(db_url=resolve_db_url(None)))
    app.task(name=TASK_NAME)(noop)
    return app


def __getattr__(name: str) -> App:
    """``tickwork.bench.app``: :func:`bench_app` (the name ``--app`` looks up)."""
    if name == "app":
        return bench_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class BenchOptions:
    """What to measure. ``db_url`` None: a temporary SQLite file. ``concurrency`` None: the
    workers' configured concurrency (``TICKWORK_CONCURRENCY``; by default 10: the no-op
    task is sync)."""

    db_url: str | None = None
    runs: int = DEFAULT_RUNS
    workers: int = DEFAULT_WORKERS
    concurrency: int | None = None
    lag_rate: float = DEFAULT_LAG_RATE
    lag_seconds: float = DEFAULT_LAG_SECONDS

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValidationError(f"runs must be at least 1, got {self.runs}", field="runs")
        if self.workers < 1:
            raise ValidationError(
                f"workers must be at least 1, got {self.workers}", field="workers"
            )
        if self.concurrency is not None and self.concurrency < 1:
            raise ValidationError(
                f"concurrency must be at least 1, got {self.concurrency}", field="concurrency"
            )
        for name in ("lag_rate", "lag_seconds"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValidationError(f"{name} must be a positive number, got {value}", field=name)
        if self.lag_runs < 1:
            raise ValidationError(
                f"lag rate x lag seconds must make at least one run, got "
                f"{self.lag_rate:g} x {self.lag_seconds:g}",
                field="lag_rate",
            )

    @property
    def lag_runs(self) -> int:
        return round(self.lag_rate * self.lag_seconds)


@dataclass(frozen=True)
class BenchResult:
    store: str  # sqlite | postgres
    runs: int
    workers: int
    concurrency: int
    submit_seconds: float
    drain_seconds: float
    lag_rate: float
    lag_seconds: float
    lag_ms: Sequence[float]  # one start lag per lag run (first attempts), sorted

    @property
    def submit_per_s(self) -> float:
        return self.runs / self.submit_seconds

    @property
    def runs_per_s(self) -> float:
        return self.runs / self.drain_seconds

    def lag_percentile(self, percent: float) -> float:
        """The ``percent`` percentile of the lags (:func:`tickwork.stats.percentile`)."""
        return percentile(self.lag_ms, percent) or 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "runs": self.runs,
            "workers": self.workers,
            "concurrency": self.concurrency,
            "submit_seconds": round(self.submit_seconds, 4),
            "submit_per_s": round(self.submit_per_s, 1),
            "drain_seconds": round(self.drain_seconds, 4),
            "runs_per_s": round(self.runs_per_s, 1),
            "lag_rate": self.lag_rate,
            "lag_seconds": self.lag_seconds,
            "lag_runs": len(self.lag_ms),
            "lag_p50_ms": round(self.lag_percentile(50), 2),
            "lag_p95_ms": round(self.lag_percentile(95), 2),
            "lag_p99_ms": round(self.lag_percentile(99), 2),
            "lag_max_ms": round(self.lag_ms[-1], 2),
        }


Progress = Callable[[str], None]


def run_bench(options: BenchOptions, progress: Progress | None = None) -> BenchResult:
    """Run the three phases (see the module docstring); ``progress`` hears what is next."""
    # The worker is imported where it runs: `import tickwork.cli` loads no worker.
    from tickwork.worker import default_concurrency

    say = progress or (lambda message: None)
    work_dir = Path(tempfile.mkdtemp(prefix="tickwork-bench-"))
    try:
        url = options.db_url or "sqlite:///" + str(work_dir / "bench.db")
        config = Config.from_env(db_url=url, concurrency=options.concurrency)
        if config.concurrency is None:
            config = dataclasses.replace(
                config, concurrency=default_concurrency(bench_app().registry)
            )
        store = _open_scratch(url)
        try:
            say(f"store: {_kind(url)}")
            return _measure(store, config, options, work_dir, say)
        finally:
            store.close()
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _open_scratch(url: str) -> Store:
    """The store at ``url``, migrated if it was empty; refused when it holds anything."""
    store = open_store(url, migrate=False)
    try:
        applied, latest = store.schema_version()
        if applied == 0:
            store.migrate()
        elif applied != latest:
            raise ValidationError(
                f"{_kind(url)} database holds tickwork schema version {applied}, not "
                f"{latest}: point --db at an empty scratch database",
                field="db",
            )
        elif store.list_jobs(limit=1).items:
            raise ValidationError(
                f"{_kind(url)} database already holds tickwork jobs; the bench needs an empty "
                "scratch database (its workers would run the jobs there)",
                field="db",
            )
    except BaseException:
        store.close()
        raise
    return store


def _kind(url: str) -> str:
    return "sqlite" if url.startswith(SQLITE_PREFIX) else "postgres"


def _measure(
    store: Store, config: Config, options: BenchOptions, work_dir: Path, say: Progress
) -> BenchResult:
    concurrency = config.concurrency
    assert concurrency is not None  # run_bench resolved the default
    template = make_spec(
        bench_app().registry, TASK_NAME
    )  # due now: each submit queues its run at once

    say(f"submit: {options.runs:,} no-op runs in batches of {SUBMIT_BATCH:,}")
    started = time.perf_counter()
    _submit(store, [template] * options.runs)
    submit_seconds = time.perf_counter() - started

    say(f"drain: starting {options.workers} worker processes (concurrency {config.concurrency})")
    workers = WorkerProcesses(config, options.workers, work_dir)
    try:
        workers.wait_ready()
        say(f"drain: {options.runs:,} runs")
        workers.go()
        started = time.perf_counter()
        _wait_succeeded(store, options.runs, workers)
        drain_seconds = time.perf_counter() - started

        lag_ms = _lag_phase(
            store,
            config=config,
            options=options,
            submit_rate=options.runs / submit_seconds,
            workers=workers,
            say=say,
        )
    finally:
        workers.stop()
    return BenchResult(
        store=_kind(config.db_url),
        runs=options.runs,
        workers=options.workers,
        concurrency=concurrency,
        submit_seconds=submit_seconds,
        drain_seconds=drain_seconds,
        lag_rate=options.lag_rate,
        lag_seconds=options.lag_seconds,
        lag_ms=lag_ms,
    )


def _submit(store: Store, specs: Sequence[JobSpec]) -> list[int]:
    """Submit ``specs`` in batches; the job ids, in order."""
    ids: list[int] = []
    for i in range(0, len(specs), SUBMIT_BATCH):
        ids.extend(s.job.id for s in store.submit_many(specs[i : i + SUBMIT_BATCH]))
    return ids


def _lag_phase(
    store: Store,
    *,
    config: Config,
    options: BenchOptions,
    submit_rate: float,
    workers: WorkerProcesses,
    say: Progress,
) -> list[float]:
    count = options.lag_runs
    scheduler = Scheduler(store, config)
    scheduler.start()
    try:
        deadline = time.monotonic() + LEADER_TIMEOUT
        while not scheduler.leading:
            if time.monotonic() > deadline:
                raise BenchError(f"the scheduler did not lead within {LEADER_TIMEOUT:g} s")
            time.sleep(0.01)
        lead = max(LAG_LEAD, LAG_LEAD_FACTOR * count / submit_rate)
        first = store.now() + timedelta(seconds=lead)
        template = make_spec(bench_app().registry, TASK_NAME)
        specs = [
            dataclasses.replace(
                template, schedule=Once(at=first + timedelta(seconds=i / options.lag_rate))
            )
            for i in range(count)
        ]
        say(
            f"lag: {count:,} runs due over {options.lag_seconds:g} s at "
            f"{options.lag_rate:g}/s, from {lead:.1f} s on"
        )
        job_ids = set(_submit(store, specs))
        _wait_succeeded(
            store,
            options.runs + count,
            workers,
            not_before=time.monotonic() + lead + options.lag_seconds,
        )
    finally:
        scheduler.stop()
    return _start_lags(store, job_ids)


def _start_lags(store: Store, job_ids: set[int]) -> list[float]:
    """Start lag (ms) of the first attempt of each run of ``job_ids``, sorted.

    The lag runs are the newest runs, so few pages are read.
    """
    lags: list[float] = []
    seen = 0
    after: int | None = None
    while seen < len(job_ids):
        page = store.list_runs(after=after, limit=MAX_PAGE)
        for run in page.items:
            if run.job_id not in job_ids:
                continue
            seen += 1
            if run.attempt == 1 and run.started_at is not None:
                lags.append((run.started_at - run.scheduled_for).total_seconds() * 1000)
        if page.next_cursor is None:
            break
        after = page.next_cursor
    if not lags:
        raise BenchError("no lag run started on its first attempt")
    return sorted(lags)


def _wait_succeeded(
    store: Store, target: int, workers: WorkerProcesses, *, not_before: float = 0.0
) -> None:
    """Return once ``target`` runs have succeeded. Raises BenchError when a run ends dead
    or cancelled, a worker process exits, or no run succeeds for STALL_TIMEOUT seconds
    (counted from ``not_before``, a monotonic time, at the earliest)."""
    succeeded = -1
    progress_at = time.monotonic()
    while True:
        counts = store.run_stats(lag_sample=0).by_state
        if counts[RunState.SUCCEEDED] >= target:
            return
        lost = counts[RunState.DEAD] + counts[RunState.CANCELLED]
        if lost:
            raise BenchError(f"{lost} runs ended dead or cancelled: {workers.log_hint()}")
        workers.check()
        now = time.monotonic()
        if counts[RunState.SUCCEEDED] != succeeded:
            succeeded = counts[RunState.SUCCEEDED]
            progress_at = now
        elif now - max(progress_at, not_before) > STALL_TIMEOUT:
            raise BenchError(
                f"no run succeeded for {STALL_TIMEOUT:g} s ({succeeded:,} of {target:,} "
                f"done): {workers.log_hint()}"
            )
        time.sleep(POLL_INTERVAL)


class WorkerProcesses:
    """Worker OS processes that start work together (:func:`worker_main` is each one).

    Each child opens the store, builds its Worker, prints READY and waits for GO on its
    stdin; after GO it works until STOP or the end of its stdin (so a parent that dies
    takes its children with it), then stops gracefully. Children ignore SIGINT: a Ctrl-C
    reaches the whole process group, and the parent stops them in order. Their logs go to
    files in ``log_dir``.
    """

    def __init__(self, config: Config, count: int, log_dir: Path) -> None:
        self.log_paths = [log_dir / f"worker-{i}.log" for i in range(count)]
        self.procs: list[subprocess.Popen[str]] = []
        for path in self.log_paths:
            with path.open("w") as log_file:
                self.procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-c",
                            "from tickwork.bench import worker_main; worker_main()",
                            config.db_url,
                            str(config.concurrency),
                        ],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=log_file,
                        text=True,
                    )
                )

    def wait_ready(self, timeout: float = WORKER_START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            for proc in self.procs:
                assert proc.stdout is not None
                selector.register(proc.stdout, selectors.EVENT_READ, proc)
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BenchError(
                        f"worker processes not ready within {timeout:g} s: {self.log_hint()}"
                    )
                for key, _ in selector.select(left):
                    stream: IO[str] = key.fileobj  # type: ignore[assignment]
                    if stream.readline().strip() != READY:
                        raise BenchError(f"a worker process failed to start: {self.log_hint()}")
                    selector.unregister(stream)

    def go(self) -> None:
        for proc in self.procs:
            self._send(proc, GO)

    def check(self) -> None:
        """Raise BenchError when a worker process has exited."""
        for proc in self.procs:
            if proc.poll() is not None:
                raise BenchError(
                    f"a worker process exited with code {proc.returncode}: {self.log_hint()}"
                )

    def stop(self) -> None:
        """Stop every child gracefully (kill those that take too long). Idempotent."""
        for proc in self.procs:
            self._send(proc, STOP)
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        deadline = time.monotonic() + WORKER_STOP_TIMEOUT
        for proc in self.procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker process %d did not stop in time; killing it", proc.pid)
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()

    def log_hint(self) -> str:
        """The last line a worker logged, to say what went wrong."""
        for path in self.log_paths:
            lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
            if lines:
                return f"{path.name}: {lines[-1]}"
        return "the worker logs are empty"

    @staticmethod
    def _send(proc: subprocess.Popen[str], line: str) -> None:
        if proc.stdin is None or proc.stdin.closed or proc.poll() is not None:
            return
        try:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
        except OSError:
            pass  # it exited meanwhile: check() says so


def worker_main(argv: Sequence[str] | None = None) -> None:
    """One bench worker process: ``DB_URL CONCURRENCY`` (see :class:`WorkerProcesses`)."""
    from tickwork.worker import Worker

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    url, concurrency = argv if argv is not None else sys.argv[1:3]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("tickwork")
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    root.propagate = False

    # Each its own node id, even when TICKWORK_NODE_ID is set for the parent.
    config = Config.from_env(
        db_url=url, concurrency=int(concurrency), node_id=f"bench-{default_node_id()}"
    )
    store = open_store(url, migrate=False)
    try:
        store.now()  # connected before READY: the clock starts after
        worker = Worker(store, bench_app().registry, config)
        print(READY, flush=True)
        if sys.stdin.readline().strip() != GO:
            return
        worker.start()
        try:
            sys.stdin.readline()  # STOP, or the end of stdin when the parent is gone
        finally:
            worker.stop_gracefully()
    finally:
        store.close()


__all__ = ["BenchOptions", "BenchResult", "bench_app", "noop", "run_bench", "worker_main"]
