"""Rollup: folds finished runs into the per-minute rollup (the dashboard's time axis).
Leader-only.

What it does, how often
-----------------------
Every :data:`ROLLUP_INTERVAL` (a minute), and once as soon as this node starts leading, it
calls ``store.fold_minutes()``: runs that finished since the last fold are counted per
minute, tenant and queue (by outcome, with the start lag of scheduled first attempts) and
into the cumulative totals of ``/metrics`` (by task, queue and outcome, with duration and
start lag histograms), each queue's due backlog is sampled, and minutes past a day are
deleted
(:meth:`tickwork.store.base.Store.fold_minutes`). The fold reads finished runs through
their index; claim and complete write nothing for it, so the hot paths pay nothing.

A fold is exactly-once by a mark moved in its own transaction: a deposed leader that folds
once more counts nothing twice. A leader that was down for a while catches up at its next
fold (up to a day back); the queue depth of the minutes it missed was never sampled, and
the charts show it as 0.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.errors import StoreError
from tickwork.scheduler.election import Election
from tickwork.scheduler.periodic import LeaderPeriodic
from tickwork.store.roles import LeaderStore

log = logging.getLogger("tickwork.scheduler")

ROLLUP_INTERVAL = timedelta(minutes=1)
"""How often the leader folds: the rollup's resolution."""


class Rollup(LeaderPeriodic):
    """Folds finished runs into the per-minute rollup every minute. Leader-only."""

    name = "rollup"

    def __init__(self, store: LeaderStore, election: Election, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(election, clock)
        self.store = store

    def period(self) -> float:
        return ROLLUP_INTERVAL.total_seconds()

    def act(self) -> int:
        return self.fold()

    def fold(self) -> int:
        """Fold now; return how many minutes were folded (0 on a store error, logged)."""
        try:
            return self.store.fold_minutes(now=self.clock.store_now())
        except StoreError as exc:
            log.warning("rollup fold failed: %s; retrying at the next interval", exc)
        except Exception:
            log.exception("rollup fold failed; retrying at the next interval")
        return 0
