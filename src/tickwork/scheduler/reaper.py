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

After an outage: workers first
------------------------------
When this node's store answers again after calls failed (its *comeback*,
:mod:`tickwork.store.health`), the reaper rescues nothing for RESCUE_HOLD (2 s), and for as
long as calls keep failing. An outage of the database stops every heartbeat at once, so
leases expire during it that no worker let go of: a worker that lived through it extends
all of them (and writes the completions it holds) within about half a second of the
database answering, since each of its loops retries at most 0.5 s apart and all of them
go at the first answer. The hold gives it four times that before any expired lease counts
as abandoned. So an outage of the database costs no run of a worker that lived through it,
whatever its length; a run whose worker died is rescued RESCUE_HOLD (plus at most one
``rescue_interval``) later than it would have been.

Why a hold cannot cost a double execution: a rescue is what lets a second worker claim
the run while its first may still execute it (the first's writes are refused by its stale
token, its side effects are not). Holding it back only leaves the run with the worker
that has it; nothing about fencing changes, and at worst a dead worker's run waits a
little longer. The hold is measured on this node's clock from the pass that saw the
comeback, which is no earlier than the comeback itself.

It does not help a worker cut off alone (its link, not the database): the leader saw no
outage, and that worker's runs are rescued when their leases expire, as they must be if
it is dead (docs/reliability.md states both bounds).
"""

from __future__ import annotations

import logging
import threading

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.config import Config
from tickwork.errors import StoreError, StoreUnavailable
from tickwork.scheduler.election import Election
from tickwork.service import Service
from tickwork.store.base import DEFAULT_RESCUE_BATCH
from tickwork.store.roles import LeaderStore

log = logging.getLogger("tickwork.scheduler")

MAX_BATCHES = 100
"""Full batches rescued back to back before the loop yields to its interval."""
RESCUE_HOLD = 2.0
"""Seconds the reaper rescues nothing after the store's comeback: four times the longest
wait (0.5 s) before a worker's heartbeat tries again, so that workers that lived through an
outage of the database extend their leases first (see the module docstring)."""


class Reaper(Service):
    """Rescues expired leases every ``rescue_interval``. Leader-only."""

    name = "reaper"

    def __init__(
        self,
        store: LeaderStore,
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
        self._comebacks = store.health.comebacks
        self._hold_until = float("-inf")  # monotonic: no rescue before (RESCUE_HOLD)

    def wake(self) -> None:
        self._wakeup.set()

    def run(self) -> None:
        self.started.set()
        period = self.config.rescue_interval.total_seconds()
        while not self.stopping.is_set():
            self._wakeup.clear()
            began = self.clock.monotonic()
            next_pass = began + period
            if self.election.epoch() is not None:
                if self._held():
                    next_pass = min(next_pass, self._hold_until)
                else:
                    self.rescue()
            self.pause(self._wakeup, max(0.0, next_pass - self.clock.monotonic()))

    def _held(self) -> bool:
        """Whether rescues wait now: calls to the store fail, or it came back less than
        RESCUE_HOLD ago (by this node's clock, from the pass that saw it)."""
        health = self.store.health
        comebacks = health.comebacks
        if health.failing or comebacks != self._comebacks:
            self._comebacks = comebacks
            self._hold_until = self.clock.monotonic() + RESCUE_HOLD
            log.debug(
                "rescue held back %g s: the store %s", RESCUE_HOLD,
                "fails" if health.failing else "answers again",
            )  # fmt: skip
        return self.clock.monotonic() < self._hold_until

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
