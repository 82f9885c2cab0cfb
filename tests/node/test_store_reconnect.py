"""PostgreSQL connections that the server ended (a restart, ``pg_terminate_backend``): the
pool replaces them without an error, and a worker listens again and is back at speed.

Each test kills every session of its own database with ``pg_terminate_backend``, which is
what a restart or a failover does to a client: a FATAL message, then EOF.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import timedelta

import psycopg
import pytest
from worker_support import DEADLINE, FAST, in_state, running

from tickwork.app import App
from tickwork.config import Config
from tickwork.job import JobSpec, RunState
from tickwork.schedule import Once
from tickwork.store import open_store
from tickwork.store.base import CHANNEL_RUNS
from tickwork.tasks import Context
from tickwork.testing import wait_until
from tickwork.worker import Worker

pytestmark = pytest.mark.usefixtures("pg_database")


def terminate_sessions(url: str) -> int:
    """End every other session of ``url``'s database, as a restart would; return how many."""
    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def other_sessions(url: str) -> int:
    """How many other sessions of ``url``'s database the server still has."""
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_pooled_connections_the_server_ended_are_replaced_without_an_error(
    pg_database: str,
) -> None:
    store = open_store(pg_database)
    try:
        # Several idle connections in the pool, as a busy process has.
        with store._pool.connection(), store._pool.connection(), store._pool.connection():  # type: ignore[attr-defined]
            pass
        assert terminate_sessions(pg_database) >= 3
        # The ended sessions' backends exit, closing their sockets: the FATAL message and
        # EOF are on their way to the pooled connections.
        wait_until(lambda: other_sessions(pg_database) == 0, DEADLINE)
        for _ in range(6):  # every pooled connection is dead: each call would take one
            store.now()
        assert store.health.up
        assert store.health.outages == 0
        assert store.health.reconnects >= 3
    finally:
        store.close()


def test_a_listener_listens_again_after_its_session_is_ended(pg_database: str) -> None:
    store = open_store(pg_database)
    listener = store.listener([CHANNEL_RUNS])
    try:
        terminate_sessions(pg_database)
        # The loss is noticed, and said: look for yourself, notifications may be lost.
        assert listener.wait(2.0) is True
        deadline = time.monotonic() + 5
        while not listener.listening:
            assert time.monotonic() < deadline, "the listener did not listen again"
            listener.wait(0.05)
        while listener.wait(0.05):  # the "listening again" wake-up
            pass
        store.submit(JobSpec(task="t", schedule=Once(delay=timedelta(0))))
        assert listener.wait(5.0) is True  # a real notification, heard again
    finally:
        listener.close()
        store.close()


def test_a_worker_is_back_at_speed_after_its_sessions_are_ended(
    pg_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(pg_database)
    # Polling every 5 s: only a notification can start a run within a second.
    config = replace(
        Config(db_url=pg_database, node_id="reconnecting-worker", **FAST),
        poll_interval=timedelta(seconds=5),
    )
    app = App(config=config)
    started: list[float] = []

    @app.task
    def note(ctx: Context) -> None:
        started.append(time.monotonic())

    worker = Worker(app.store, app.registry, config)
    caplog.set_level(logging.INFO, logger="tickwork")
    try:
        with running(worker):
            first = app.submit(note)
            in_state(store, first, RunState.SUCCEEDED)
            caplog.clear()
            terminate_sessions(pg_database)
            wait_until(lambda: any("LISTEN" in r.getMessage() for r in caplog.records), DEADLINE)
            wait_until(lambda: worker.listening, DEADLINE)
            # The claim loop has taken its re-listening wake-up and sleeps again: from here
            # on only a notification wakes it before its idle re-check.
            relistened = worker.passes
            wait_until(lambda: worker.passes > relistened and not worker._wakeup.is_set(), DEADLINE)
            submitted = time.monotonic()
            job = app.submit(note)
            in_state(store, job, RunState.SUCCEEDED)
            assert started[-1] - submitted < 1.0, "the run waited for a poll, not a NOTIFY"
            # Ten heartbeats (every 100 ms) and a claim loop pass: any loop left retrying
            # would have logged meanwhile.
            worker.heartbeat.wait_passes(worker.heartbeat.passes + 10)
            passes = worker.passes
            worker.wake()
            worker.wait_passes(passes + 1)
    finally:
        app.close()
        store.close()
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert noisy == [], [r.getMessage() for r in noisy]
    listen_lines = [r for r in caplog.records if "LISTEN" in r.getMessage()]
    assert len(listen_lines) <= 1, [r.getMessage() for r in listen_lines]
