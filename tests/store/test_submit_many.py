"""submit_many: many jobs in one transaction, in order, with submit's rules."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tickwork.errors import ValidationError
from tickwork.job import JobSpec, JobState, RunState
from tickwork.schedule import Cron, Once
from tickwork.store import Store


def spec(i: int, **kw: object) -> JobSpec:
    return JobSpec(task="noop", schedule=Once(delay=timedelta(0)), args={"i": i}, **kw)  # type: ignore[arg-type]


def test_submit_many_creates_every_job_in_order_with_its_due_run(store: Store) -> None:
    submitted = store.submit_many([spec(i) for i in range(250)])
    assert [s.job.args["i"] for s in submitted] == list(range(250))
    assert all(s.created for s in submitted)
    assert all(s.job.state is JobState.COMPLETED for s in submitted)
    runs = [s.run for s in submitted]
    assert all(r is not None and r.state is RunState.QUEUED for r in runs)
    assert [r.job_id for r in runs if r] == [s.job.id for s in submitted]
    assert len(store.claim("w", limit=1000)) == 250


def test_submit_many_mixes_plain_keyed_and_recurring_jobs(store: Store, t0: datetime) -> None:
    first = store.submit(spec(0, idempotency_key="k"), now=t0)
    batch = [
        spec(1),
        spec(2, idempotency_key="k"),
        JobSpec(task="tick", schedule=Cron("* * * * *"), name="every-minute"),
        spec(3, idempotency_key="fresh"),
        spec(4, idempotency_key="fresh"),
    ]
    out = store.submit_many(batch, now=t0)
    assert [s.created for s in out] == [True, False, True, True, False]
    assert out[1].job.id == first.job.id
    assert out[4].job.id == out[3].job.id
    assert out[2].job.next_run_at == t0.replace(second=0, microsecond=0) + timedelta(minutes=1)
    assert out[2].run is None


def test_a_refused_spec_writes_nothing_of_the_batch(store: Store) -> None:
    store.submit(JobSpec(task="tick", schedule=Cron("@hourly"), name="taken"))
    before = len(store.list_jobs(limit=1000).items)
    with pytest.raises(ValidationError):
        store.submit_many(
            [spec(1), JobSpec(task="tick", schedule=Cron("@daily"), name="taken"), spec(2)]
        )
    assert len(store.list_jobs(limit=1000).items) == before
    assert store.list_runs(limit=1000).items == []
