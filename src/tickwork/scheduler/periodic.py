"""The loop of a leader-only chore: once as soon as this node starts leading, then every
period while it leads (the pruner, the rollup)."""

from __future__ import annotations

import threading

from tickwork.clock import Clock
from tickwork.scheduler.election import Election
from tickwork.service import Service


class LeaderPeriodic(Service):
    """Calls :meth:`act` every :meth:`period` seconds while this node leads, and at once
    when it starts leading (a new epoch; the election calls :meth:`wake`)."""

    def __init__(self, election: Election, clock: Clock) -> None:
        super().__init__(clock)
        self.election = election
        self._wakeup = threading.Event()
        self._acted_at_epoch: int | None = None

    def period(self) -> float:
        raise NotImplementedError

    def act(self) -> object:
        raise NotImplementedError

    def wake(self) -> None:
        self._wakeup.set()

    def run(self) -> None:
        self.started.set()
        period = self.period()
        next_at = self.clock.monotonic()
        while not self.stopping.is_set():
            self._wakeup.clear()
            epoch = self.election.epoch()
            now = self.clock.monotonic()
            if epoch is not None and (epoch != self._acted_at_epoch or now >= next_at):
                self._acted_at_epoch = epoch
                next_at = now + period
                self.act()
            # Woken by the election when this node starts leading.
            self.pause(self._wakeup, max(0.0, next_at - self.clock.monotonic()) or period)
