"""Conformance: every attempt of a run is kept in its history, with its worker, start,
end, fencing token, why it ended and its error; written by each transition that ends an
attempt, fenced as it is; bounded; pruned with its run."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from test_runs import LEASE, claim_one, queued
from test_trigger import every, lead

from tickwork.errors import LeaseLost, RunNotFound, ValidationError
from tickwork.faults import CRASH_AFTER_HANDLER, FAIL
from tickwork.job import OverlapPolicy, RunState
from tickwork.records import (
    ATTEMPT_ERROR_LIMIT,
    ATTEMPT_TRACEBACK_LIMIT,
    ATTEMPTS_KEPT,
    AttemptEnd,
    AttemptRecord,
    run_error,
)
from tickwork.retry import RetryPolicy
from tickwork.store import Store, open_store
from tickwork.store.base import FaultMark
from tickwork.store.postgres import schema as postgres_store
from tickwork.store.sql import SqlStore
from tickwork.store.sqlite import schema as sqlite_store

S = timedelta(seconds=1)
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "tasks.py", line 3, in charge\n'
    "ValueError: card declined"
)


def stored_attempts(store: Store) -> int:
    """Rows in the history table (what the hot paths must not write, and prune deletes)."""
    assert isinstance(store, SqlStore)
    with store.driver.read() as tx:
        row = tx.one("SELECT count(*) AS n FROM tickwork_attempts", {})
    assert row is not None
    return int(row["n"])


def test_a_run_that_succeeds_at_once_has_one_attempt_read_from_the_run_itself(
    store: Store, t0: datetime
) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0, "w1")
    running = store.run_attempts(run.id).attempts
    assert running == [AttemptRecord(1, held.fencing_token, "w1", t0, None, None)]
    assert store.complete_many([], now=t0) == []
    store.complete(held.id, held.fencing_token, now=t0 + 2 * S)
    history = store.run_attempts(run.id)
    assert history.attempts == [
        AttemptRecord(1, held.fencing_token, "w1", t0, t0 + 2 * S, AttemptEnd.SUCCEEDED)
    ]
    assert history.dropped == 0
    assert stored_attempts(store) == 0  # claim and complete wrote nothing for it


def test_a_queued_run_has_no_attempt_yet(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    assert store.run_attempts(run.id).attempts == []


def test_a_failed_attempt_keeps_its_error_traceback_worker_token_and_times(
    store: Store, t0: datetime
) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0, "w1")
    failed = store.fail(
        held.id, held.fencing_token, "ValueError: card declined", traceback=TRACE, now=t0 + S
    )
    assert failed.state is RunState.FAILED
    assert failed.error == run_error("ValueError: card declined", TRACE)
    assert failed.error.startswith("ValueError: card declined\n\nTraceback")
    again = claim_one(store, failed.run_at, "w2")
    store.complete(again.id, again.fencing_token, now=failed.run_at + S)
    assert store.run_attempts(run.id).attempts == [
        AttemptRecord(
            1,
            held.fencing_token,
            "w1",
            t0,
            t0 + S,
            AttemptEnd.FAILED,
            "ValueError: card declined",
            TRACE,
        ),
        AttemptRecord(
            2, again.fencing_token, "w2", failed.run_at, failed.run_at + S, AttemptEnd.SUCCEEDED
        ),
    ]


def test_the_last_failed_attempt_is_kept_when_the_run_goes_dead(store: Store, t0: datetime) -> None:
    run = queued(store, t0, retry=RetryPolicy(max_attempts=1))
    held = claim_one(store, t0, "w1")
    dead = store.fail(
        held.id, held.fencing_token, "timed out after 30 s", ended=AttemptEnd.TIMED_OUT, now=t0 + S
    )
    assert dead.state is RunState.DEAD
    [attempt] = store.run_attempts(run.id).attempts
    assert (attempt.attempt, attempt.ended, attempt.error) == (
        1,
        AttemptEnd.TIMED_OUT,
        "timed out after 30 s",
    )
    assert (attempt.ended_at, attempt.traceback) == (t0 + S, None)


def test_fail_refuses_an_end_that_is_not_a_failure_and_changes_nothing(
    store: Store, t0: datetime
) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0)
    for ended in (AttemptEnd.SUCCEEDED, AttemptEnd.LEASE_LOST, "nonsense"):
        with pytest.raises(ValidationError):
            store.fail(held.id, held.fencing_token, "x", ended=ended, now=t0 + S)  # type: ignore[arg-type]
    assert store.get_run(run.id).state is RunState.RUNNING
    assert stored_attempts(store) == 0


def test_a_rescue_records_the_lost_attempt_of_the_worker_that_held_it(
    store: Store, t0: datetime
) -> None:
    run = queued(store, t0)
    first = claim_one(store, t0, "w1")
    rescued_at = t0 + LEASE + S
    assert store.rescue(now=rescued_at).requeued == [run.id]
    second = claim_one(store, rescued_at + S, "w2")
    store.complete(second.id, second.fencing_token, now=rescued_at + 2 * S)
    lost, won = store.run_attempts(run.id).attempts
    assert lost == AttemptRecord(
        1,
        first.fencing_token,
        "w1",
        t0,
        rescued_at,
        AttemptEnd.LEASE_LOST,
        "lease expired: worker w1 stopped heartbeating",
    )
    assert won == AttemptRecord(
        2, second.fencing_token, "w2", rescued_at + S, rescued_at + 2 * S, AttemptEnd.SUCCEEDED
    )


def test_a_rescue_of_the_last_attempt_records_it_and_the_run_is_dead(
    store: Store, t0: datetime
) -> None:
    run = queued(store, t0, retry=RetryPolicy(max_attempts=1))
    held = claim_one(store, t0, "w1")
    assert store.rescue(now=t0 + LEASE + S).dead == [run.id]
    [attempt] = store.run_attempts(run.id).attempts
    assert (attempt.worker, attempt.fencing_token, attempt.ended) == (
        "w1",
        held.fencing_token,
        AttemptEnd.LEASE_LOST,
    )


def test_a_rescue_leaves_a_live_lease_and_its_history_alone(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    claim_one(store, t0)
    assert store.rescue(now=t0 + LEASE - S).requeued == []
    assert [a.ended for a in store.run_attempts(run.id).attempts] == [None]


def test_a_zombies_late_outcome_adds_no_attempt(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    first = claim_one(store, t0, "w1")
    store.rescue(now=t0 + LEASE + S)
    second = claim_one(store, t0 + LEASE + 2 * S, "w2", lease=timedelta(hours=1))
    with pytest.raises(LeaseLost):
        store.fail(first.id, first.fencing_token, "late", now=t0 + LEASE + 3 * S)
    with pytest.raises(LeaseLost):
        store.release(first.id, first.fencing_token, now=t0 + LEASE + 3 * S)
    ended = [(a.worker, a.ended) for a in store.run_attempts(run.id).attempts]
    assert ended == [("w1", AttemptEnd.LEASE_LOST), ("w2", None)]
    assert second.fencing_token > first.fencing_token


def test_a_release_records_the_attempt_and_spends_none(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    first = claim_one(store, t0, "w1")
    store.release(first.id, first.fencing_token, now=t0 + S)
    second = claim_one(store, t0 + 2 * S, "w2")
    released, running = store.run_attempts(run.id).attempts
    assert released == AttemptRecord(1, first.fencing_token, "w1", t0, t0 + S, AttemptEnd.RELEASED)
    assert (running.attempt, running.worker, running.ended) == (1, "w2", None)
    assert running.fencing_token == second.fencing_token


def test_cancelling_a_running_run_records_its_attempt(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0, "w1")
    store.cancel_run(run.id, now=t0 + S)
    assert store.run_attempts(run.id).attempts == [
        AttemptRecord(1, held.fencing_token, "w1", t0, t0 + S, AttemptEnd.CANCELLED, "cancelled")
    ]


def test_cancelling_a_waiting_run_ends_no_attempt(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0, "w1")
    failed = store.fail(held.id, held.fencing_token, "boom", now=t0 + S)
    store.cancel_run(run.id, now=t0 + 2 * S)
    assert [a.ended for a in store.run_attempts(run.id).attempts] == [AttemptEnd.FAILED]
    assert failed.attempt == 2


def test_overlap_replace_records_the_cancelled_running_attempt(store: Store, t0: datetime) -> None:
    job = store.submit(every(60, t0, overlap=OverlapPolicy.REPLACE), now=t0).job
    epoch = lead(store, t0)
    store.trigger(epoch, now=t0 + 60 * S)
    held = store.claim("w1", limit=1, now=t0 + 61 * S)[0]
    result = store.trigger(epoch, now=t0 + 120 * S)
    assert result.cancelled_run_ids == [held.id]
    assert store.run_attempts(held.id).attempts == [
        AttemptRecord(
            1,
            held.fencing_token,
            "w1",
            t0 + 61 * S,
            t0 + 120 * S,
            AttemptEnd.CANCELLED,
            "replaced by a newer slot",
        )
    ]
    newer = [r for r in store.list_runs(job_id=job.id).items if r.id != held.id]
    assert [store.run_attempts(r.id).attempts for r in newer] == [[]]


def test_an_attempt_a_fault_was_injected_into_ends_as_an_injected_fault(
    store: Store, t0: datetime
) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0, "w1")
    store.mark_injected([FaultMark(held.id, held.fencing_token, FAIL)], "w1", now=t0 + S)
    store.fail(held.id, held.fencing_token, "injected fault: fail", now=t0 + S)
    retry_at = store.get_run(run.id).run_at
    again = claim_one(store, retry_at, "w1")
    store.fail(again.id, again.fencing_token, "ValueError: real", now=retry_at + S)
    ended = [a.ended for a in store.run_attempts(run.id).attempts]
    # The mark was the first attempt's: the second failed on its own.
    assert ended == [AttemptEnd.INJECTED_FAULT, AttemptEnd.FAILED]


def test_a_crash_injected_on_purpose_is_named_when_the_run_is_rescued(
    store: Store, t0: datetime
) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0, "w1")
    store.mark_injected(
        [FaultMark(held.id, held.fencing_token, CRASH_AFTER_HANDLER)], "w1", now=t0 + S
    )
    store.rescue(now=t0 + LEASE + S)
    [attempt] = store.run_attempts(run.id).attempts
    assert attempt.ended is AttemptEnd.INJECTED_FAULT
    assert attempt.error == (
        "injected fault: crash-after-handler; lease expired: worker w1 stopped heartbeating"
    )


def test_an_operators_cancel_wins_over_an_injected_fault(store: Store, t0: datetime) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0, "w1")
    store.mark_injected([FaultMark(held.id, held.fencing_token, FAIL)], "w1", now=t0 + S)
    store.cancel_run(run.id, now=t0 + 2 * S)
    assert [a.ended for a in store.run_attempts(run.id).attempts] == [AttemptEnd.CANCELLED]


def test_a_run_keeps_its_last_attempts_and_counts_those_dropped(store: Store, t0: datetime) -> None:
    total = ATTEMPTS_KEPT + 3
    run = queued(store, t0, retry=RetryPolicy(max_attempts=total + 1))
    at = t0
    for i in range(total):
        held = claim_one(store, at, f"w{i}")
        store.fail(held.id, held.fencing_token, f"failure {i}", retry_after=S, now=at)
        at += S
    history = store.run_attempts(run.id)
    assert history.dropped == 3
    assert [a.error for a in history.attempts] == [f"failure {i}" for i in range(3, total)]
    assert [a.attempt for a in history.attempts] == list(range(4, total + 1))
    assert stored_attempts(store) == ATTEMPTS_KEPT


def test_an_attempts_error_and_traceback_are_cut_to_their_limits(
    store: Store, t0: datetime
) -> None:
    run = queued(store, t0)
    held = claim_one(store, t0)
    error = "ValueError: " + "é" * ATTEMPT_ERROR_LIMIT
    trace = "Traceback (most recent call last):\n" + "  frame\n" * ATTEMPT_TRACEBACK_LIMIT
    trace += "ValueError: the end"
    store.fail(held.id, held.fencing_token, error, traceback=trace, now=t0 + S)
    [attempt] = store.run_attempts(run.id).attempts
    assert attempt.error is not None
    assert attempt.traceback is not None
    assert len(attempt.error.encode()) <= ATTEMPT_ERROR_LIMIT
    assert attempt.error.startswith("ValueError: é")
    assert "bytes cut ...]" in attempt.error
    assert len(attempt.traceback.encode()) <= ATTEMPT_TRACEBACK_LIMIT
    assert attempt.traceback.startswith("Traceback (most recent call last):")
    assert attempt.traceback.endswith("ValueError: the end")
    assert "bytes cut ...]" in attempt.traceback


def test_an_operators_retry_keeps_the_history_and_numbers_attempts_afresh(
    store: Store, t0: datetime
) -> None:
    run = queued(store, t0, retry=RetryPolicy(max_attempts=1))
    held = claim_one(store, t0, "w1")
    store.fail(held.id, held.fencing_token, "first life", now=t0 + S)
    store.retry_run(run.id, now=t0 + 2 * S)
    again = claim_one(store, t0 + 3 * S, "w2")
    store.fail(again.id, again.fencing_token, "second life", now=t0 + 4 * S)
    history = store.run_attempts(run.id)
    assert [(a.attempt, a.worker, a.error) for a in history.attempts] == [
        (1, "w1", "first life"),
        (1, "w2", "second life"),
    ]
    assert history.dropped == 0


def test_prune_deletes_a_runs_history_with_it(store: Store, t0: datetime) -> None:
    old = queued(store, t0, retry=RetryPolicy(max_attempts=1))
    kept = queued(store, t0)
    for _ in range(2):
        held = claim_one(store, t0)
        store.fail(held.id, held.fencing_token, "boom", now=t0 + S)
    assert store.get_run(old.id).state is RunState.DEAD
    assert store.get_run(kept.id).state is RunState.FAILED
    assert stored_attempts(store) == 2
    assert store.prune(timedelta(days=1), now=t0 + timedelta(days=2)) == 1
    with pytest.raises(RunNotFound):
        store.run_attempts(old.id)
    assert stored_attempts(store) == 1
    assert [a.error for a in store.run_attempts(kept.id).attempts] == ["boom"]


def test_another_tenants_run_has_no_history_to_read(store: Store, t0: datetime) -> None:
    run = queued(store, t0, tenant="acme")
    assert store.run_attempts(run.id, tenant="acme").run_id == run.id
    with pytest.raises(RunNotFound):
        store.run_attempts(run.id, tenant="globex")
    with pytest.raises(RunNotFound):
        store.run_attempts(run.id + 1000)


DEAD_BEFORE = {
    "sqlite": "UPDATE tickwork_runs SET state = 'dead', worker = 'w1', fencing_token = 3, "
    "started_at = :started, finished_at = :finished, error = :error WHERE id = :id",
    "postgres": "UPDATE tickwork_runs SET state = 'dead', worker = 'w1', fencing_token = 3, "
    "started_at = %(started)s, finished_at = %(finished)s, error = %(error)s "
    "WHERE id = %(id)s",
}


def test_a_dead_run_from_before_the_history_gets_its_last_attempt(
    backend: str, blank_store_url: str, monkeypatch: pytest.MonkeyPatch, t0: datetime
) -> None:
    """The migration that adds the history reads a dead run's last attempt off its row."""
    module = sqlite_store if backend == "sqlite" else postgres_store
    history = next(i for i, (_, path) in enumerate(module.MIGRATIONS) if "attempts" in path.name)
    monkeypatch.setattr(module, "MIGRATIONS", module.MIGRATIONS[:history])  # the schema before
    old = open_store(blank_store_url, migrate=True)
    try:
        run = queued(old, t0)
        assert isinstance(old, SqlStore)
        with old.driver.write() as tx:
            tx.count(
                DEAD_BEFORE[backend],
                {
                    "id": run.id,
                    "started": old.codec.time(t0),
                    "finished": old.codec.time(t0 + S),
                    "error": "ValueError: boom\n\nTraceback (most recent call last):\n  ...",
                },
            )
    finally:
        old.close()
    monkeypatch.undo()
    new = open_store(blank_store_url, migrate=True)
    try:
        assert new.run_attempts(run.id).attempts == [
            AttemptRecord(
                1,
                3,
                "w1",
                t0,
                t0 + S,
                AttemptEnd.FAILED,
                "ValueError: boom",
                "Traceback (most recent call last):\n  ...",
            )
        ]
    finally:
        new.close()


def test_an_error_with_a_nul_or_a_lone_surrogate_is_kept_with_replacement_characters(
    store: Store, t0: datetime
) -> None:
    """PostgreSQL text holds neither; a handler's message may (``str(exc)`` of raw bytes
    decoded with surrogateescape, a C library's buffer)."""
    run = queued(store, t0)
    held = claim_one(store, t0)
    failed = store.fail(
        held.id, held.fencing_token, "OSError: a\x00b\udcff", traceback="tb \x00", now=t0 + S
    )
    assert failed.error == "OSError: a\ufffdb\ufffd\n\ntb \ufffd"
    [attempt] = store.run_attempts(run.id).attempts
    assert (attempt.error, attempt.traceback) == ("OSError: a\ufffdb\ufffd", "tb \ufffd")
