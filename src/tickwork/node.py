"""The composition root: a config becomes a store and the services one process runs on it.

``tickwork run`` is a Node with a scheduler and a worker on one store (the embedded SQLite
default); ``tickwork scheduler`` and ``tickwork worker`` run one service each. Nothing else
builds services from configuration.
"""

from __future__ import annotations

from datetime import timedelta

from tickwork.client import Client
from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.config import Config
from tickwork.scheduler import Scheduler
from tickwork.store import open_store
from tickwork.store.base import Store
from tickwork.worker import Worker
from tickwork.worker.registry import Registry


class Node:
    """One process's services on one store. ``start()``, then ``stop()`` (graceful)."""

    def __init__(
        self,
        config: Config,
        registry: Registry,
        *,
        scheduler: bool = True,
        worker: bool = True,
        store: Store | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """``store`` defaults to one opened on ``config.db_url`` and closed by :meth:`stop`.
        A scheduler-only node shows in the cluster view as a ``scheduler``; with a worker
        beside it, the worker's row stands for the process (one node id, one row)."""
        self.config = config
        self.registry = registry
        self._owns_store = store is None
        role = "run" if scheduler and worker else "scheduler" if scheduler else "worker"
        self.store = (
            store
            if store is not None
            else open_store(config.db_url, application_name=f"tickwork {role} {config.node_id}")
        )
        self.scheduler = (
            Scheduler(self.store, config, clock, register=not worker) if scheduler else None
        )
        # Beside a leading scheduler, a worker hears every trigger (in-process signals on
        # SQLite): it need not poll for a job that falls due.
        scheduler_here = self.scheduler
        self.worker = (
            Worker(
                self.store,
                registry,
                config,
                clock,
                hears_triggers=(lambda: scheduler_here.leading) if scheduler_here else None,
            )
            if worker
            else None
        )

    def start(self) -> None:
        if self.scheduler is not None:
            self.scheduler.start()
        if self.worker is not None:
            self.worker.start()

    def stop(self, grace: timedelta | None = None) -> None:
        """Stop claiming and let running handlers finish (up to the shutdown grace), release
        the rest, resign leadership, close the store. Idempotent."""
        try:
            if self.worker is not None:
                self.worker.stop_gracefully(grace)
        finally:
            try:
                if self.scheduler is not None:
                    self.scheduler.stop()
            finally:
                if self._owns_store:
                    self.store.close()

    def hurry(self) -> None:
        """Cut a graceful stop's grace short (a second SIGTERM)."""
        if self.worker is not None:
            self.worker.hurry()

    def close(self) -> None:
        """Close the store this node opened; idempotent. For a start that failed, where
        :meth:`stop` was never reached."""
        if self._owns_store:
            self.store.close()

    def client(self) -> Client:
        """A client on this node's store and tasks (the API that ``tickwork run`` serves)."""
        return Client(self.store, self.registry)

    def rescued(self) -> int:
        """Runs whose lease expired that this node's reaper rescued (0 without a scheduler):
        the ``tickwork_rescues_total`` metric of an API served beside it."""
        return self.scheduler.reaper.rescued if self.scheduler is not None else 0
