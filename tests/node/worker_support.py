"""Helpers for the in-process worker tests: fast timings, polling with deadlines, an App on
the test's own store, and typed store wrappers that change or count the calls a worker
makes."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypedDict, TypeVar

from tickwork.app import App
from tickwork.config import RUN_LEASE, Config
from tickwork.job import FINISHED_RUN_STATES, ClaimedRun, Job, Run, RunState
from tickwork.records import AttemptEnd, Completion, FaultMark, LeaseStatus, NodeRecord, TaskLimits
from tickwork.store import Store
from tickwork.store.base import Listener
from tickwork.store.health import StoreHealth
from tickwork.store.roles import WorkerStore
from tickwork.testing import wait_until
from tickwork.worker import Worker

P = ParamSpec("P")
R = TypeVar("R")

DEADLINE = 15.0
"""Seconds a condition may take to become true; generous, so a slow box fails on behaviour."""


class Timings(TypedDict):
    run_lease: timedelta
    run_heartbeat: timedelta
    poll_interval: timedelta
    shutdown_grace: timedelta


FAST: Timings = {
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
    """A real store seen as a worker sees it (:class:`~tickwork.store.roles.WorkerStore`):
    every call goes to ``inner`` through :meth:`_call`, which a subclass may change for
    every call (counting them), or a subclass replaces one call (a stall, a failure)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def _call(self, name: str, method: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(*args, **kwargs)

    @property
    def health(self) -> StoreHealth:
        return self._inner.health

    @property
    def capabilities(self) -> frozenset[str]:
        return self._inner.capabilities

    def now(self) -> datetime:
        return self._call("now", self._inner.now)

    def register_node(
        self,
        node_id: str,
        kind: str,
        host: str,
        pid: int,
        info: dict[str, Any] | None = None,
        *,
        now: datetime | None = None,
    ) -> None:
        self._call(
            "register_node", self._inner.register_node, node_id, kind, host, pid, info, now=now
        )

    def node_heartbeat(
        self,
        node_id: str,
        *,
        running: int = 0,
        info: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> None:
        self._call(
            "node_heartbeat",
            self._inner.node_heartbeat,
            node_id,
            running=running,
            info=info,
            now=now,
        )

    def deregister_node(self, node_id: str) -> None:
        self._call("deregister_node", self._inner.deregister_node, node_id)

    def list_nodes(
        self, *, seen_within: timedelta | None = None, now: datetime | None = None
    ) -> list[NodeRecord]:
        return self._call("list_nodes", self._inner.list_nodes, seen_within=seen_within, now=now)

    def listener(self, channels: Sequence[str]) -> Listener:
        return self._call("listener", self._inner.listener, channels)

    def next_due_at(self) -> datetime | None:
        return self._call("next_due_at", self._inner.next_due_at)

    def complete_and_claim(
        self,
        completions: Sequence[Completion],
        worker: str,
        *,
        limit: int,
        lease: timedelta = RUN_LEASE,
        queues: Sequence[str] | None = None,
        tasks: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> tuple[list[int], list[ClaimedRun]]:
        return self._call(
            "complete_and_claim",
            self._inner.complete_and_claim,
            completions,
            worker,
            limit=limit,
            lease=lease,
            queues=queues,
            tasks=tasks,
            now=now,
        )

    def next_claimable_at(
        self, *, queues: Sequence[str] | None = None, tasks: Sequence[str] | None = None
    ) -> datetime | None:
        return self._call(
            "next_claimable_at", self._inner.next_claimable_at, queues=queues, tasks=tasks
        )

    def heartbeat_many(
        self,
        leases: Sequence[tuple[int, int]],
        *,
        lease: timedelta = RUN_LEASE,
        now: datetime | None = None,
    ) -> dict[int, LeaseStatus]:
        return self._call(
            "heartbeat_many", self._inner.heartbeat_many, leases, lease=lease, now=now
        )

    def complete_many(
        self, completions: Sequence[Completion], *, now: datetime | None = None
    ) -> list[int]:
        return self._call("complete_many", self._inner.complete_many, completions, now=now)

    def complete_in_transaction(
        self,
        run_id: int,
        fencing_token: int,
        *,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> AbstractContextManager[Any]:
        return self._call(
            "complete_in_transaction",
            self._inner.complete_in_transaction,
            run_id,
            fencing_token,
            result=result,
            now=now,
        )

    def fail(
        self,
        run_id: int,
        fencing_token: int,
        error: str,
        *,
        traceback: str | None = None,
        ended: AttemptEnd = AttemptEnd.FAILED,
        retry_after: timedelta | None = None,
        discard: bool = False,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Run:
        return self._call(
            "fail",
            self._inner.fail,
            run_id,
            fencing_token,
            error,
            traceback=traceback,
            ended=ended,
            retry_after=retry_after,
            discard=discard,
            result=result,
            now=now,
        )

    def release(self, run_id: int, fencing_token: int, *, now: datetime | None = None) -> Run:
        return self._call("release", self._inner.release, run_id, fencing_token, now=now)

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        return self._call("get_job", self._inner.get_job, job_id, tenant=tenant)

    def register_task_limits(
        self, limits: Mapping[str, TaskLimits], *, now: datetime | None = None
    ) -> None:
        self._call("register_task_limits", self._inner.register_task_limits, limits, now=now)

    def fault_injection_allowed(self) -> bool:
        return self._call("fault_injection_allowed", self._inner.fault_injection_allowed)

    def mark_injected(
        self, marks: Sequence[FaultMark], worker: str, *, now: datetime | None = None
    ) -> list[int]:
        return self._call("mark_injected", self._inner.mark_injected, marks, worker, now=now)


class CountingStore(WrappedStore):
    """A store that counts a worker's calls by method name, and keeps the positional
    arguments of each."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.calls: Counter[str] = Counter()
        self.args: dict[str, list[tuple[Any, ...]]] = {}
        self._lock = threading.Lock()

    def _call(self, name: str, method: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            self.calls[name] += 1
            self.args.setdefault(name, []).append(args)
        return method(*args, **kwargs)


_ROLE: type[WorkerStore] = WrappedStore
"""Checked by mypy: the wrapper is a worker's store, whatever a subclass changes."""
