"""Conformance: every time a store returns is aware UTC, whatever the server's time zone."""

from __future__ import annotations

from datetime import datetime, timedelta
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

from tickwork.job import JobSpec
from tickwork.schedule import Interval
from tickwork.store import open_store


def assert_utc(**values: datetime | None) -> None:
    for name, value in values.items():
        assert value is not None, name
        assert value.tzinfo is not None, f"{name} is naive"
        assert value.utcoffset() == timedelta(0), f"{name} is not UTC: {value!r}"


def test_times_are_utc_even_when_the_server_time_zone_is_not(store_url: str, backend: str) -> None:
    if backend == "postgres":
        # Real servers often run in local time; the store must not hand that through.
        dbname = urlsplit(store_url).path.lstrip("/")
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET timezone TO 'America/New_York'").format(
                    sql.Identifier(dbname)
                )
            )
    store = open_store(store_url)
    try:
        now = store.now()
        assert_utc(now=now)
        job = store.submit(
            JobSpec(task="t", schedule=Interval(timedelta(seconds=60), anchor=now)), now=now
        ).job
        assert_utc(created_at=job.created_at, updated_at=job.updated_at, next=job.next_run_at)
        lease = store.acquire_leadership("n", timedelta(days=1), now=now)
        assert lease is not None
        assert_utc(leader_expires_at=lease.expires_at)
        result = store.trigger(lease.epoch, now=now + timedelta(seconds=61))
        run = result.runs[0]
        assert_utc(next_due_at=result.next_due_at, store_next_due_at=store.next_due_at())
        assert_utc(scheduled_for=run.scheduled_for, run_at=run.run_at, created=run.created_at)
        held = store.claim("w", limit=1, now=now + timedelta(seconds=62))[0]
        assert_utc(started_at=held.started_at, lease_expires_at=held.lease_expires_at)
        done = store.complete(held.id, held.fencing_token, now=now + timedelta(seconds=63))
        assert_utc(finished_at=done.finished_at)
        assert_utc(read_back=store.get_run(held.id).finished_at)
    finally:
        store.close()
