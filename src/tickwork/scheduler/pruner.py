"""Pruner: deletes finished runs past their retention. Leader-only.

What it does, how often
-----------------------
Every ``prune_interval`` (5 min by default), and once as soon as this node starts
leading, it calls ``store.prune(retention)``: runs that finished (succeeded, dead,
cancelled) more than ``retention`` ago (7 days by default) are deleted, with slot-ledger
entries and leadership terms as old (the latest few terms kept), in batches, again at
once while a batch came back full. One ``prune`` line is logged per pass that deleted
anything.

Pruning is idempotent and carries no epoch: a deposed leader that prunes once more
deletes only what any leader would.
"""

from __future__ import annotations

import logging

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.config import Config
from tickwork.errors import StoreError
from tickwork.scheduler.election import Election
from tickwork.scheduler.periodic import LeaderPeriodic
from tickwork.store.base import DEFAULT_PRUNE_BATCH
from tickwork.store.roles import LeaderStore

log = logging.getLogger("tickwork.scheduler")

MAX_BATCHES = 100
"""Full batches pruned back to back before the loop yields to its interval."""


class Pruner(LeaderPeriodic):
    """Prunes finished runs every ``prune_interval``. Leader-only."""

    name = "pruner"

    def __init__(
        self,
        store: LeaderStore,
        config: Config,
        election: Election,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(election, clock)
        self.store = store
        self.config = config

    def period(self) -> float:
        return self.config.prune_interval.total_seconds()

    def act(self) -> int:
        return self.prune()

    def prune(self) -> int:
        """Prune now, batch after batch; return how many runs were deleted."""
        deleted = 0
        try:
            for _ in range(MAX_BATCHES):
                if self.stopping.is_set() or self.election.epoch() is None:
                    break
                count = self.store.prune(
                    self.config.retention, limit=DEFAULT_PRUNE_BATCH, now=self.clock.store_now()
                )
                deleted += count
                if count < DEFAULT_PRUNE_BATCH:
                    break
        except StoreError as exc:
            log.warning("prune failed: %s; retrying at the next interval", exc)
        except Exception:
            log.exception("prune failed; retrying at the next interval")
        if deleted:
            log.info("prune runs=%d retention=%gs", deleted, self.config.retention.total_seconds())
        return deleted
