"""Conformance: exclusive claim by several OS processes at once."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tickwork.job import JobSpec, MisfirePolicy, RunState
from tickwork.records import AttemptEnd
from tickwork.schedule import Interval
from tickwork.store import Store, open_store

Children = Callable[..., list[dict[str, Any]]]

RUNS = 2000
JOBS = 20  # each contributes RUNS // JOBS slots


def enqueue(store: Store) -> set[int]:
    """RUNS queued runs, all claimable now by the store's clock.

    Built by triggering per-second jobs that missed RUNS // JOBS slots each (misfire 'all',
    a grace wider than the outage), which is far faster than 2,000 submits.
    """
    slots = RUNS // JOBS
    now = store.now()
    anchor = now - timedelta(seconds=slots, milliseconds=500)
    for i in range(JOBS):
        store.submit(
            JobSpec(
                task=f"bulk{i}",
                schedule=Interval(timedelta(seconds=1), anchor=anchor),
                misfire=MisfirePolicy.ALL,
                misfire_grace=timedelta(hours=1),
                priority=i % 3,
            ),
            now=anchor,
        )
    lease = store.acquire_leadership("bulk-leader", timedelta(minutes=10), now=now)
    assert lease is not None
    ids: set[int] = set()
    while True:
        result = store.trigger(lease.epoch, now=now)
        ids.update(run.id for run in result.runs)
        if not result.batch_full:
            break
    assert len(ids) == RUNS
    return ids


def all_runs(store: Store) -> list[Any]:
    runs: list[Any] = []
    cursor = None
    while True:
        page = store.list_runs(after=cursor, limit=1000)
        runs.extend(page.items)
        if page.next_cursor is None:
            return runs
        cursor = page.next_cursor


def test_four_processes_claim_every_run_exactly_once(
    store: Store, store_url: str, children: Children
) -> None:
    expected = enqueue(store)
    results = children(
        [
            {
                "op": "claim_all",
                "url": store_url,
                "worker": f"w{i}",
                "limit": 50,
                "lease": 600,
                "pause": 0.002,  # a worker does something with a batch before the next
            }
            for i in range(4)
        ]
    )
    claimed = Counter(run_id for r in results for run_id in r["ids"])
    twice = {run_id: n for run_id, n in claimed.items() if n > 1}
    assert twice == {}, f"{len(twice)} runs were claimed more than once"
    assert set(claimed) == expected
    # Every claim was recorded, for the process that received it.
    runs = all_runs(store)
    assert all(run.state is RunState.RUNNING for run in runs)
    owner = {run_id: f"w{i}" for i, r in enumerate(results) for run_id in r["ids"]}
    assert all(run.worker == owner[run.id] for run in runs)


def test_threads_sharing_one_store_claim_every_run_exactly_once(
    store: Store, store_url: str
) -> None:
    expected = enqueue(store)
    shared = open_store(store_url)
    claimed: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def claim(worker: str) -> None:
        try:
            barrier.wait()
            while True:
                runs = shared.claim(worker, limit=50, lease=timedelta(minutes=10))
                if not runs:
                    return
                claimed.extend(run.id for run in runs)
        except BaseException as exc:
            errors.append(exc)

    try:
        workers = [threading.Thread(target=claim, args=(f"t{i}",)) for i in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        shared.close()
    assert errors == []
    counts = Counter(claimed)
    assert {run_id: n for run_id, n in counts.items() if n > 1} == {}
    assert set(counts) == expected


def test_concurrent_rescuers_never_rescue_a_run_twice(
    store: Store, store_url: str, children: Children
) -> None:
    expected = enqueue(store)
    now = store.now()
    lease = timedelta(seconds=10)
    held = []
    while batch := store.claim("doomed", limit=500, lease=lease, now=now):
        held.extend(batch)
    assert {run.id for run in held} == expected
    later = now + lease + timedelta(seconds=1)
    results = children(
        [
            {"op": "rescue_all", "url": store_url, "limit": 50, "now": later.isoformat()}
            for _ in range(3)
        ]
    )
    rescued = Counter(run_id for r in results for run_id in r["requeued"] + r["dead"])
    assert {run_id: n for run_id, n in rescued.items() if n > 1} == {}
    assert set(rescued) == expected
    runs = all_runs(store)
    assert {(run.state, run.attempt) for run in runs} == {(RunState.QUEUED, 2)}
    # Each run's history has its one lost attempt, by the worker that held it.
    ended = Counter(
        (a.worker, a.ended) for run in runs for a in store.run_attempts(run.id).attempts
    )
    assert ended == {("doomed", AttemptEnd.LEASE_LOST): len(expected)}
