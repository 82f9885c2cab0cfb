"""Helpers for the in-process worker tests: fast timings, polling with deadlines, an App on
the test's own store, and a store wrapper that counts the calls a worker makes."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from tickwork.app import App
from tickwork.config import Config
from tickwork.job import FINISHED_RUN_STATES, Job, Run, RunState
from tickwork.store import Store
from tickwork.testing import wait_until
from tickwork.worker import Worker

DEADLINE = 15.0
"""Seconds a condition may take to become true; generous, so a slow box fails on behaviour."""

FAST = {
    "run_lease": timedelta(seconds=3),
    "run_heartbeat": timedelta(milliseconds=100),
    "poll_interval": timedelta(milliseconds=20),
    "shutdown_grace": timedelta(seconds=5),
}


def make_app(store: Store, **config: Any) -> App:
    return App(config=Config(db_url=store.url, node_id="test-worker", **{**FAST, **config}))


def only_run(store: Store, job: Job) -> Run:
    (run,) = store.list_runs(job_id=job.id).items
    return run


def finished(store: Store, job: Job) -> Run:
    """The job's run once it is finished (succeeded, dead or cancelled)."""
    return wait_until(lambda: _if_finished(only_run(store, job)), DEADLINE)


def in_state(store: Store, job: Job, *states: RunState) -> Run:
    return wait_until(lambda: _if(only_run(store, job), lambda r: r.state in states), DEADLINE)


def _if_finished(run: Run) -> Run | None:
    return run if run.state in FINISHED_RUN_STATES else None


def _if(run: Run, test: Callable[[Run], bool]) -> Run | None:
    return run if test(run) else None


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """The worker started, and stopped (no grace) whatever happens."""
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


class WrappedStore:
    """A real store with some calls changed by a subclass (a stall, a failure); every
    other call goes to ``inner`` as it is."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class CountingStore:
    """A store that counts calls by method name (and keeps the arguments of some)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()
        self.args: dict[str, list[tuple[Any, ...]]] = {}
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls[name] += 1
                self.args.setdefault(name, []).append(args)
            return value(*args, **kwargs)

        return counted
