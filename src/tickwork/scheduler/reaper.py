"""Reaper: rescues runs whose lease expired. Leader-only.

What it does, how often
-----------------------
Every ``rescue_interval`` (1 s by default), while this node leads, it calls
``store.rescue()``: each ``running`` run whose ``lease_expires_at`` has passed by the
store's clock goes back to ``queued`` with ``attempt + 1`` (or to ``dead`` after its last
attempt), and its holder's fencing token stops being honoured. It calls again at once
while a batch came back full. One ``rescue`` line is logged per rescued run.

Why the leader alone: rescue is safe to run concurrently (the store never rescues a run
twice), but one caller per cluster is enough, and it keeps the database quiet. The call
carries no epoch: a deposed leader that rescues once more does no harm, since a run whose
lease expired is rescued once whoever asks.

With the defaults (run lease 15 s, heartbeat 3 s) a dead worker's run is back in the
queue 15 to 16 s after its last heartbeat.
"""

from __future__ import annotations

import logging
import threading

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.config import Config
from tickwork.errors import StoreError, StoreUnavailable
from tickwork.scheduler.election import Election
from tickwork.service import Service
from tickwork.store.base import DEFAULT_RESCUE_BATCH, Store

log = logging.getLogger("tickwork.scheduler")

MAX_BATCHES = 100
"""Full batches rescued back to back before the loop yields to its interval."""


class Reaper(Service):
    """Rescues expired leases every ``rescue_interval``. Leader-only."""

    name = "reaper"

    def __init__(
        self,
        store: Store,
        config: Config,
        election: Election,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.config = config
        self.election = election
        self._wakeup = threading.Event()
        self.rescued = 0
        """Runs this reaper rescued since it was built (``tickwork_rescues_total`` when the
        API is served in the same process, as in ``tickwork run``)."""

    def wake(self) -> None:
        self._wakeup.set()

    def run(self) -> None:
        self.started.set()
        period = self.config.rescue_interval.total_seconds()
        while not self.stopping.is_set():
            self._wakeup.clear()
            began = self.clock.monotonic()
            if self.election.epoch() is not None:
                self.rescue()
            self.pause(self._wakeup, max(0.0, began + period - self.clock.monotonic()))

    def rescue(self) -> int:
        """Rescue expired leases now, batch after batch; return how many runs moved."""
        moved = 0
        try:
            for _ in range(MAX_BATCHES):
                if self.stopping.is_set() or self.election.epoch() is None:
                    break
                result = self.store.rescue(limit=DEFAULT_RESCUE_BATCH, now=self.clock.store_now())
                for run_id in result.requeued:
                    log.info("rescue run=%d to=queued", run_id)
                for run_id in result.dead:
                    log.info("rescue run=%d to=dead", run_id)
                count = len(result.requeued) + len(result.dead)
                moved += count
                self.rescued += count  # one writer (this loop); readers see an int
                if count < DEFAULT_RESCUE_BATCH:
                    break
        except StoreUnavailable as exc:  # the outage is logged once, by the store's health
            log.debug("rescue failed: %s; retrying at the next interval", exc)
        except StoreError as exc:
            log.warning("rescue failed: %s; retrying at the next interval", exc)
        except Exception:
            log.exception("rescue failed; retrying at the next interval")
        return moved
