"""The scheduler: leader election plus the leader-only services, composed.

Any number of scheduler nodes may run against one store; one leads at a time
(:mod:`~tickwork.scheduler.election`). While a node leads, it:

- **triggers** due slots into queued runs, on time (:mod:`~tickwork.scheduler.trigger`);
- **rescues** runs whose lease expired, every ``rescue_interval``
  (:mod:`~tickwork.scheduler.reaper`);
- **prunes** finished runs past retention, every ``prune_interval``
  (:mod:`~tickwork.scheduler.pruner`);
- **folds** finished runs into the per-minute rollup, every minute
  (:mod:`~tickwork.scheduler.rollup`).

A standby runs the same services; they idle until the election says this node leads.
"""

from __future__ import annotations

from types import TracebackType

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.config import Config
from tickwork.scheduler.election import Election
from tickwork.scheduler.pruner import Pruner
from tickwork.scheduler.reaper import Reaper
from tickwork.scheduler.rollup import Rollup
from tickwork.scheduler.trigger import Trigger
from tickwork.service import Service
from tickwork.store.roles import LeaderStore


class Scheduler:
    """One scheduler node: ``start()`` it, ``stop()`` it (which resigns leadership).

    ``epoch`` is the leader epoch this node may act at right now, or None while it does
    not lead (a standby, or a leader whose lease may have lapsed by its monotonic clock).
    ``register``: show this node in the cluster view as a ``scheduler`` (see
    :class:`~tickwork.scheduler.election.Election`).
    """

    def __init__(
        self,
        store: LeaderStore,
        config: Config,
        clock: Clock = SYSTEM_CLOCK,
        *,
        register: bool = False,
    ) -> None:
        self.store = store
        self.config = config
        self.election = Election(
            store, config, clock, on_change=self._leadership_changed, register=register
        )
        self.trigger = Trigger(store, config, self.election, clock)
        self.reaper = Reaper(store, config, self.election, clock)
        self.pruner = Pruner(store, config, self.election, clock)
        self.rollup = Rollup(store, self.election, clock)
        self._duties: tuple[Service, ...] = (self.trigger, self.reaper, self.pruner, self.rollup)

    @property
    def node_id(self) -> str:
        return self.config.node_id

    @property
    def epoch(self) -> int | None:
        return self.election.epoch()

    @property
    def leading(self) -> bool:
        return self.election.epoch() is not None

    def start(self) -> None:
        """Start the duties (idle until leading), then the election. Returns at once."""
        for duty in self._duties:
            duty.start()
        self.election.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop acting first, then resign, so nothing is done after the lease is given up.
        Idempotent."""
        for duty in self._duties:
            duty.stop(timeout)
        self.election.stop(timeout)

    def __enter__(self) -> Scheduler:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _leadership_changed(self, epoch: int | None) -> None:
        if epoch is not None:
            for duty in self._duties:
                duty.wake()


__all__ = ["Election", "Pruner", "Reaper", "Rollup", "Scheduler", "Trigger"]
