"""Conformance: the cumulative totals behind ``/metrics`` (``Store.run_totals``): counted
once by the fold, the fail path and the pruner, never lower than before."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from test_run_minutes import MINUTE, SECOND, finish, queued

from tickwork.job import JobSpec
from tickwork.records import (
    DURATION,
    LAG,
    LIMITED_LAG,
    OTHER,
    Completion,
    RunTotals,
    TaskLimits,
)
from tickwork.retry import RetryPolicy
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.store.sql import totals

Children = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def m0(t0: datetime) -> datetime:
    """A whole minute, a little in the past (folds are called with later clocks)."""
    return t0.replace(second=0) - timedelta(hours=1)


def count(found: RunTotals, name: str, queue: str = "default") -> int:
    histogram = found.histograms.get((name, queue))
    return histogram.count if histogram is not None else 0


def grew(before: RunTotals, after: RunTotals) -> bool:
    """Every counter and every bucket of ``before`` is in ``after``, and none is lower."""
    for key, n in before.outcomes.items():
        if after.outcomes.get(key, -1) < n:
            return False
    for pair, histogram in before.histograms.items():
        later = after.histograms.get(pair)
        if later is None or later.total < histogram.total:
            return False
        if any(later.buckets.get(le, -1) < n for le, n in histogram.buckets.items()):
            return False
    return True


def test_a_fold_counts_finished_runs_by_task_queue_and_outcome(store: Store, m0: datetime) -> None:
    finish(store, m0, "succeeded", lag=2 * SECOND, task="mail", queue="q1")
    finish(store, m0 + SECOND, "succeeded", task="mail", queue="q1")
    finish(store, m0 + 2 * SECOND, "dead", task="mail", queue="q2")
    store.cancel_run(queued(store, m0, task="report").id, now=m0 + 3 * SECOND)
    assert store.run_totals().outcomes == {}  # nothing folded yet

    store.fold_minutes(now=m0 + 3 * MINUTE)
    found = store.run_totals()

    assert found.outcomes == {
        ("mail", "q1", "succeeded"): 2,
        ("mail", "q2", "dead"): 1,
        ("report", "default", "cancelled"): 1,
    }
    # Each ran one second; the first started 2 s after its slot, the others 1 s.
    durations = found.histograms[(DURATION, "q1")]
    assert (durations.count, durations.total) == (2, 2.0)
    assert durations.buckets == {1.0: 2}
    lags = found.histograms[(LAG, "q1")]
    assert (lags.count, lags.total, lags.buckets) == (2, 3.0, {1.0: 1, 2.5: 1})
    assert count(found, LAG, "default") == 0  # a cancelled run never started


def test_a_failed_attempt_is_counted_as_it_fails_and_its_run_once_when_it_finishes(
    store: Store, m0: datetime
) -> None:
    run = queued(store, m0, task="charge", retry=RetryPolicy(max_attempts=2))
    [held] = store.claim("w1", limit=1, now=m0 + SECOND)
    store.fail(run.id, held.fencing_token, "boom", retry_after=MINUTE, now=m0 + 3 * SECOND)

    found = store.run_totals()
    assert found.outcomes == {("charge", "default", "failed"): 1}
    assert found.histograms[(DURATION, "default")].total == 2.0  # 1 s to 3 s
    assert found.histograms[(LAG, "default")].total == 1.0  # its first attempt's lag

    [again] = store.claim("w1", limit=1, now=m0 + 2 * MINUTE)
    store.complete(run.id, again.fencing_token, now=m0 + 2 * MINUTE + 5 * SECOND)
    store.fold_minutes(now=m0 + 5 * MINUTE)
    found = store.run_totals()
    assert found.outcomes == {
        ("charge", "default", "failed"): 1,
        ("charge", "default", "succeeded"): 1,
    }
    assert count(found, DURATION) == 2  # both attempts
    assert count(found, LAG) == 1  # the first attempt's, once


def test_runs_of_a_limited_tenant_or_task_count_their_lag_apart(store: Store, m0: datetime) -> None:
    store.set_tenant_limits("acme", max_running=1, now=m0)
    store.register_task_limits({"slow": TaskLimits(max_running=2)}, now=m0)
    finish(store, m0, "succeeded", lag=30 * SECOND, tenant="acme")
    finish(store, m0 + SECOND, "succeeded", lag=20 * SECOND, task="slow")
    finish(store, m0 + 2 * SECOND, "succeeded", lag=SECOND, tenant="globex")

    store.fold_minutes(now=m0 + 3 * MINUTE)
    found = store.run_totals()

    assert found.histograms[(LAG, "default")].total == 1.0
    limited = found.histograms[(LIMITED_LAG, "default")]
    assert (limited.count, limited.total) == (2, 50.0)


def test_a_manual_run_has_no_start_lag(store: Store, m0: datetime) -> None:
    dead = finish(store, m0, "dead")
    store.fold_minutes(now=m0 + 3 * MINUTE)
    store.retry_run(dead.id, now=m0 + 30 * MINUTE)
    [again] = store.claim("w1", limit=1, now=m0 + 30 * MINUTE + SECOND)
    store.complete(again.id, again.fencing_token, now=m0 + 30 * MINUTE + 2 * SECOND)

    store.fold_minutes(now=m0 + 40 * MINUTE)
    found = store.run_totals()

    assert found.outcomes == {
        ("tests.run", "default", "dead"): 1,  # folded before its retry by hand
        ("tests.run", "default", "succeeded"): 1,
    }
    assert count(found, LAG) == 1  # the scheduled first attempt only


def test_totals_never_shrink_across_folds_and_pruning(store: Store, m0: datetime) -> None:
    finish(store, m0, "succeeded")
    store.fold_minutes(now=m0 + 2 * MINUTE)
    first = store.run_totals()

    store.prune(timedelta(0), now=m0 + 3 * MINUTE)  # deletes the folded run
    store.fold_minutes(now=m0 + 26 * 60 * MINUTE)  # and the minutes past a day
    pruned = store.run_totals()

    assert first.outcomes == {("tests.run", "default", "succeeded"): 1}
    assert pruned == first
    finish(store, m0 + 27 * 60 * MINUTE, "dead")
    store.fold_minutes(now=m0 + 27 * 60 * MINUTE + 2 * MINUTE)
    later = store.run_totals()
    assert grew(pruned, later)
    assert later.outcomes[("tests.run", "default", "dead")] == 1


def test_the_pruner_counts_the_runs_no_fold_has_read_once(store: Store, m0: datetime) -> None:
    finish(store, m0, "succeeded")
    finish(store, m0 + SECOND, "dead")

    assert store.prune(timedelta(0), now=m0 + MINUTE) == 2
    after_prune = store.run_totals()
    store.fold_minutes(now=m0 + 3 * MINUTE)

    assert after_prune.outcomes == {
        ("tests.run", "default", "succeeded"): 1,
        ("tests.run", "default", "dead"): 1,
    }
    assert store.run_totals() == after_prune  # the fold did not count them again


def test_pairs_and_queues_past_the_caps_are_counted_as_other(
    store: Store, m0: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(totals, "TOTALS_SERIES", 2)
    monkeypatch.setattr(totals, "HISTOGRAM_QUEUES", 1)
    for i, queue in enumerate(["a", "b", "c", "d"]):
        finish(store, m0 + i * SECOND, "succeeded", queue=queue)
    finish(store, m0 + 5 * SECOND, "succeeded", queue="a")

    store.fold_minutes(now=m0 + 3 * MINUTE)
    found = store.run_totals()

    # The first two pairs by name keep their own series, the rest are summed; the
    # histograms keep one queue of their own.
    assert found.outcomes == {
        ("tests.run", "a", "succeeded"): 2,
        ("tests.run", "b", "succeeded"): 1,
        (OTHER, OTHER, "succeeded"): 2,
    }
    assert {q for (_, q) in found.histograms} == {"a", OTHER}
    assert count(found, DURATION, "a") == 2
    assert count(found, DURATION, OTHER) == 3

    finish(store, m0 + 3 * MINUTE, "dead", queue="a")  # a pair seen before keeps its own
    store.fold_minutes(now=m0 + 6 * MINUTE)
    assert store.run_totals().outcomes[("tests.run", "a", "dead")] == 1


def test_a_lag_past_the_last_bound_is_in_the_infinite_bucket(store: Store, m0: datetime) -> None:
    finish(store, m0, "succeeded", lag=timedelta(minutes=10))
    store.fold_minutes(now=m0 + 15 * MINUTE)
    lags = store.run_totals().histograms[(LAG, "default")]
    assert lags.buckets == {math.inf: 1}
    assert lags.total == 600.0


def test_folds_and_prunes_racing_count_every_run_exactly_once(
    store: Store, store_url: str, m0: datetime, children: Children
) -> None:
    specs = [JobSpec(task="t", schedule=Once(at=m0))] * 300
    store.submit_many(specs, now=m0)
    held = store.claim("w1", limit=300, now=m0 + MINUTE)
    assert len(held) == 300
    done = [Completion(r.id, r.fencing_token, None) for r in held]
    assert store.complete_many(done, now=m0 + MINUTE + SECOND) == []

    at = (m0 + 10 * MINUTE).isoformat()
    results = children(
        [
            {"op": "fold", "url": store_url, "now": at},
            {"op": "prune", "url": store_url, "now": at},
            {"op": "fold", "url": store_url, "now": at},
            {"op": "prune", "url": store_url, "now": at},
        ]
    )

    assert results[1]["deleted"] + results[3]["deleted"] == 300
    store.fold_minutes(now=m0 + 20 * MINUTE)
    found = store.run_totals()
    assert found.outcomes == {("t", "default", "succeeded"): 300}
    assert count(found, DURATION) == 300
    assert count(found, LAG) == 300
