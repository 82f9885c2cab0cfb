"""Conformance: a handler's writes and its run's completion in one fenced transaction
(``Store.complete_in_transaction``, under ``ctx.transaction()``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from test_runs import LEASE, claim_one, queued, taken_over

from tickwork.errors import LeaseLost
from tickwork.job import Run, RunState
from tickwork.store import Store


class Ledger:
    """A ``ledger`` table in the store's own database, written the way a handler would."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pg = store.url.startswith("postgres")
        self.raw("CREATE TABLE ledger (run_id BIGINT NOT NULL, amount INTEGER NOT NULL)")

    def raw(self, sql: str) -> list[Any]:
        """``sql`` on a connection of its own, committed."""
        if self.pg:
            with psycopg.connect(self.store.url, autocommit=True) as conn:
                cur = conn.execute(sql)
                return cur.fetchall() if cur.description else []
        conn = sqlite3.connect(self.store.url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    def insert(self, conn: Any, run_id: int, amount: int = 1) -> None:
        mark = "%s" if self.pg else "?"
        conn.execute(f"INSERT INTO ledger VALUES ({mark}, {mark})", (run_id, amount))

    def rows(self) -> list[tuple[int, int]]:
        return [tuple(r) for r in self.raw("SELECT run_id, amount FROM ledger ORDER BY run_id")]


def write(
    store: Store, ledger: Ledger, run: Run, during: Callable[[Any], object] | None = None
) -> None:
    """A handler's block: one ledger row for ``run``, then ``during(conn)``."""
    with store.complete_in_transaction(run.id, run.fencing_token) as conn:
        ledger.insert(conn, run.id)
        if during is not None:
            during(conn)


@pytest.fixture
def ledger(store: Store) -> Iterator[Ledger]:
    return Ledger(store)


def test_the_writes_and_the_completion_commit_together(
    store: Store, ledger: Ledger, t0: datetime
) -> None:
    queued(store, t0)
    run = claim_one(store, t0)
    with store.complete_in_transaction(run.id, run.fencing_token, result={"ok": 1}) as conn:
        ledger.insert(conn, run.id, 5)
        assert ledger.rows() == []  # not visible to others before the commit
    assert ledger.rows() == [(run.id, 5)]
    done = store.get_run(run.id)
    assert done.state is RunState.SUCCEEDED
    assert done.result == {"ok": 1}
    assert done.finished_at is not None


def test_a_block_that_raises_writes_nothing_and_leaves_the_run_running(
    store: Store, ledger: Ledger, t0: datetime
) -> None:
    queued(store, t0)
    run = claim_one(store, t0)
    with pytest.raises(ZeroDivisionError):
        write(store, ledger, run, lambda conn: 1 / 0)
    assert ledger.rows() == []
    assert store.get_run(run.id).state is RunState.RUNNING
    # The attempt can still be completed: the lease was never given up.
    with store.complete_in_transaction(run.id, run.fencing_token) as conn:
        ledger.insert(conn, run.id)
    assert ledger.rows() == [(run.id, 1)]


def test_a_zombie_whose_lease_was_taken_over_has_its_whole_transaction_rolled_back(
    store: Store, ledger: Ledger, t0: datetime
) -> None:
    queued(store, t0)
    zombie, holder = taken_over(store, t0)
    with pytest.raises(LeaseLost):
        write(store, ledger, zombie)
    assert ledger.rows() == []
    after = store.get_run(holder.id)
    assert after.state is RunState.RUNNING
    assert after.fencing_token == holder.fencing_token
    with store.complete_in_transaction(holder.id, holder.fencing_token) as conn:
        ledger.insert(conn, holder.id)
    assert ledger.rows() == [(holder.id, 1)]
    assert store.get_run(holder.id).state is RunState.SUCCEEDED


def test_a_lease_taken_over_during_the_block_rolls_it_back(
    store: Store, ledger: Ledger, t0: datetime
) -> None:
    queued(store, t0)
    run = claim_one(store, t0)

    def take_over(conn: Any) -> None:
        if ledger.pg:
            rescued = store.rescue(now=t0 + LEASE + timedelta(seconds=1))
            assert rescued.requeued == [run.id]
        else:  # the block holds SQLite's write lock: nobody else can rescue meanwhile
            conn.execute(
                "UPDATE tickwork_runs SET fencing_token = fencing_token + 1 WHERE id = ?",
                (run.id,),
            )

    with pytest.raises(LeaseLost):
        write(store, ledger, run, take_over)
    assert ledger.rows() == []


def test_a_completed_run_cannot_be_completed_again_in_a_transaction(
    store: Store, ledger: Ledger, t0: datetime
) -> None:
    queued(store, t0)
    run = claim_one(store, t0)
    with store.complete_in_transaction(run.id, run.fencing_token) as conn:
        ledger.insert(conn, run.id)
    with pytest.raises(LeaseLost):
        write(store, ledger, run)
    assert ledger.rows() == [(run.id, 1)]
    with pytest.raises(LeaseLost):
        store.complete(run.id, run.fencing_token)
