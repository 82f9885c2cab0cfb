"""Presence: shows a process that runs no scheduler or worker (``tickwork api``) in the
cluster view, with its clock offset. Not leader-only; one per such process.

It registers the node row at start, then every ``beat`` (default 3 s) marks it seen with
its info: the beat, its view of the store and its clock offset (:mod:`tickwork.skew`,
measured at each beat). A beat that fails is tried again at the next one (the outage is
logged once by the store's health). A clean stop removes the row; a crashed process's row
goes silent and is forgotten after a day, as a worker's does.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import timedelta
from typing import Any

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.service import Service
from tickwork.skew import SkewWatch
from tickwork.store.base import Store

log = logging.getLogger("tickwork")

PRESENCE_BEAT = timedelta(seconds=3)
"""How often a present node marks itself seen (as often as a worker's run heartbeat)."""


class Presence(Service):
    name = "tickwork-presence"

    def __init__(
        self,
        store: Store,
        kind: str,
        node_id: str,
        *,
        beat: timedelta = PRESENCE_BEAT,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.kind = kind
        self.node_id = node_id
        self.beat = beat.total_seconds()
        self.skew = SkewWatch.on(node_id, clock, store.now)

    def info(self) -> dict[str, Any]:
        """What the cluster view shows of this node; sent with every beat."""
        return {"beat": self.beat, "store": self.store.health.snapshot(), **self.skew.info()}

    def run(self) -> None:
        registered = self._register()
        self.started.set()
        while not self.pause(self.stopping, self.beat):
            if not registered:
                registered = self._register()
                continue
            try:
                self.store.node_heartbeat(
                    self.node_id, info=self.info(), now=self.clock.store_now()
                )
            except Exception as exc:
                log.debug("node heartbeat of %s failed: %s", self.node_id, exc)
        if registered:
            try:
                self.store.deregister_node(self.node_id)
            except Exception as exc:
                log.debug("could not deregister node %s: %s", self.node_id, exc)

    def _register(self) -> bool:
        try:
            self.store.register_node(
                self.node_id,
                self.kind,
                socket.gethostname(),
                os.getpid(),
                self.info(),
                now=self.clock.store_now(),
            )
        except Exception as exc:
            log.warning("could not register node %s: %s", self.node_id, exc)
            return False
        return True
