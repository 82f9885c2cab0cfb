"""PostgresStore: the distributed engine. Many hosts, one PostgreSQL.

Concurrency: claim and rescue select with ``FOR UPDATE SKIP LOCKED``, so concurrent
claimers never wait on each other and never take the same row; trigger locks due job rows
the same way and holds the leader lease row ``FOR SHARE`` for its whole transaction, so a
new leader's acquire waits for an in-flight trigger of the old one to finish and no
trigger of a deposed epoch can commit after the handover. Each run is unique on
(job_id, scheduled_for): a second run for one slot is impossible whatever races.

Clock: ``now()`` of the database (the transaction's start) judges due-ness and leases;
callers never send their own time (``now`` parameters exist for tests).

Connections: a pool of autocommit connections (:mod:`.pool`: what every session is told,
and how a lost connection is found and replaced in bounded time); a single-statement
transition is one round trip; multi-statement ones use an explicit transaction. Statements
are prepared by psycopg after a few executions. Notifications use LISTEN/NOTIFY on a
dedicated connection that re-listens by itself (:mod:`.listener`). Every call reports to
:attr:`PostgresStore.health`, which logs an outage once when it begins and once when it
ends.

High availability: a multi-host URL (``postgresql://h1:5432,h2:5432/db?target_session_attrs
=read-write``) is passed to libpq as it is; after a failover every new connection finds the
new primary, and the old primary's connections are replaced as they fail.

The package holds what PostgreSQL does its own way, a part each, composed in
:mod:`.store`; every other transition is :class:`~tickwork.store.sql.SqlStore`'s, over
:class:`.driver.PgDriver`:

- :mod:`.core`: what the parts stand on (the driver, the hot paths' connections, the
  claim's state between calls);
- :mod:`.schema`: migrations and the schema version;
- :mod:`.submit`: submit, one job or a bulk batch;
- :mod:`.trigger`: the pipelined trigger;
- :mod:`.runs`: claim, complete and heartbeat;
- :mod:`.driver`, :mod:`.pool`, :mod:`.listener`, :mod:`.borrowed`, :mod:`.due`: the
  plumbing (statements, connections, notifications, a caller's transaction, rows built
  without reading them back).
"""

from __future__ import annotations

from tickwork.store.postgres.core import DEFAULT_APPLICATION_NAME
from tickwork.store.postgres.driver import Q
from tickwork.store.postgres.store import PostgresStore

__all__ = ["DEFAULT_APPLICATION_NAME", "PostgresStore", "Q"]
