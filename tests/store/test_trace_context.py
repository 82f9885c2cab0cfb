"""Conformance: a job keeps the trace context (W3C traceparent) it was submitted with."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tickwork.errors import ValidationError
from tickwork.job import JobSpec
from tickwork.schedule import Interval, Once
from tickwork.store import Store

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
OTHER = "00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-00"


def spec(**fields: object) -> JobSpec:
    return JobSpec(task="tests.traced", schedule=Once(delay=timedelta(hours=1)), **fields)  # type: ignore[arg-type]


def test_a_submitted_job_keeps_its_trace_context(store: Store) -> None:
    job = store.submit(spec(trace_context=PARENT)).job
    assert job.trace_context == PARENT
    assert store.get_job(job.id).trace_context == PARENT
    assert store.submit(spec()).job.trace_context is None


def test_a_bulk_submit_keeps_each_jobs_trace_context(store: Store) -> None:
    done = store.submit_many([spec(trace_context=PARENT), spec(), spec(trace_context=OTHER)])
    assert [store.get_job(s.job.id).trace_context for s in done] == [PARENT, None, OTHER]


def test_a_schedule_keeps_the_trace_context_it_was_created_with(store: Store) -> None:
    def schedule(seconds: int, trace: str | None) -> JobSpec:
        return JobSpec(
            task="tests.traced",
            name="nightly",
            schedule=Interval(timedelta(seconds=seconds)),
            trace_context=trace,
        )

    created = store.put_schedule(schedule(60, PARENT)).job
    same = store.put_schedule(schedule(60, OTHER))
    changed = store.put_schedule(schedule(90, None)).job
    assert not same.created
    assert same.job.trace_context == PARENT
    assert changed.id == created.id
    assert changed.trace_context == PARENT  # the declaration's, not each re-declaration's


def test_a_malformed_trace_context_is_refused() -> None:
    with pytest.raises(ValidationError, match="W3C traceparent"):
        spec(trace_context="00-xyz")
