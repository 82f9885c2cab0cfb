"""Conformance: runs listed, retried and cancelled by the text their error holds (the
dead letter's "error text" filter), compared in lower case."""

from __future__ import annotations

from datetime import datetime, timedelta

from tickwork.job import JobSpec, RunState
from tickwork.retry import RetryPolicy
from tickwork.schedule import Once
from tickwork.store import Store


def dead(store: Store, at: datetime, error: str) -> int:
    """A run failed once with ``error`` and dead (one attempt)."""
    spec = JobSpec(task="tests.run", schedule=Once(at=at), retry=RetryPolicy(max_attempts=1))
    run = store.submit(spec, now=at).run
    assert run is not None
    (held,) = store.claim("w1", limit=1, now=at)
    store.fail(held.id, held.fencing_token, error, now=at + timedelta(seconds=1))
    return held.id


def test_runs_are_listed_by_text_their_error_holds_in_any_case(store: Store, t0: datetime) -> None:
    flaky = dead(store, t0, "RuntimeError: Flaky 15 failed\n\nTraceback ...")
    dead(store, t0, "HTTP 503 from example.com")

    found = store.list_runs(state=RunState.DEAD, error="flaky 15")
    assert [r.id for r in found.items] == [flaky]
    assert len(store.list_runs(state=RunState.DEAD).items) == 2
    assert store.list_runs(error="no such text").items == []


def test_retry_runs_by_error_text_retries_only_the_matching(store: Store, t0: datetime) -> None:
    flaky = dead(store, t0, "RuntimeError: flaky 15 failed")
    other = dead(store, t0, "HTTP 503 from example.com")

    assert store.retry_runs(max_count=10, error="FLAKY", now=t0 + timedelta(minutes=1)) == [flaky]
    assert store.get_run(flaky).state is RunState.QUEUED
    assert store.get_run(other).state is RunState.DEAD
