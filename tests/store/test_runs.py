"""Conformance: claiming runs, leases and fencing, failure and retry, rescue, pruning."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from tickwork.errors import InvalidTransition, LeaseLost, RunNotFound
from tickwork.job import ClaimedRun, JobSpec, MisfirePolicy, Run, RunState
from tickwork.retry import RetryPolicy
from tickwork.schedule import Interval, Once
from tickwork.store import Store
from tickwork.store.base import Completion, LeaseStatus, SlotFate

LEASE = timedelta(seconds=10)


def queued(store: Store, at: datetime, **fields: Any) -> Run:
    """A queued run with ``run_at = at`` (a one-off job due at submit)."""
    fields.setdefault("task", "tests.run")
    run = store.submit(JobSpec(schedule=Once(at=at), **fields), now=at).run
    assert run is not None
    assert run.run_at == at
    return run


def claim_one(store: Store, now: datetime, worker: str = "w1", lease: timedelta = LEASE) -> Run:
    runs = store.claim(worker, limit=1, lease=lease, now=now)
    assert len(runs) == 1, f"expected one claimable run at {now}, got {runs}"
    return runs[0]


def taken_over(store: Store, t0: datetime) -> tuple[Run, Run]:
    """A run claimed by w1 at t0 whose lease expired, was rescued and re-claimed by w2.

    Returns (w1's claim, w2's claim).
    """
    first = claim_one(store, t0, "w1")
    rescued = store.rescue(now=t0 + LEASE + timedelta(seconds=1))
    assert rescued.requeued == [first.id]
    second = claim_one(store, t0 + LEASE + timedelta(seconds=2), "w2", lease=timedelta(hours=1))
    assert second.id == first.id
    assert second.fencing_token != first.fencing_token
    return first, second


# -- claim ---------------------------------------------------------------------------------


def test_claim_takes_a_run_with_a_lease_and_a_new_fencing_token(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    claimed = store.claim("worker-1", limit=10, lease=timedelta(seconds=20), now=t0)
    assert [c.id for c in claimed] == [run.id]
    held = claimed[0]
    assert held.state is RunState.RUNNING
    assert held.worker == "worker-1"
    assert held.started_at == t0
    assert held.lease_expires_at == t0 + timedelta(seconds=20)
    assert held.fencing_token == run.fencing_token + 1
    assert held.attempt == 1
    assert held.lease_expires_at is not None
    assert held.lease_expires_at.utcoffset() == timedelta(0)
    assert store.get_run(run.id) == held


def test_a_claimed_run_is_not_claimed_again(store: Store, t0: datetime) -> None:
    queued(store, t0)
    claim_one(store, t0)
    assert store.claim("w2", limit=10, now=t0 + timedelta(seconds=1)) == []


def test_claim_orders_by_priority_then_run_at(store: Store, t0: datetime) -> None:
    specs = [(0, 30), (5, 10), (5, 20), (-1, 40), (0, 50)]  # (priority, seconds before t0)
    runs = {(p, s): queued(store, t0 - timedelta(seconds=s), priority=p) for p, s in specs}
    order = [claim_one(store, t0).id for _ in specs]
    expected = [(5, 20), (5, 10), (0, 50), (0, 30), (-1, 40)]
    assert order == [runs[key].id for key in expected]


def test_claim_returns_at_most_limit_runs_in_claim_order(store: Store, t0: datetime) -> None:
    runs = [queued(store, t0 - timedelta(seconds=s)) for s in (5, 4, 3, 2, 1)]
    claimed = store.claim("w", limit=3, now=t0)
    assert sorted(c.id for c in claimed) == sorted(r.id for r in runs[:3])
    assert len(store.claim("w", limit=10, now=t0)) == 2


def test_claim_only_from_the_given_queues(store: Store, t0: datetime) -> None:
    a = queued(store, t0, queue="a")
    b = queued(store, t0, queue="b")
    c = queued(store, t0, queue="c")
    assert [r.id for r in store.claim("w", limit=10, queues=["b"], now=t0)] == [b.id]
    got = store.claim("w", limit=10, queues=["c", "a"], now=t0)
    assert sorted(r.id for r in got) == sorted([a.id, c.id])


def test_a_run_due_later_is_not_claimable(store: Store, t0: datetime) -> None:
    run = queued(store, t0 + timedelta(seconds=30))
    assert store.claim("w", limit=10, now=t0 + timedelta(seconds=29)) == []
    assert store.next_claimable_at() == t0 + timedelta(seconds=30)
    assert claim_one(store, t0 + timedelta(seconds=30)).id == run.id
    assert store.next_claimable_at() is None


def test_next_claimable_at_honours_the_queue_filter(store: Store, t0: datetime) -> None:
    queued(store, t0 + timedelta(seconds=5), queue="a")
    queued(store, t0 + timedelta(seconds=9), queue="b")
    assert store.next_claimable_at(queues=["b"]) == t0 + timedelta(seconds=9)
    assert store.next_claimable_at(queues=["a", "b"]) == t0 + timedelta(seconds=5)
    assert store.next_claimable_at(queues=["zzz"]) is None


def test_fencing_token_increases_on_every_claim(store: Store, t0: datetime) -> None:
    queued(store, t0, retry=RetryPolicy(max_attempts=10))
    tokens = []
    held = claim_one(store, t0)
    tokens.append(held.fencing_token)
    store.release(held.id, held.fencing_token, now=t0 + timedelta(seconds=1))
    held = claim_one(store, t0 + timedelta(seconds=2))
    tokens.append(held.fencing_token)
    store.fail(
        held.id, held.fencing_token, "x", retry_after=timedelta(0), now=t0 + timedelta(seconds=3)
    )
    held = claim_one(store, t0 + timedelta(seconds=4))
    tokens.append(held.fencing_token)
    store.rescue(now=t0 + timedelta(seconds=4) + LEASE + timedelta(seconds=1))
    held = claim_one(store, t0 + timedelta(seconds=20))
    tokens.append(held.fencing_token)
    assert tokens == list(range(tokens[0], tokens[0] + 4))


# -- fencing -------------------------------------------------------------------------------


def test_first_holder_is_fenced_out_after_its_run_is_rescued_and_reclaimed(
    store: Store, t0: datetime
) -> None:
    queued(store, t0)
    first, _ = taken_over(store, t0)
    snapshot = store.get_run(first.id)
    late = t0 + timedelta(seconds=30)

    with pytest.raises(LeaseLost):
        store.heartbeat(first.id, first.fencing_token, now=late)
    assert store.get_run(first.id) == snapshot
    with pytest.raises(LeaseLost):
        store.complete(first.id, first.fencing_token, result={"by": "w1"}, now=late)
    assert store.get_run(first.id) == snapshot
    with pytest.raises(LeaseLost):
        store.fail(first.id, first.fencing_token, "late failure", now=late)
    assert store.get_run(first.id) == snapshot
    with pytest.raises(LeaseLost):
        store.fail(first.id, first.fencing_token, "late discard", discard=True, now=late)
    assert store.get_run(first.id) == snapshot
    with pytest.raises(LeaseLost):
        store.release(first.id, first.fencing_token, now=late)
    assert store.get_run(first.id) == snapshot


def test_second_holder_still_completes_after_the_first_is_fenced_out(
    store: Store, t0: datetime
) -> None:
    queued(store, t0)
    first, second = taken_over(store, t0)
    with pytest.raises(LeaseLost):
        store.complete(first.id, first.fencing_token, now=t0 + timedelta(seconds=30))
    done = store.complete(
        second.id, second.fencing_token, result={"by": "w2"}, now=t0 + timedelta(seconds=31)
    )
    assert done.state is RunState.SUCCEEDED
    assert done.result == {"by": "w2"}


def test_rescued_run_rejects_its_old_holder_before_anyone_reclaims_it(
    store: Store, t0: datetime
) -> None:
    queued(store, t0)
    first = claim_one(store, t0)
    store.rescue(now=t0 + LEASE + timedelta(seconds=1))
    snapshot = store.get_run(first.id)
    assert snapshot.state is RunState.QUEUED
    with pytest.raises(LeaseLost):
        store.complete(first.id, first.fencing_token, now=t0 + timedelta(seconds=20))
    with pytest.raises(LeaseLost):
        store.heartbeat(first.id, first.fencing_token, now=t0 + timedelta(seconds=20))
    assert store.get_run(first.id) == snapshot


def test_expired_lease_nobody_took_over_is_still_honoured(store: Store, t0: datetime) -> None:
    queued(store, t0)
    held = claim_one(store, t0)
    late = t0 + LEASE + timedelta(seconds=20)
    beat = store.heartbeat(held.id, held.fencing_token, lease=LEASE, now=late)
    assert beat.status is LeaseStatus.HELD
    assert beat.lease_expires_at == late + LEASE
    done = store.complete(held.id, held.fencing_token, now=late + timedelta(seconds=1))
    assert done.state is RunState.SUCCEEDED


def test_complete_records_result_and_finish_time(store: Store, t0: datetime) -> None:
    queued(store, t0)
    held = claim_one(store, t0)
    done = store.complete(
        held.id, held.fencing_token, result={"rows": 3}, now=t0 + timedelta(seconds=4)
    )
    assert done.state is RunState.SUCCEEDED
    assert done.result == {"rows": 3}
    assert done.finished_at == t0 + timedelta(seconds=4)
    assert store.get_run(held.id) == done


def test_completing_twice_is_rejected(store: Store, t0: datetime) -> None:
    queued(store, t0)
    held = claim_one(store, t0)
    done = store.complete(held.id, held.fencing_token, now=t0 + timedelta(seconds=1))
    with pytest.raises(LeaseLost):
        store.complete(
            held.id, held.fencing_token, result={"again": True}, now=t0 + timedelta(seconds=2)
        )
    assert store.get_run(held.id) == done
    with pytest.raises(LeaseLost):
        store.heartbeat(held.id, held.fencing_token, now=t0 + timedelta(seconds=2))
    beats = store.heartbeat_many([(held.id, held.fencing_token)], now=t0 + timedelta(seconds=2))
    assert beats == {held.id: LeaseStatus.LOST}
    assert store.get_run(held.id) == done


def test_a_wrong_token_is_rejected_even_while_running(store: Store, t0: datetime) -> None:
    queued(store, t0)
    held = claim_one(store, t0)
    snapshot = store.get_run(held.id)
    for token in (held.fencing_token - 1, held.fencing_token + 1):
        with pytest.raises(LeaseLost):
            store.complete(held.id, token, now=t0 + timedelta(seconds=1))
        with pytest.raises(LeaseLost):
            store.heartbeat(held.id, token, now=t0 + timedelta(seconds=1))
    assert store.get_run(held.id) == snapshot


def test_complete_many_applies_the_current_and_returns_the_fenced_out(
    store: Store, t0: datetime
) -> None:
    a = queued(store, t0 - timedelta(seconds=2))
    c = queued(store, t0 - timedelta(seconds=1))
    held_a, held_c = store.claim("w0", limit=2, lease=timedelta(hours=1), now=t0)
    assert (held_a.id, held_c.id) == (a.id, c.id)
    queued(store, t0)
    stale, current = taken_over(store, t0)
    before = store.get_run(current.id)

    rejected = store.complete_many(
        [
            Completion(held_a.id, held_a.fencing_token, {"n": 1}),
            Completion(stale.id, stale.fencing_token, {"n": 2}),
            Completion(held_c.id, held_c.fencing_token),
        ],
        now=t0 + timedelta(seconds=20),
    )

    assert rejected == [stale.id]
    done_a = store.get_run(a.id)
    assert (done_a.state, done_a.result) == (RunState.SUCCEEDED, {"n": 1})
    assert done_a.finished_at == t0 + timedelta(seconds=20)
    assert store.get_run(c.id).state is RunState.SUCCEEDED
    assert store.get_run(current.id) == before


def test_complete_and_claim_completes_then_claims_in_one_call(store: Store, t0: datetime) -> None:
    a = queued(store, t0 - timedelta(seconds=3))
    (held_a,) = store.claim("w0", limit=1, lease=timedelta(hours=1), now=t0)
    assert held_a.id == a.id
    queued(store, t0 - timedelta(seconds=2))  # the run taken_over claims
    stale, current = taken_over(store, t0)
    b = queued(store, t0 - timedelta(seconds=1), queue="b")
    before = store.get_run(current.id)
    later = t0 + timedelta(seconds=30)

    rejected, claimed = store.complete_and_claim(
        [
            Completion(held_a.id, held_a.fencing_token, {"n": 1}),
            Completion(stale.id, stale.fencing_token),
        ],
        "w3",
        limit=5,
        lease=timedelta(seconds=40),
        now=later,
    )

    assert rejected == [stale.id]
    done_a = store.get_run(a.id)
    assert (done_a.state, done_a.result, done_a.finished_at) == (
        RunState.SUCCEEDED,
        {"n": 1},
        later,
    )
    assert store.get_run(current.id) == before  # fenced out: not touched
    assert [r.id for r in claimed] == [b.id]
    (got,) = claimed
    row = store.get_run(b.id)
    assert (row.state, row.worker, row.started_at) == (RunState.RUNNING, "w3", later)
    assert row.lease_expires_at == later + timedelta(seconds=40)
    assert got.fencing_token == row.fencing_token == b.fencing_token + 1
    assert got == ClaimedRun.of(row)  # the lean row says what the stored one says


def test_complete_and_claim_returns_what_a_worker_needs_in_claim_order(
    store: Store, t0: datetime
) -> None:
    plain = queued(store, t0 - timedelta(seconds=3))
    urgent = queued(
        store,
        t0 - timedelta(seconds=1),
        task="t",
        args={"to": "x", "n": [1, 2]},
        priority=5,
        timeout=timedelta(seconds=2.5),
        retry=RetryPolicy(max_attempts=4),
        tenant="acme",
    )

    _, claimed = store.complete_and_claim([], "w", limit=5, now=t0)

    assert [r.id for r in claimed] == [urgent.id, plain.id]  # priority first, then due
    first = claimed[0]
    assert (first.task, first.args, first.tenant) == ("t", {"to": "x", "n": [1, 2]}, "acme")
    assert (first.attempt, first.max_attempts) == (1, 4)
    assert first.timeout == timedelta(seconds=2.5)
    assert first.scheduled_for == t0 - timedelta(seconds=1)
    assert first.job_id == urgent.job_id
    assert (claimed[1].timeout, claimed[1].args) == (None, {})
    assert [ClaimedRun.of(store.get_run(r.id)) for r in claimed] == claimed


def test_complete_and_claim_with_limit_zero_or_no_queue_only_completes(
    store: Store, t0: datetime
) -> None:
    held = [queued(store, t0 - timedelta(seconds=s)) for s in (3, 2)]
    waiting = queued(store, t0 - timedelta(seconds=1))
    one, two = store.claim("w", limit=2, now=t0)
    assert store.complete_and_claim(
        [Completion(one.id, one.fencing_token)], "w", limit=0, now=t0
    ) == ([], [])
    assert store.complete_and_claim(
        [Completion(two.id, two.fencing_token)], "w", limit=5, queues=[], now=t0
    ) == ([], [])
    assert {store.get_run(r.id).state for r in held} == {RunState.SUCCEEDED}
    assert store.get_run(waiting.id).state is RunState.QUEUED
    rejected, claimed = store.complete_and_claim([], "w", limit=5, queues=["nope"], now=t0)
    assert (rejected, claimed) == ([], [])
    assert [r.id for r in store.complete_and_claim([], "w", limit=5, now=t0)[1]] == [waiting.id]


def test_heartbeat_many_reports_held_and_lost(store: Store, t0: datetime) -> None:
    queued(store, t0 - timedelta(seconds=1))
    queued(store, t0)
    held = claim_one(store, t0 - timedelta(seconds=1), lease=timedelta(hours=1))
    stale, current = taken_over(store, t0)
    before = store.get_run(current.id)
    now = t0 + timedelta(seconds=15)

    statuses = store.heartbeat_many(
        [(held.id, held.fencing_token), (stale.id, stale.fencing_token)],
        lease=timedelta(seconds=30),
        now=now,
    )

    assert statuses == {held.id: LeaseStatus.HELD, stale.id: LeaseStatus.LOST}
    assert store.get_run(held.id).lease_expires_at == now + timedelta(seconds=30)
    assert store.get_run(current.id) == before


# -- heartbeat -------------------------------------------------------------------------------


def test_heartbeat_extends_the_lease(store: Store, t0: datetime) -> None:
    queued(store, t0)
    held = claim_one(store, t0)
    beat = store.heartbeat(
        held.id, held.fencing_token, lease=timedelta(seconds=30), now=t0 + timedelta(seconds=5)
    )
    assert beat.status is LeaseStatus.HELD
    assert beat.lease_expires_at == t0 + timedelta(seconds=35)
    assert store.get_run(held.id).lease_expires_at == t0 + timedelta(seconds=35)
    assert store.rescue(now=t0 + timedelta(seconds=20)).requeued == []
    assert store.get_run(held.id).state is RunState.RUNNING


def test_heartbeat_after_cancel_run_reports_cancelled(store: Store, t0: datetime) -> None:
    queued(store, t0)
    held = claim_one(store, t0)
    cancelled = store.cancel_run(held.id, now=t0 + timedelta(seconds=1))
    assert cancelled.state is RunState.CANCELLED

    beat = store.heartbeat(held.id, held.fencing_token, now=t0 + timedelta(seconds=2))
    assert beat.status is LeaseStatus.CANCELLED
    many = store.heartbeat_many([(held.id, held.fencing_token)], now=t0 + timedelta(seconds=2))
    assert many == {held.id: LeaseStatus.CANCELLED}
    with pytest.raises(LeaseLost):
        store.complete(held.id, held.fencing_token, now=t0 + timedelta(seconds=3))
    assert store.get_run(held.id).state is RunState.CANCELLED


# -- fail and retry ---------------------------------------------------------------------------


def test_fail_schedules_retries_within_the_backoff_bound_then_dies(
    store: Store, t0: datetime
) -> None:
    policy = RetryPolicy(max_attempts=3, backoff_base=10.0, backoff_cap=15.0)
    run = queued(store, t0, retry=policy)
    now = t0
    for attempt, bound in ((1, 10.0), (2, 15.0)):
        held = claim_one(store, now)
        assert held.attempt == attempt
        now += timedelta(seconds=1)
        failed = store.fail(held.id, held.fencing_token, f"boom {attempt}", now=now)
        assert failed.state is RunState.FAILED
        assert failed.attempt == attempt + 1
        assert failed.error == f"boom {attempt}"
        assert now <= failed.run_at <= now + timedelta(seconds=bound)
        assert store.get_run(run.id) == failed
        now = failed.run_at
    held = claim_one(store, now)
    assert held.attempt == 3
    dead = store.fail(held.id, held.fencing_token, "boom 3", now=now + timedelta(seconds=1))
    assert dead.state is RunState.DEAD
    assert dead.attempt == 3
    assert dead.error == "boom 3"
    assert dead.finished_at == now + timedelta(seconds=1)
    assert store.claim("w", limit=10, now=now + timedelta(hours=1)) == []


def test_backoff_is_jittered_across_runs(store: Store, t0: datetime) -> None:
    policy = RetryPolicy(max_attempts=2, backoff_base=100.0, backoff_cap=100.0)
    for _ in range(12):
        queued(store, t0, retry=policy)
    held = store.claim("w", limit=12, now=t0)
    fail_at = t0 + timedelta(seconds=1)
    waits = {
        store.fail(run.id, run.fencing_token, "x", now=fail_at).run_at - fail_at for run in held
    }
    assert all(timedelta(0) <= w <= timedelta(seconds=100) for w in waits)
    assert len(waits) > 1, "every retry waited exactly as long: no jitter"


def test_failed_run_waits_for_retry_after_then_is_claimable(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0)
    failed = store.fail(
        held.id,
        held.fencing_token,
        "rate limited",
        retry_after=timedelta(seconds=42),
        now=t0 + timedelta(seconds=1),
    )
    assert failed.run_at == t0 + timedelta(seconds=43)
    assert failed.state is RunState.FAILED
    assert store.next_claimable_at() == t0 + timedelta(seconds=43)
    assert store.claim("w", limit=1, now=t0 + timedelta(seconds=42)) == []
    again = claim_one(store, t0 + timedelta(seconds=43))
    assert (again.id, again.attempt, again.state) == (run.id, 2, RunState.RUNNING)


def test_fail_with_retry_after_on_the_last_attempt_is_dead(store: Store, t0: datetime) -> None:
    queued(store, t0, retry=RetryPolicy(max_attempts=1))
    held = claim_one(store, t0)
    dead = store.fail(
        held.id,
        held.fencing_token,
        "x",
        retry_after=timedelta(seconds=5),
        now=t0 + timedelta(seconds=1),
    )
    assert dead.state is RunState.DEAD
    assert dead.finished_at == t0 + timedelta(seconds=1)


def test_discard_makes_the_run_dead_at_once(store: Store, t0: datetime) -> None:
    queued(store, t0, retry=RetryPolicy(max_attempts=5))
    held = claim_one(store, t0)
    dead = store.fail(
        held.id,
        held.fencing_token,
        "bad input",
        discard=True,
        result={"why": "schema"},
        now=t0 + timedelta(seconds=2),
    )
    assert dead.state is RunState.DEAD
    assert dead.attempt == 1
    assert dead.error == "bad input"
    assert dead.finished_at == t0 + timedelta(seconds=2)
    assert dead.result == {"why": "schema"}
    assert store.get_run(held.id) == dead


# -- rescue ----------------------------------------------------------------------------------


def test_expired_lease_is_rescued_once(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0)
    now = t0 + LEASE + timedelta(seconds=1)
    result = store.rescue(now=now)
    assert result.requeued == [run.id]
    assert result.dead == []
    rescued = store.get_run(run.id)
    assert rescued.state is RunState.QUEUED
    assert rescued.attempt == held.attempt + 1
    assert rescued.run_at == now
    again = store.rescue(now=now + timedelta(seconds=1))
    assert (again.requeued, again.dead) == ([], [])
    assert store.get_run(run.id) == rescued


def test_live_lease_is_not_rescued(store: Store, t0: datetime) -> None:
    queued(store, t0)
    held = claim_one(store, t0)
    for now in (t0 + timedelta(seconds=5), t0 + LEASE):  # before expiry, and at it exactly
        result = store.rescue(now=now)
        assert (result.requeued, result.dead) == ([], [])
    assert store.get_run(held.id) == held


def test_rescue_on_the_last_attempt_makes_the_run_dead(store: Store, t0: datetime) -> None:
    run = queued(store, t0, retry=RetryPolicy(max_attempts=1))
    claim_one(store, t0)
    now = t0 + LEASE + timedelta(seconds=1)
    result = store.rescue(now=now)
    assert (result.requeued, result.dead) == ([], [run.id])
    dead = store.get_run(run.id)
    assert dead.state is RunState.DEAD
    assert dead.finished_at == now


def test_rescue_takes_at_most_limit_runs(store: Store, t0: datetime) -> None:
    for _ in range(3):
        queued(store, t0)
    store.claim("w", limit=3, lease=LEASE, now=t0)
    now = t0 + LEASE + timedelta(seconds=1)
    first = store.rescue(limit=2, now=now)
    second = store.rescue(limit=2, now=now)
    assert (len(first.requeued), len(second.requeued)) == (2, 1)
    assert set(first.requeued).isdisjoint(second.requeued)


# -- release, cancel_run, retry_run -------------------------------------------------------------


def test_release_requeues_without_spending_an_attempt(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0)
    released = store.release(held.id, held.fencing_token, now=t0 + timedelta(seconds=3))
    assert released.state is RunState.QUEUED
    assert released.attempt == held.attempt
    assert released.run_at == t0 + timedelta(seconds=3)
    with pytest.raises(LeaseLost):
        store.heartbeat(held.id, held.fencing_token, now=t0 + timedelta(seconds=3))
    again = claim_one(store, t0 + timedelta(seconds=3))
    assert (again.id, again.attempt) == (run.id, held.attempt)
    assert again.fencing_token == held.fencing_token + 1


def test_cancel_run_of_a_waiting_run(store: Store, t0: datetime) -> None:
    waiting = queued(store, t0)
    cancelled = store.cancel_run(waiting.id, now=t0)
    assert cancelled.state is RunState.CANCELLED
    assert store.claim("w", limit=10, now=t0 + timedelta(minutes=1)) == []

    retried = queued(store, t0)
    held = claim_one(store, t0)
    assert held.id == retried.id
    store.fail(held.id, held.fencing_token, "x", retry_after=timedelta(seconds=1), now=t0)
    assert store.cancel_run(held.id, now=t0).state is RunState.CANCELLED
    assert store.claim("w", limit=10, now=t0 + timedelta(minutes=1)) == []


def test_cancel_run_of_a_finished_run_is_an_invalid_transition(store: Store, t0: datetime) -> None:
    queued(store, t0)
    queued(store, t0 + timedelta(seconds=1), retry=RetryPolicy(max_attempts=1))
    done = claim_one(store, t0)
    store.complete(done.id, done.fencing_token, now=t0)
    dying = claim_one(store, t0 + timedelta(seconds=1))
    store.fail(dying.id, dying.fencing_token, "x", now=t0 + timedelta(seconds=1))
    cancelled = queued(store, t0)
    store.cancel_run(cancelled.id, now=t0)
    for run_id in (done.id, dying.id, cancelled.id):
        before = store.get_run(run_id)
        with pytest.raises(InvalidTransition):
            store.cancel_run(run_id, now=t0 + timedelta(seconds=2))
        assert store.get_run(run_id) == before


def test_cancel_run_and_retry_run_of_unknown_ids_raise_run_not_found(store: Store) -> None:
    with pytest.raises(RunNotFound):
        store.cancel_run(555555)
    with pytest.raises(RunNotFound):
        store.retry_run(555555)


def test_retry_run_requeues_a_dead_run_with_fresh_attempts(store: Store, t0: datetime) -> None:
    run = queued(store, t0, retry=RetryPolicy(max_attempts=2))
    for k in range(2):
        held = claim_one(store, t0 + timedelta(seconds=k))
        store.fail(
            held.id,
            held.fencing_token,
            "x",
            retry_after=timedelta(0),
            now=t0 + timedelta(seconds=k),
        )
    assert store.get_run(run.id).state is RunState.DEAD
    now = t0 + timedelta(minutes=5)
    retried = store.retry_run(run.id, now=now)
    assert retried.state is RunState.QUEUED
    assert retried.attempt == 1
    assert retried.run_at == now
    again = claim_one(store, now)
    assert again.id == run.id
    assert again.max_attempts == 2


def test_retry_run_requeues_a_failed_run_now(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0)
    store.fail(held.id, held.fencing_token, "x", retry_after=timedelta(hours=1), now=t0)
    retried = store.retry_run(run.id, now=t0 + timedelta(seconds=5))
    assert (retried.state, retried.run_at) == (RunState.QUEUED, t0 + timedelta(seconds=5))
    assert claim_one(store, t0 + timedelta(seconds=5)).id == run.id


def test_retry_run_of_a_live_or_finished_run_is_an_invalid_transition(
    store: Store, t0: datetime
) -> None:
    waiting = queued(store, t0 + timedelta(hours=1))
    running = queued(store, t0)
    claim_one(store, t0)
    succeeded = queued(store, t0)
    done = claim_one(store, t0)
    store.complete(done.id, done.fencing_token, now=t0)
    cancelled = queued(store, t0 + timedelta(hours=1))
    store.cancel_run(cancelled.id, now=t0)
    for run in (waiting, running, succeeded, cancelled):
        before = store.get_run(run.id)
        with pytest.raises(InvalidTransition):
            store.retry_run(run.id, now=t0)
        assert store.get_run(run.id) == before


# -- prune ------------------------------------------------------------------------------------


def test_prune_deletes_only_finished_runs_older_than_the_retention(
    store: Store, t0: datetime
) -> None:
    old = t0 - timedelta(hours=3)
    succeeded = queued(store, old)
    dead = queued(store, old)
    cancelled = queued(store, old)
    running = queued(store, old)
    failed = queued(store, old)
    waiting = queued(store, t0 + timedelta(hours=1))
    recent = queued(store, old + timedelta(seconds=1))

    held = store.claim("w", limit=5, lease=timedelta(days=1), now=old)
    by_id = {r.id: r for r in held}
    assert set(by_id) == {succeeded.id, dead.id, cancelled.id, running.id, failed.id}
    store.complete(succeeded.id, by_id[succeeded.id].fencing_token, now=old)
    store.fail(dead.id, by_id[dead.id].fencing_token, "x", discard=True, now=old)
    store.cancel_run(cancelled.id, now=old)
    store.fail(
        failed.id, by_id[failed.id].fencing_token, "x", retry_after=timedelta(days=1), now=old
    )
    late = claim_one(store, t0 - timedelta(minutes=30))
    assert late.id == recent.id
    store.complete(recent.id, late.fencing_token, now=t0 - timedelta(minutes=30))

    deleted = store.prune(timedelta(hours=1), now=t0)

    assert deleted == 3
    for gone in (succeeded, dead, cancelled):
        with pytest.raises(RunNotFound):
            store.get_run(gone.id)
    remaining = {r.id: r.state for r in store.list_runs().items}
    assert remaining == {
        running.id: RunState.RUNNING,
        failed.id: RunState.FAILED,
        waiting.id: RunState.QUEUED,
        recent.id: RunState.SUCCEEDED,
    }
    assert store.prune(timedelta(hours=1), now=t0) == 0


def test_prune_deletes_at_most_limit_runs(store: Store, t0: datetime) -> None:
    runs = [queued(store, t0) for _ in range(3)]
    for run in runs:
        store.cancel_run(run.id, now=t0)
    assert store.prune(timedelta(0), limit=2, now=t0 + timedelta(seconds=1)) == 2
    assert store.prune(timedelta(0), limit=2, now=t0 + timedelta(seconds=1)) == 1
    assert store.list_runs().items == []


def test_prune_deletes_slot_ledger_entries_as_old(store: Store, t0: datetime) -> None:
    anchor = t0 - timedelta(hours=3)
    job = store.submit(
        JobSpec(
            task="t",
            schedule=Interval(timedelta(minutes=1), anchor=anchor),
            misfire=MisfirePolicy.SKIP,
            misfire_grace=timedelta(0),
        ),
        now=anchor,
    ).job
    lease = store.acquire_leadership("n", timedelta(days=1), now=anchor)
    assert lease is not None
    store.trigger(lease.epoch, now=anchor + timedelta(minutes=10, seconds=30))
    assert [s.fate for s in store.slot_skips(job.id)] == [SlotFate.MISFIRE]
    store.prune(timedelta(hours=1), now=t0)
    assert store.slot_skips(job.id) == []


def test_times_keep_their_microseconds(store: Store, t0: datetime) -> None:
    at = t0 - timedelta(microseconds=654321)
    run = queued(store, at)
    assert store.get_run(run.id).run_at == at
    held = claim_one(store, t0, lease=timedelta(seconds=7, microseconds=1))
    assert held.lease_expires_at == t0 + timedelta(seconds=7, microseconds=1)
    failed = store.fail(
        held.id,
        held.fencing_token,
        "x",
        retry_after=timedelta(seconds=2, microseconds=123457),
        now=t0,
    )
    assert failed.run_at == t0 + timedelta(seconds=2, microseconds=123457)
    assert store.claim("w", limit=1, now=failed.run_at - timedelta(microseconds=1)) == []
    assert claim_one(store, failed.run_at).id == run.id
