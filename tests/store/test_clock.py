"""Conformance: one clock. A node whose local clock runs ahead cannot fire a job early,
expire a live lease early, or misplace a delayed job.

The skewed node is a real process under libfaketime (its ``time.time()`` is 90 s ahead),
acting through the store with ``now=None``, as a node in production does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.job import JobSpec, RunState
from tickwork.schedule import Once
from tickwork.store import Store

Children = Callable[..., list[dict[str, Any]]]

SKEW = 90.0  # seconds the child's clock runs ahead


def test_a_node_whose_clock_is_90s_ahead_cannot_act_early(
    store: Store, store_url: str, backend: str, children: Children, faketime_library: Path
) -> None:
    if backend == "sqlite":
        pytest.skip(
            "SQLite's clock is the host clock each process reads (one host by construction); "
            "a process with a faked clock is outside its model"
        )
    lib = faketime_library

    # A run due in 60 s by the store's clock: claimed once, failed with a retry in 60 s.
    now = store.now()
    waiting = store.submit(JobSpec(task="t", schedule=Once(at=now))).run
    assert waiting is not None
    held = store.claim("setup", limit=1)[0]
    store.fail(held.id, held.fencing_token, "x", retry_after=timedelta(seconds=60))
    # A job due in 60 s.
    job = store.submit(JobSpec(task="t", schedule=Once(delay=timedelta(seconds=60)))).job
    # A run whose lease has 30 s left.
    leased = store.submit(JobSpec(task="t", schedule=Once(at=store.now()))).run
    assert leased is not None
    live = store.claim("setup", limit=1, lease=timedelta(seconds=30))
    assert [r.id for r in live] == [leased.id]
    lease_before = store.get_run(leased.id)
    assert store.leader() is None

    delay = 10
    before_child = store.now()
    result = children(
        [{"op": "skewed", "url": store_url, "parent_time": time.time(), "delay": delay}],
        env={
            "LD_PRELOAD": str(lib),
            "FAKETIME": f"+{int(SKEW)}s",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_DONT_RESET": "1",
        },
    )[0]
    after_child = store.now()

    # The child really lived 90 s in the future.
    assert SKEW - 10 < result["local_skew"] < SKEW + 10, result
    # ... and yet could neither claim the waiting run nor rescue the live lease,
    assert result["claimed"] == []
    assert result["rescued"] == []
    assert store.get_run(waiting.id).state is RunState.FAILED
    assert store.get_run(leased.id) == lease_before
    # ... nor trigger the job that is due in 60 s (it may lead: the lease was free),
    assert result["trigger_error"] is None
    assert result["triggered"] == []
    assert store.get_job(job.id).next_run_at == job.next_run_at
    assert store.list_runs(job_id=job.id).items == []
    # ... and its delayed job is due `delay` after the store's now, not its own.
    due = datetime.fromisoformat(result["submitted_next_run_at"])
    assert before_child + timedelta(seconds=delay) <= due
    assert due <= after_child + timedelta(seconds=delay)
