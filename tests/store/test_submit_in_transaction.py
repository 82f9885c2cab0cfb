"""Transactional submit (the outbox pattern): ``submit(..., conn=...)`` writes the job in
the caller's own open transaction on the store's PostgreSQL."""

from __future__ import annotations

import sqlite3
from datetime import UTC, timedelta
from pathlib import Path

import psycopg
import pytest
import sqlalchemy
from sqlalchemy.orm import Session

from tickwork.app import App, Context
from tickwork.errors import ValidationError
from tickwork.job import JobSpec, RunState
from tickwork.schedule import Once
from tickwork.store import Store, open_store
from tickwork.store.base import CHANNEL_RUNS


def now_spec(**fields: object) -> JobSpec:
    return JobSpec(task="outbox", schedule=Once(delay=timedelta(0)), **fields)  # type: ignore[arg-type]


@pytest.fixture
def backend() -> str:
    """The shared ``store`` fixture, on PostgreSQL only: ``conn=`` takes the caller's own
    psycopg connection."""
    return "postgres"


def nothing_written(store: Store) -> bool:
    return not store.list_jobs().items and not store.list_runs().items


def test_a_job_submitted_in_a_committed_transaction_exists_from_the_commit(store: Store) -> None:
    with psycopg.connect(store.url) as conn:
        conn.execute("CREATE TEMP TABLE orders (id int)")
        conn.execute("INSERT INTO orders VALUES (1)")
        submitted = store.submit(now_spec(args={"order": 1}), conn=conn)
        assert submitted.created
        assert submitted.run is not None
        assert nothing_written(store)  # not visible outside the transaction yet
    # psycopg's `with` committed it
    job = store.get_job(submitted.job.id)
    assert job.args == {"order": 1}
    run = store.get_run(submitted.run.id)
    assert run.state is RunState.QUEUED


def test_a_rolled_back_submit_leaves_no_job_and_no_run(store: Store) -> None:
    conn = psycopg.connect(store.url)
    try:
        conn.execute("SELECT 1")  # the caller's transaction is open
        store.submit(now_spec(), conn=conn)
        store.submit_many(
            [now_spec(), now_spec(idempotency_key="k"), now_spec(name="n")], conn=conn
        )
        conn.rollback()
    finally:
        conn.close()
    assert nothing_written(store)


def test_a_submit_before_the_callers_first_statement_is_still_in_its_transaction(
    store: Store,
) -> None:
    # psycopg begins a transaction at the first statement; a submit that is the first must
    # not commit on its own.
    conn = psycopg.connect(store.url)
    try:
        store.submit(now_spec(), conn=conn)
        conn.rollback()
    finally:
        conn.close()
    assert nothing_written(store)


def test_an_autocommit_connection_without_a_transaction_commits_the_submit_at_once(
    store: Store,
) -> None:
    with psycopg.connect(store.url, autocommit=True) as conn:
        submitted = store.submit(now_spec(), conn=conn)
        assert store.get_job(submitted.job.id).id == submitted.job.id


def test_the_wake_up_is_delivered_only_at_the_commit(store: Store) -> None:
    listener = store.listener([CHANNEL_RUNS])
    try:
        conn = psycopg.connect(store.url)
        try:
            store.submit(now_spec(), conn=conn)
            assert listener.wait(0.3) is False  # the run cannot be seen yet
            conn.commit()
        finally:
            conn.close()
        assert listener.wait(5.0) is True
    finally:
        listener.close()


def test_a_refused_submit_leaves_the_callers_transaction_usable(store: Store) -> None:
    store.submit(now_spec(name="taken"))
    with psycopg.connect(store.url) as conn:
        conn.execute("CREATE TEMP TABLE t (id int)")
        with pytest.raises(ValidationError, match="already has a job named 'taken'"):
            store.submit_many([now_spec(), now_spec(name="taken")], conn=conn)
        conn.execute("INSERT INTO t VALUES (1)")  # not aborted: the savepoint took the blow
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)
    assert len(store.list_jobs().items) == 1  # only the one submitted before


def test_the_callers_session_keeps_its_own_time_zone_and_rows(store: Store) -> None:
    with psycopg.connect(store.url) as conn:
        conn.execute("SET TIME ZONE 'Asia/Kathmandu'")
        submitted = store.submit(now_spec(), conn=conn)
        assert submitted.job.created_at.utcoffset() == timedelta(0)
        assert submitted.job.created_at.tzinfo == UTC
        assert conn.execute("SHOW TIME ZONE").fetchone() == ("Asia/Kathmandu",)
        assert isinstance(conn.execute("SELECT 1").fetchone(), tuple)  # its row factory


def sqlalchemy_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def test_a_sqlalchemy_connection_carries_the_submit(store: Store) -> None:
    engine = sqlalchemy.create_engine(sqlalchemy_url(store.url))
    try:
        with engine.connect() as conn:
            store.submit(now_spec(), conn=conn)
            conn.rollback()
        assert nothing_written(store)
        with engine.begin() as conn:
            submitted = store.submit(now_spec(), conn=conn)
        assert store.get_job(submitted.job.id).id == submitted.job.id
    finally:
        engine.dispose()


def test_a_sqlalchemy_session_carries_the_submit(store: Store) -> None:
    engine = sqlalchemy.create_engine(sqlalchemy_url(store.url))
    try:
        with Session(engine) as session:
            store.submit_many([now_spec(), now_spec()], conn=session)
            session.rollback()
        assert nothing_written(store)
        with Session(engine) as session, session.begin():
            done = store.submit_many([now_spec(), now_spec()], conn=session)
        assert [store.get_job(s.job.id).id for s in done] == [s.job.id for s in done]
    finally:
        engine.dispose()


def test_a_conn_that_is_not_a_postgresql_connection_is_refused(
    store: Store, tmp_path: Path
) -> None:
    other = sqlite3.connect(tmp_path / "other.db")
    try:
        for bad in (other, "postgresql://", object()):
            with pytest.raises(ValidationError, match="conn= takes a psycopg 3 connection"):
                store.submit(now_spec(), conn=bad)
    finally:
        other.close()
    assert nothing_written(store)


def test_a_sqlite_store_refuses_conn(tmp_path: Path) -> None:
    path = tmp_path / "tickwork.db"
    store = open_store(f"sqlite:///{path}", migrate=True)
    conn = sqlite3.connect(path)
    try:
        with pytest.raises(ValidationError, match="this store is SQLite"):
            store.submit(now_spec(), conn=conn)
        assert nothing_written(store)
    finally:
        conn.close()
        store.close()


def test_the_apps_bulk_submit_takes_conn_too(store: Store) -> None:
    app = App(store.url)

    @app.task
    def outbox(ctx: Context) -> None:
        pass

    try:
        conn = psycopg.connect(store.url)
        try:
            app.submit_many([{"task": "outbox"}, {"task": "outbox", "delay": "1h"}], conn=conn)
            conn.rollback()
            assert nothing_written(store)
            jobs = app.submit_many([{"task": "outbox"}, {"task": "outbox"}], conn=conn)
            assert nothing_written(store)
            conn.commit()
        finally:
            conn.close()
        assert sorted(j.id for j in store.list_jobs().items) == sorted(j.id for j in jobs)
        assert len(store.list_runs().items) == 2
    finally:
        app.close()
