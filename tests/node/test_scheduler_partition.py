"""A leader cut off from PostgreSQL in the middle of a trigger transaction.

What the partition leaves on the server is a session *idle in transaction* that holds the
leader lease row ``FOR SHARE``: a standby's acquire waits behind it. Nothing on the client
can end it (its packets are dropped), so the server must: tickwork's sessions carry
``idle_in_transaction_session_timeout``, and failover stays within lease + renew + 2 s.

The vanished leader is played by a connection with tickwork's own session settings that
opens the trigger's fence and then never says another word, exactly what the server sees
of a black-holed client. The second test stops the client half-way through a pipelined
batch, before its Sync: the server then waits for the rest of the batch (not idle in
transaction, so that timeout never fires) for as long as the TCP connection lives, which
behind a stopped process or a proxy that keeps the socket open is for ever. A standby whose
acquire is held past the lease's expiry ends such a session itself.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tickwork.config import Config
from tickwork.scheduler import Scheduler
from tickwork.store import open_store
from tickwork.store.postgres import PostgresStore
from tickwork.store.postgres.driver import Q
from tickwork.store.roles import LeaderStore
from tickwork.testing import wait_until

LEASE = timedelta(seconds=3)
RENEW = timedelta(milliseconds=600)
FAILOVER_BOUND = LEASE + RENEW + timedelta(seconds=2)
"""The promise: failover after any leader fault, a mid-transaction partition included."""


def standby_scheduler(store: LeaderStore, url: str) -> Scheduler:
    config = Config(
        db_url=url,
        node_id="standby",
        leader_lease=LEASE,
        leader_renew=RENEW,
        leader_safety_margin=timedelta(milliseconds=300),
    )
    return Scheduler(store, config)


def fails_over_in_bound(standby: Scheduler, acquired: float, holder: str) -> None:
    """``standby`` leads within FAILOVER_BOUND of the old lease's start (monotonic
    ``acquired``), and not before that lease could lapse."""
    wait_until(
        lambda: standby.leading,
        max(0.0, acquired + FAILOVER_BOUND.total_seconds() - time.monotonic()),
        0.02,
        what=f"a failover while {holder} holds the lease row",
    )
    took = time.monotonic() - acquired
    assert took >= LEASE.total_seconds() - 0.1


def test_a_standby_leads_within_lease_plus_renew_plus_2s_of_a_partition_mid_trigger(
    pg_database: str,
) -> None:
    leader_store = open_store(pg_database)
    standby_store = open_store(pg_database)
    assert isinstance(leader_store, PostgresStore)
    standby: Scheduler | None = None
    try:
        lease = leader_store.acquire_leadership("partitioned-leader", LEASE)
        assert lease is not None
        acquired = time.monotonic()
        # The leader's trigger opens its fence and the link goes dark: on the server the
        # session sits idle in transaction, holding the lease row.
        vanished = leader_store._pool.connect()
        vanished.execute("BEGIN")
        vanished.execute(Q["trigger_head"], {"epoch": lease.epoch, "now": None})

        standby = standby_scheduler(standby_store, pg_database)
        standby.start()
        fails_over_in_bound(standby, acquired, "the stuck transaction")

        # The server ended the stuck session; its client learns it at its next word.
        with pytest.raises(psycopg.Error):
            vanished.execute("SELECT 1")
        vanished.close()
    finally:
        if standby is not None:
            standby.stop()
        leader_store.close()
        standby_store.close()


HELD_FOR_SHARE = """
    SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
    WHERE c.relname = 'tickwork_leases' AND l.mode = 'RowShareLock' AND l.granted
"""


def test_a_standby_leads_within_the_bound_when_the_leader_stops_before_its_batch_sync(
    pg_database: str,
) -> None:
    leader_store = open_store(pg_database)
    standby_store = open_store(pg_database)
    assert isinstance(leader_store, PostgresStore)
    assert isinstance(standby_store, PostgresStore)
    standby: Scheduler | None = None
    stopped = leader_store._pool.connect()
    try:
        lease = leader_store.acquire_leadership("stopped-leader", LEASE)
        assert lease is not None
        acquired = time.monotonic()
        # The first batch of a pipelined trigger reaches the server, its Sync never does.
        pgconn = stopped.pgconn
        pgconn.enter_pipeline_mode()
        pgconn.send_query_params(b"BEGIN", None)
        pgconn.send_query_params(
            b"SELECT epoch FROM tickwork_leases WHERE name = 'scheduler' FOR SHARE", None
        )
        while pgconn.flush():
            pass
        with psycopg.connect(pg_database, autocommit=True) as admin:
            wait_until(lambda: admin.execute(HELD_FOR_SHARE).fetchone(), 10, 0.01)

        standby = standby_scheduler(standby_store, pg_database)
        standby.start()
        fails_over_in_bound(standby, acquired, "the stopped client's batch")
        with psycopg.connect(pg_database, autocommit=True) as admin:
            assert admin.execute(HELD_FOR_SHARE).fetchone() is None  # its session is gone
    finally:
        stopped.close()
        if standby is not None:
            standby.stop()
        leader_store.close()
        standby_store.close()


def as_role(url: str, role: str) -> str:
    """``url`` with ``role`` as its user."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


def test_a_standby_that_may_not_end_the_stuck_session_says_so_once_per_incident(
    pg_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The standby's role sees other sessions (pg_read_all_stats) but may not end a
    # superuser's: each beat's acquire finds the row held and fails to end the holder. An
    # incident lasts as long as the stuck session (for ever behind a stopped client), so
    # one warning says it, not one per beat.
    role = f"tw_standby_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_database, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN IN ROLE pg_read_all_stats')
        admin.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{role}"')
        admin.execute(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    leader_store = open_store(pg_database)
    standby_store = open_store(as_role(pg_database, role))
    short = timedelta(milliseconds=200)
    try:
        assert leader_store.acquire_leadership("stuck-leader", short) is not None
        warned: list[int] = []
        for _incident in range(2):
            with psycopg.connect(pg_database) as stuck:  # a superuser's session
                stuck.execute("SELECT 1 FROM tickwork_leases WHERE name = 'scheduler' FOR SHARE")
                time.sleep(1.3)  # the lease has expired; the holder waits on its client
                caplog.clear()
                with caplog.at_level(logging.DEBUG, logger="tickwork"):
                    for _ in range(3):
                        assert standby_store.acquire_leadership("standby", short) is None
                warned.append(
                    sum(
                        "cannot end the stuck leader's session" in r.getMessage()
                        for r in caplog.records
                        if r.levelno == logging.WARNING
                    )
                )
                stuck.rollback()
            # The holder gone, the standby leads: the incident is over.
            assert standby_store.acquire_leadership("standby", short) is not None
            time.sleep(short.total_seconds())
        assert warned == [1, 1]
    finally:
        leader_store.close()
        standby_store.close()
        with psycopg.connect(pg_database, autocommit=True) as admin:
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')
