"""The composition root: a config becomes a store and the services one process runs on it.

``tickwork run`` is a Node with a scheduler and a worker on one store (the embedded SQLite
default); ``tickwork scheduler`` and ``tickwork worker`` run one service each. Nothing else
builds services from configuration.

Starting during an outage
-------------------------
A process that starts while its database is down waits for it: :meth:`Node.start` (and
``tickwork api``, through :func:`when_store_answers`) asks the store for its schema version
until it answers, retrying with capped, jittered backoff (``STARTUP_RETRY``), then starts
its services. Each failed try goes through the store's health, so the wait is logged as
any outage is: one WARNING once the calls have failed for a second, one INFO with its
length when the database answers (:mod:`tickwork.store.health`); the retries themselves
log nothing above DEBUG. A stop signal ends the wait at once (nothing was started). With
``Config.exit_on_unavailable`` (``--exit-on-unavailable``) the store connects when opened
and the command exits 1 if it cannot, as before. Once started, every service rides out
outages by itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from tickwork.client import Client
from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.config import Config
from tickwork.errors import StoreUnavailable
from tickwork.scheduler import Scheduler
from tickwork.service import Backoff
from tickwork.store import open_store
from tickwork.store.base import Store
from tickwork.tasks.registry import Registry
from tickwork.worker import Worker

log = logging.getLogger("tickwork")

T = TypeVar("T")

Wait = Callable[[float], bool]
"""``wait(seconds)``: sleep that long, or less when the process is told to stop (True)."""

STARTUP_RETRY = (0.1, 2.0)
"""Seconds: the first and the longest wait between a starting process's tries to reach its
store (service.Backoff: doubling, each drawn from its upper half): 0.05-0.1, 0.1-0.2,
0.2-0.4, 0.4-0.8, 0.8-1.6, then 1-2 s for as long as the database stays away, so a fleet
started during an outage is at work within 2 s of the database answering, without all of
it knocking at once."""


def when_store_answers(
    call: Callable[[], T],
    *,
    exit_on_unavailable: bool = False,
    wait: Wait | None = None,
) -> T | None:
    """``call()``'s result once the store answers it: while it raises ``StoreUnavailable``
    it is tried again after a backoff (``STARTUP_RETRY``). None when ``wait`` says the
    process is to stop first. ``exit_on_unavailable``: the first ``StoreUnavailable``
    propagates (the command exits 1). The outage is logged by the store's health, once
    (see the module docstring)."""
    pause = wait if wait is not None else threading.Event().wait
    backoff = Backoff(*STARTUP_RETRY)
    while True:
        try:
            return call()
        except StoreUnavailable as exc:
            if exit_on_unavailable:
                raise
            log.debug("the store does not answer yet: %s", exc)
        if pause(backoff.next()):
            return None


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
            else open_store(
                config.db_url,
                # Waiting out an outage at start is start()'s: connect here only to fail fast.
                connect=config.exit_on_unavailable,
                application_name=f"tickwork {role} {config.node_id}",
            )
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

    def start(self, wait: Wait | None = None) -> bool:
        """Start the services once the store answers (the module docstring: a node started
        during an outage waits for its database). Returns False, having started nothing,
        when ``wait`` (see :data:`Wait`) says to stop first; raises StoreUnavailable at once
        with ``config.exit_on_unavailable``."""
        exit_now = self.config.exit_on_unavailable
        answered = when_store_answers(
            self.store.schema_version, exit_on_unavailable=exit_now, wait=wait
        )
        if answered is None:
            return False
        if self.scheduler is not None:
            self.scheduler.start()
        worker = self.worker
        if worker is not None:

            def start_worker() -> bool:
                worker.start()
                return True

            # Its first store call (the fault injection opt-in) may meet the database gone
            # again; nothing of the worker has started when that raises.
            if not when_store_answers(start_worker, exit_on_unavailable=exit_now, wait=wait):
                return False
        return True

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
