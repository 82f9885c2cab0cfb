"""The heartbeat: keeps a worker's leases alive. Every worker runs one; not leader-only.

Every ``run_heartbeat`` (default 3 s, a fifth of the 15 s run lease) it extends all the
leases its worker holds in one ``Store.heartbeat_many`` call, whatever their number: one
statement per beat, not one per run. A run claimed just after a beat waits at most one
interval for its first, far inside its lease.

Each run comes back HELD, CANCELLED or LOST; the worker stops the handler of a CANCELLED
or LOST run and reports nothing for it (its lease was taken over: someone else may already
be running it). A beat that fails (the database is down) is retried soon, after a capped,
jittered backoff (RETRY, at most 0.5 s and never more than an interval), not a whole
interval later, and at once when any other call of this process is answered first (the
store's *comeback*, :mod:`tickwork.store.health`). So when the database answers again
every lease this worker holds is extended within about half a second, in one statement:
the runs still running and the runs whose handlers returned during the outage and whose
outcomes wait to be written alike. That is the one call that keeps them all; it goes
out while the claim loop writes the completions, on another connection.

Whether that is in time depends on who else saw the outage. When the database itself was
away (a restart, a failover: the leader lost it too) the leader rescues nothing until a
while after its own comeback (:mod:`tickwork.scheduler.reaper`), so no run of a live
worker is rescued, however long the outage. When only this worker was cut off, its leases
must be extended before they expire: an outage shorter than the lease less one interval
and one retry (15 - 3 - 0.5 = 11.5 s with the defaults) costs no run. Past that, the runs
are rescued and this worker's late writes are rejected by their fencing tokens.

Each beat also marks the worker's node row seen, with how many runs it holds and its
``info`` (the cluster view: heartbeat interval, store outages and reconnects), whether or
not it holds any.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from tickwork.clock import Clock
from tickwork.errors import StoreUnavailable
from tickwork.service import Backoff, Service
from tickwork.store.base import LeaseStatus
from tickwork.store.roles import WorkerStore

log = logging.getLogger("tickwork.worker")

RETRY = (0.1, 0.5)
"""Seconds: first and longest wait before beating again after a failed beat (jittered)."""


class Heartbeat(Service):
    name = "tickwork-heartbeat"

    def __init__(
        self,
        store: WorkerStore,
        *,
        leases: Callable[[], Sequence[tuple[int, int]]],
        on_status: Callable[[dict[tuple[int, int], LeaseStatus], float], None],
        interval: timedelta,
        lease: timedelta,
        clock: Clock,
        node_id: str | None = None,
        info: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self._leases = leases
        self._on_status = on_status
        self.interval = interval.total_seconds()
        self.lease = lease
        self.node_id = node_id  # also marks the node seen (``tickwork cluster``) each beat
        self._info = info
        self._failed = False
        self._wake = threading.Event()  # a stop, or the store's comeback

    def wake(self) -> None:
        self._wake.set()

    def run(self) -> None:
        self.started.set()
        retry = Backoff(RETRY[0], min(RETRY[1], self.interval))
        next_beat = self.clock.monotonic() + self.interval
        with self.store.health.sets_on_comeback(self._wake):
            while True:
                self.pause(self._wake, max(0.0, next_beat - self.clock.monotonic()))
                # Cleared before the beat: a comeback while it fails is not missed. (A stop
                # sets ``stopping`` before the wake-up, so none is missed either.)
                self._wake.clear()
                if self.stopping.is_set():
                    return
                early = self.clock.monotonic() < next_beat  # woken by a comeback
                self.beat()
                now = self.clock.monotonic()
                if self._failed:
                    next_beat = now + retry.next()
                    continue
                retry.reset()
                # Fixed cadence, not "interval after the last beat ended": a slow beat does
                # not push the next one later. A comeback's beat starts the cadence anew.
                next_beat = now + self.interval if early else max(next_beat + self.interval, now)

    def beat(self) -> dict[tuple[int, int], LeaseStatus]:
        """Extend every lease now; returns what the store said of each (run id, fencing
        token) (empty when it failed). ``on_status`` gets the answers and the monotonic
        time the beat was sent."""
        pairs = list(self._leases())
        answered: dict[tuple[int, int], LeaseStatus] = {}
        self._failed = False
        if pairs:
            sent = self.clock.monotonic()  # a HELD lease holds for its length from here
            try:
                statuses = self.store.heartbeat_many(
                    pairs, lease=self.lease, now=self.clock.store_now()
                )
            except Exception as exc:
                self._failed = True
                # An outage is logged once by the store's health; anything else here.
                level = logging.DEBUG if isinstance(exc, StoreUnavailable) else logging.WARNING
                log.log(level, "heartbeat of %d leases failed (retrying soon): %s", len(pairs), exc)
                return {}
            # A run the store did not answer for is not held: treat it as lost.
            # Keyed by the token too: by the time the answer is read, the worker may hold the
            # same run again under a newer token, which this answer says nothing about.
            answered = {pair: statuses.get(pair[0], LeaseStatus.LOST) for pair in pairs}
            self._on_status(answered, sent)
        if self.node_id is not None:
            try:
                info = self._info() if self._info is not None else None
                self.store.node_heartbeat(
                    self.node_id, running=len(pairs), info=info, now=self.clock.store_now()
                )
            except Exception as exc:
                log.debug("node heartbeat failed: %s", exc)
        return answered
