"""SqliteStore: the embedded default. One file, WAL, many processes on one host.

Concurrency: every write transaction starts with ``BEGIN IMMEDIATE``, which takes the
database's single write lock up front, so two claimers (threads or processes) serialise
instead of both reading the same queued rows: a claim's select-and-update is atomic.
Readers never block (WAL). ``busy_timeout`` makes a writer wait for the lock rather than
fail. ``synchronous=FULL`` makes a commit durable against power loss before it returns.

Clock: the host's clock, read in the calling process (SQLite is one host by construction;
every process on it reads the same clock). Times are stored as integer microseconds.

Notifications: there is no cross-process LISTEN/NOTIFY, so the ``listen_notify``
capability is absent and sleepers poll; within one process (``tickwork run``) a
submit or trigger wakes that process's listeners at once (:mod:`.signals`).

The package holds what SQLite does its own way, a part each, composed in :mod:`.store`;
every other transition is :class:`~tickwork.store.sql.SqlStore`'s, over
:class:`.driver.SqliteDriver`:

- :mod:`.core`: what the parts stand on (the driver, the signals, fair share's cursor);
- :mod:`.schema`: migrations and the schema version;
- :mod:`.submit`: submit, one job or a batch;
- :mod:`.trigger`: trigger;
- :mod:`.runs`: claim, complete and heartbeat;
- :mod:`.driver`, :mod:`.signals`: the plumbing (connections, transactions, the codec,
  in-process notifications).
"""

from __future__ import annotations

from tickwork.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
