"""submit_many: many jobs in one transaction, in order, with submit's rules."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tickwork.errors import ValidationError
from tickwork.job import JobSpec, JobState, RunState
from tickwork.schedule import Cron, Interval, Once
from tickwork.store import Store, open_store


def spec(i: int, **kw: object) -> JobSpec:
    return JobSpec(task="noop", schedule=Once(delay=timedelta(0)), args={"i": i}, **kw)  # type: ignore[arg-type]


def test_submit_many_creates_every_job_in_order_with_its_due_run(store: Store) -> None:
    submitted = store.submit_many([spec(i) for i in range(250)])
    assert [s.job.args["i"] for s in submitted] == list(range(250))
    assert all(s.created for s in submitted)
    assert all(s.job.state is JobState.QUEUED for s in submitted)
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


def test_a_taken_name_is_refused_with_the_index_of_its_job(store: Store) -> None:
    store.submit(JobSpec(task="tick", schedule=Cron("@hourly"), name="taken"))
    batch = [spec(0), spec(1), JobSpec(task="tick", schedule=Cron("@daily"), name="taken")]
    with pytest.raises(ValidationError) as caught:
        store.submit_many(batch)
    assert (caught.value.index, caught.value.field) == (2, "name")
    assert "job 2 of the batch" in str(caught.value)
    assert len(store.list_jobs(limit=1000).items) == 1


def test_a_name_twice_in_one_batch_is_refused_at_its_second_job(store: Store) -> None:
    batch = [JobSpec(task="tick", schedule=Cron("@daily"), name="twice"), spec(1)]
    batch.append(JobSpec(task="tick", schedule=Cron("@hourly"), name="twice"))
    with pytest.raises(ValidationError) as caught:
        store.submit_many(batch)
    assert (caught.value.index, caught.value.field) == (2, "name")
    assert store.list_jobs(limit=1000).items == []


def test_keys_match_per_tenant_and_each_result_is_the_job_its_key_names(store: Store) -> None:
    before = store.submit(spec(0, idempotency_key="k", tenant="acme"))
    out = store.submit_many(
        [
            spec(1, idempotency_key="k"),  # another tenant's key: a new job
            spec(2, idempotency_key="k", tenant="acme"),  # matches the earlier submit
            spec(3, idempotency_key="k"),  # matches job 0 of this batch
            spec(4),
        ]
    )
    assert [s.created for s in out] == [True, False, False, True]
    assert out[1].job == before.job
    assert out[2].job == out[0].job
    assert out[2].run is None
    assert out[0].job.tenant == "default"
    assert out[0].job.args == {"i": 1}
    assert len(store.list_runs(limit=1000).items) == 3  # one per job created due now


def test_returned_records_are_the_stored_rows(store: Store, t0: datetime) -> None:
    batch = [
        spec(0, name="named", queue="q", priority=5),
        JobSpec(task="tick", schedule=Once(delay=timedelta(hours=1)), args={"b": [1, "x"]}),
        JobSpec(task="tick", schedule=Cron("*/5 * * * *", "Europe/Berlin")),
    ]
    out = store.submit_many(batch, now=t0)
    for s in out:
        assert s.job == store.get_job(s.job.id)
        if s.run is not None:
            assert s.run == store.get_run(s.run.id)
    assert [s.run is not None for s in out] == [True, False, False]
    assert out[1].job.next_run_at == t0 + timedelta(hours=1)


def test_an_empty_batch_writes_nothing(store: Store) -> None:
    assert store.submit_many([]) == []
    assert store.list_jobs().items == []


def test_a_batch_larger_than_one_statement_keeps_order_keys_and_all_or_none(
    store: Store,
) -> None:
    n = 12_000  # more than PostgreSQL's rows per statement (5,000): three statements
    specs = [spec(i, idempotency_key=f"k{i % 7000}") for i in range(n)]
    out = store.submit_many(specs)
    assert [s.job.args["i"] for s in out[:7000]] == list(range(7000))
    assert [s.created for s in out] == [True] * 7000 + [False] * (n - 7000)
    assert all(out[i].job == out[i - 7000].job for i in range(7000, n))
    store.submit(JobSpec(task="tick", schedule=Cron("@daily"), name="taken"))
    late = JobSpec(task="tick", schedule=Cron("@hourly"), name="taken")
    with pytest.raises(ValidationError) as caught:
        store.submit_many([spec(i) for i in range(n)] + [late])
    assert caught.value.index == n
    assert store.run_stats().by_state.get("queued") == 7000


def test_jobs_that_differ_in_one_column_each_keep_their_own(store: Store, t0: datetime) -> None:
    # Bulk submit sends what jobs share once (PostgreSQL: one template per group); a job
    # differing from the others by one column must be stored with its own value.
    from tickwork.job import MisfirePolicy, OverlapPolicy
    from tickwork.retry import RetryPolicy

    trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    variants: list[dict[str, object]] = [
        {},
        {"tenant": "acme"},
        {"queue": "q"},
        {"priority": -3},
        {"retry": RetryPolicy(max_attempts=7)},
        {"retry": RetryPolicy(backoff_base=2.5, backoff_cap=30)},
        {"timeout": timedelta(seconds=90)},
        {"misfire": MisfirePolicy.SKIP},
        {"misfire_grace": timedelta(minutes=3)},
        {"overlap": OverlapPolicy.FORBID},
        {"trace_context": trace},
        {"name": "one"},
        {"idempotency_key": "key"},
    ]
    batch = [spec(i, **kw) for i, kw in enumerate(variants)]
    batch += [
        JobSpec(task="tick", schedule=Once(delay=timedelta(0))),
        JobSpec(task="noop", schedule=Once(delay=timedelta(minutes=5)), args={"i": 99}),
        JobSpec(task="noop", schedule=Cron("*/5 * * * *"), args={"i": 98}),
        spec(100),  # the first template again, after the others
        # The same first slot and everything else alike: only the schedule differs.
        JobSpec(task="noop", schedule=Once(at=t0 + timedelta(hours=1))),
        JobSpec(task="noop", schedule=Interval(timedelta(hours=1), anchor=t0 + timedelta(hours=1))),
    ]
    out = store.submit_many(batch, now=t0)
    for submitted, sent in zip(out, batch, strict=True):
        stored = store.get_job(submitted.job.id)
        assert submitted.job == stored
        assert (stored.task, stored.args, stored.tenant, stored.queue) == (
            sent.task,
            sent.args,
            sent.tenant,
            sent.queue,
        )
        assert (stored.priority, stored.retry, stored.timeout) == (
            sent.priority,
            sent.retry,
            sent.timeout,
        )
        assert (stored.misfire, stored.misfire_grace, stored.overlap) == (
            sent.misfire,
            sent.misfire_grace,
            sent.overlap,
        )
        assert (stored.name, stored.idempotency_key, stored.trace_context) == (
            sent.name,
            sent.idempotency_key,
            sent.trace_context,
        )
        if submitted.run is not None:
            assert submitted.run == store.get_run(submitted.run.id)
    assert [s.run is not None for s in out] == [True] * 14 + [False, False, True, False, False]
    once, interval = (store.get_job(s.job.id) for s in out[-2:])
    assert once.next_run_at == interval.next_run_at == t0 + timedelta(hours=1)
    assert isinstance(once.schedule, Once)
    assert isinstance(interval.schedule, Interval)
    ids = [s.job.id for s in out]
    assert ids == sorted(ids)  # drawn in the batch's order


def test_a_bulk_submit_leaves_no_transaction_waiting_on_the_client(
    backend: str, store_url: str
) -> None:
    """Every tickwork session lets the server end a transaction idle on its client for 2 s
    (store/postgres/pool.py); a process slowed down (a loaded host, a long garbage
    collection) once lost its bulk submit to it mid-way: a 503 from POST /jobs/batch. The
    batch is prepared before its transaction, and the transaction's statements go to the
    server in one pipeline: the server never waits on the client in between. Shown with a
    session that tolerates 10 ms of idleness in a transaction."""
    if backend == "sqlite":
        pytest.skip("SQLite has no server to end an idle transaction")
    impatient = open_store(store_url + "?options=-c%20idle_in_transaction_session_timeout%3D10")
    try:
        args = {"argv": ["echo", "x" * 1000]}
        batch = [JobSpec(task="shell", args=args, schedule=Once(delay=timedelta(0)))] * 5001
        batch += [spec(i, idempotency_key=f"k{i % 3}") for i in range(6)]
        submitted = impatient.submit_many(batch)
        assert [s.created for s in submitted[-6:]] == [True] * 3 + [False] * 3
        assert [s.job.id for s in submitted[-3:]] == [s.job.id for s in submitted[-6:-3]]
        assert len({s.job.id for s in submitted}) == 5004
        assert impatient.list_runs(limit=1).items[0].state is RunState.QUEUED
    finally:
        impatient.close()
