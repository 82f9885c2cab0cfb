"""The claim loop writes completions with its claims: what an outage or a slow store does."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from worker_support import DEADLINE, CountingStore, in_state, make_app

from tickwork.errors import StoreUnavailable
from tickwork.job import ClaimedRun, Run, RunState
from tickwork.store import Store
from tickwork.store.base import Completion
from tickwork.tasks import Context
from tickwork.testing import wait_until
from tickwork.worker import Worker


class OutageStore(CountingStore):
    """The real store, but ``complete_and_claim`` calls that carry completions fail with
    StoreUnavailable ``failures`` times, and ``fail`` waits for ``gate``."""

    def __init__(self, inner: Store, *, failures: int = 0) -> None:
        super().__init__(inner)
        self.failures = failures
        self.gate = threading.Event()
        self.gate.set()

    def complete_and_claim(
        self, completions: Sequence[Completion], worker: str, **kwargs: Any
    ) -> tuple[list[int], list[ClaimedRun]]:
        if completions:
            with self._lock:
                failing = self.failures > 0
                self.failures -= failing
            if failing:
                raise StoreUnavailable("connection refused (injected)")
        return super().complete_and_claim(completions, worker, **kwargs)

    def fail(self, run_id: int, fencing_token: int, error: str, **kwargs: Any) -> Run:
        self.gate.wait(10)
        return super().fail(run_id, fencing_token, error, **kwargs)


def test_completions_survive_a_store_outage_and_are_written_once(store: Store) -> None:
    app = make_app(store, concurrency=4)

    @app.task
    def quick(ctx: Context) -> int:
        return ctx.run_id

    jobs = [app.submit(quick) for _ in range(12)]
    flaky = OutageStore(app.store, failures=3)
    worker = Worker(flaky, app.registry, app.config)
    worker.start()
    try:
        runs = [in_state(store, job, RunState.SUCCEEDED) for job in jobs]
    finally:
        worker.stop()
        app.close()

    assert flaky.failures == 0  # every injected failure was met, and retried past
    assert [(r.attempt, r.result) for r in runs] == [(1, {"value": r.id}) for r in runs]
    written = [c.run_id for args in flaky.args["complete_and_claim"] for c in args[0]]
    assert sorted(set(written)) == sorted(r.id for r in runs)


def test_unwritten_outcomes_hold_back_claims(store: Store) -> None:
    app = make_app(store, concurrency=3)

    @app.task(max_attempts=1)
    def broken(ctx: Context) -> None:
        raise RuntimeError("no")

    jobs = [app.submit(broken) for _ in range(10)]
    slow = OutageStore(app.store)
    slow.gate.clear()  # failures wait: the store is slow to take them
    worker = Worker(slow, app.registry, app.config)
    worker.start()
    try:
        wait_until(lambda: len(worker.held) == 3 and worker.executor.busy == 0, DEADLINE)
        # The three handlers returned, but their outcomes are unwritten: nothing more is
        # claimed until they are, however often the claim loop looks.
        for _ in range(3):
            done = worker.passes
            worker.wake()
            worker.wait_passes(done + 1)
        claimed = [r for r in store.list_runs(limit=50).items if r.state is not RunState.QUEUED]
        assert len(claimed) == 3
        slow.gate.set()
        for job in jobs:
            in_state(store, job, RunState.DEAD)
    finally:
        worker.stop()
        app.close()
