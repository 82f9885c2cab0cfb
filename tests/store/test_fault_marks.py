"""Conformance: fault injection's opt-in, the marks of injected faults on runs, and the
listing of runs that executed again because of them."""

from __future__ import annotations

from datetime import datetime, timedelta

from test_runs import LEASE, claim_one, queued

from tickwork.faults import CRASH_AFTER_HANDLER, FAIL, STALL_PAST_LEASE
from tickwork.store import Store
from tickwork.store.base import FaultMark


def test_a_database_opts_in_to_fault_injection_and_out_again(store: Store, t0: datetime) -> None:
    assert store.fault_injection_allowed() is False
    store.set_fault_injection(True, now=t0)
    store.set_fault_injection(True, now=t0)  # idempotent
    assert store.fault_injection_allowed() is True
    store.set_fault_injection(False)
    assert store.fault_injection_allowed() is False


def test_a_mark_lands_only_on_a_run_its_attempt_still_holds(store: Store, t0: datetime) -> None:
    queued(store, t0)
    queued(store, t0)
    a = claim_one(store, t0)
    b = claim_one(store, t0)
    marked = store.mark_injected(
        [
            FaultMark(a.id, a.fencing_token, STALL_PAST_LEASE),
            FaultMark(b.id, b.fencing_token + 1, FAIL),  # a stale token: not marked
        ],
        "w1",
        now=t0,
    )
    assert marked == [a.id]
    assert store.mark_injected([], "w1") == []


def test_only_runs_that_executed_again_after_a_fault_are_listed(store: Store, t0: datetime) -> None:
    runs = [queued(store, t0) for _ in range(4)]
    held = {r.id: claim_one(store, t0) for r in runs}
    again, waiting, succeeded_once, unmarked = (held[r.id] for r in runs)
    t1 = t0 + timedelta(seconds=1)
    store.mark_injected(
        [
            FaultMark(again.id, again.fencing_token, CRASH_AFTER_HANDLER),
            FaultMark(waiting.id, waiting.fencing_token, FAIL),
            FaultMark(succeeded_once.id, succeeded_once.fencing_token, CRASH_AFTER_HANDLER, 7),
        ],
        "w1",
        now=t1,
    )
    # `again` crashed: rescued, then claimed and run again.
    t2 = t0 + LEASE + timedelta(seconds=2)
    store.fail(
        waiting.id, waiting.fencing_token, "injected", retry_after=timedelta(hours=1), now=t1
    )
    store.complete(succeeded_once.id, succeeded_once.fencing_token, now=t1)
    store.complete(unmarked.id, unmarked.fencing_token, now=t1)
    assert store.rescue(now=t2).requeued == [again.id]
    assert store.injected_runs().items == []  # not executed again yet
    second = claim_one(store, t2 + timedelta(seconds=1), "w2")
    assert second.id == again.id

    page = store.injected_runs()
    assert [i.run.id for i in page.items] == [again.id]
    (listed,) = page.items
    assert listed.run.attempt == 2
    (mark,) = listed.faults
    assert (mark.attempt, mark.fault, mark.worker, mark.by_run) == (
        1,
        CRASH_AFTER_HANDLER,
        "w1",
        None,
    )
    assert mark.at == t1
    assert store.injected_runs(tenant="other").items == []
