"""Conformance: a handler's writes and its run's completion in one fenced transaction
(``Store.complete_in_transaction``, under ``ctx.transaction()``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from test_runs import LEASE, claim_one, queued, taken_over
from tests import ledger

from tickwork.errors import LeaseLost
from tickwork.job import Run, RunState
from tickwork.store import Store


class Ledger(ledger.Ledger):
    def __init__(self, store: Store) -> None:
        super().__init__(store.url)
        self.pg = store.url.startswith("postgres")

    def insert(self, conn: Any, run_id: int, amount: int = 1) -> None:
        ledger.insert(conn, run_id, amount)


def write(
    store: Store, table: Ledger, run: Run, during: Callable[[Any], object] | None = None
) -> None:
    """A handler's block: one ledger row for ``run``, then ``during(conn)``."""
    with store.complete_in_transaction(run.id, run.fencing_token) as conn:
        table.insert(conn, run.id)
        if during is not None:
            during(conn)


@pytest.fixture
def table(store: Store) -> Ledger:
    return Ledger(store)


def test_the_writes_and_the_completion_commit_together(
    store: Store, table: Ledger, t0: datetime
) -> None:
    queued(store, t0)
    run = claim_one(store, t0)
    with store.complete_in_transaction(run.id, run.fencing_token, result={"ok": 1}) as conn:
        table.insert(conn, run.id, 5)
        assert table.rows() == []  # not visible to others before the commit
    assert table.rows() == [(run.id, 5)]
    done = store.get_run(run.id)
    assert done.state is RunState.SUCCEEDED
    assert done.result == {"ok": 1}
    assert done.finished_at is not None


def test_a_block_that_raises_writes_nothing_and_leaves_the_run_running(
    store: Store, table: Ledger, t0: datetime
) -> None:
    queued(store, t0)
    run = claim_one(store, t0)
    with pytest.raises(ZeroDivisionError):
        write(store, table, run, lambda conn: 1 / 0)
    assert table.rows() == []
    assert store.get_run(run.id).state is RunState.RUNNING
    # The attempt can still be completed: the lease was never given up.
    with store.complete_in_transaction(run.id, run.fencing_token) as conn:
        table.insert(conn, run.id)
    assert table.rows() == [(run.id, 1)]


def test_a_zombie_whose_lease_was_taken_over_has_its_whole_transaction_rolled_back(
    store: Store, table: Ledger, t0: datetime
) -> None:
    queued(store, t0)
    zombie, holder = taken_over(store, t0)
    with pytest.raises(LeaseLost):
        write(store, table, zombie)
    assert table.rows() == []
    after = store.get_run(holder.id)
    assert after.state is RunState.RUNNING
    assert after.fencing_token == holder.fencing_token
    with store.complete_in_transaction(holder.id, holder.fencing_token) as conn:
        table.insert(conn, holder.id)
    assert table.rows() == [(holder.id, 1)]
    assert store.get_run(holder.id).state is RunState.SUCCEEDED


def test_a_lease_taken_over_during_the_block_rolls_it_back(
    store: Store, table: Ledger, t0: datetime
) -> None:
    queued(store, t0)
    run = claim_one(store, t0)

    def take_over(conn: Any) -> None:
        if table.pg:
            rescued = store.rescue(now=t0 + LEASE + timedelta(seconds=1))
            assert rescued.requeued == [run.id]
        else:  # the block holds SQLite's write lock: nobody else can rescue meanwhile
            conn.execute(
                "UPDATE tickwork_runs SET fencing_token = fencing_token + 1 WHERE id = ?",
                (run.id,),
            )

    with pytest.raises(LeaseLost):
        write(store, table, run, take_over)
    assert table.rows() == []


def test_a_completed_run_cannot_be_completed_again_in_a_transaction(
    store: Store, table: Ledger, t0: datetime
) -> None:
    queued(store, t0)
    run = claim_one(store, t0)
    with store.complete_in_transaction(run.id, run.fencing_token) as conn:
        table.insert(conn, run.id)
    with pytest.raises(LeaseLost):
        write(store, table, run)
    assert table.rows() == [(run.id, 1)]
    with pytest.raises(LeaseLost):
        store.complete(run.id, run.fencing_token)


def test_the_completion_is_stamped_with_the_time_given(
    store: Store, table: Ledger, t0: datetime
) -> None:
    queued(store, t0)
    run = claim_one(store, t0)
    later = t0 + timedelta(minutes=3)
    with store.complete_in_transaction(run.id, run.fencing_token, now=later) as conn:
        table.insert(conn, run.id)
    assert store.get_run(run.id).finished_at == later


def test_a_plain_transaction_commits_the_callers_writes_or_rolls_them_back(
    store: Store, table: Ledger
) -> None:
    with store.transaction() as conn:
        table.insert(conn, 1)
        assert table.rows() == []  # not visible to others before the commit

    def fails() -> None:
        with store.transaction() as conn:
            table.insert(conn, 2)
            raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        fails()
    assert table.rows() == [(1, 1)]
