"""Presence: shows a process that runs no scheduler or worker (``tickwork api``) in the
cluster view, with its clock offset. Not leader-only; one per such process.

It registers the node row at start, then every ``beat`` (default 3 s) marks it seen with
its info: the beat, its view of the store and its clock offset (:mod:`tickwork.skew`,
measured at each beat). A beat that fails is tried again at the next one (the outage is
logged once by the store's health). A clean stop removes the row; a crashed process's row
goes silent and is forgotten after a day, as a worker's does.

Who could run a run (:class:`LiveWorkers`): every worker sends, with each heartbeat, the
queues it claims from, the tasks of its registry and whether it runs shell commands (its
node row's info). A worker claims only runs of its own tasks (the claim's ``tasks=``), so
a run whose task no live worker of its queue has waits, queued, until one starts: the
queues view, ``explain``, ``/metrics`` (``tickwork_unserved_runs``) and a submit say so,
from these rows. "Live" is not silent: seen within three of its heartbeat intervals
(:meth:`~tickwork.records.NodeRecord.silent`). :class:`WorkerWatch` keeps that view for a
client's submits, read again at most every few seconds.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.records import NodeRecord
from tickwork.service import Service
from tickwork.skew import SkewWatch
from tickwork.store.roles import NodeRegistry
from tickwork.tasks.builtins import SHELL

log = logging.getLogger("tickwork")

PRESENCE_BEAT = timedelta(seconds=3)
"""How often a present node marks itself seen (as often as a worker's run heartbeat)."""


class Presence(Service):
    name = "tickwork-presence"

    def __init__(
        self,
        store: NodeRegistry,
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


# -- who could run a run -------------------------------------------------------------------

WATCH_TTL = timedelta(seconds=3)
"""How long :class:`WorkerWatch` keeps its view of the live workers (a presence beat): a
burst of submits reads the node rows once, and a worker that just started is seen within
a few seconds."""
WARN_EVERY = timedelta(minutes=1)
"""How often :meth:`WorkerWatch.first_in_a_while` lets one warning through (a process that
submits a task no worker has, many times a second, logs it once a minute)."""


@dataclass(frozen=True, slots=True)
class LiveWorkers:
    """The live workers, from their node rows: which of them would claim a run."""

    nodes: tuple[NodeRecord, ...]

    @classmethod
    def of(cls, nodes: Iterable[NodeRecord], now: datetime) -> LiveWorkers:
        """The workers among ``nodes`` that are not silent at ``now`` (the store's clock)."""
        return cls(tuple(n for n in nodes if _is_worker(n) and not n.silent(now)))

    def serving(self, task: str, queue: str) -> list[str]:
        """The ids of the live workers that would claim a run of ``task`` in ``queue``."""
        return [n.id for n in self.nodes if _takes(n, queue) and _has(n, task)]

    def unserved(self, task: str, queue: str) -> str | None:
        """Why no live worker would claim a run of ``task`` in ``queue`` (None: one would),
        e.g. "no live worker has task send_mail"."""
        if self.serving(task, queue):
            return None
        having = [n for n in self.nodes if _has(n, task)]
        if task == SHELL:
            if not having:
                return "no live worker runs shell tasks (start one with --allow-shell)"
            return (
                f"no live worker that takes queue {queue} runs shell tasks (start one with "
                f"--allow-shell and --queue {queue})"
            )
        if not self.nodes:
            return f"no live worker has task {task} (no worker is live)"
        if not having:
            return f"no live worker has task {task}"
        if not any(_takes(n, queue) for n in self.nodes):
            return f"no live worker takes queue {queue}"
        return f"no live worker that takes queue {queue} has task {task}"


class WorkerWatch:
    """The live workers as last read from ``store``, read again once the view is older
    than ``ttl`` (:data:`WATCH_TTL`); thread-safe. For a client's submits, which must not
    each read every node row. A read that fails gives no view (None): a warning is never
    worth failing a submit for."""

    def __init__(
        self, store: NodeRegistry, *, ttl: timedelta = WATCH_TTL, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.store = store
        self.ttl = ttl.total_seconds()
        self.clock = clock
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._view: LiveWorkers | None = None
        self._warned: dict[str, float] = {}

    def live(self) -> LiveWorkers | None:
        with self._lock:
            at = self.clock.monotonic()
            if self._read_at is not None and at - self._read_at < self.ttl:
                return self._view
            try:
                now = self.store.now()
                self._view = LiveWorkers.of(self.store.list_nodes(now=now), now)
            except Exception as exc:
                log.debug("could not read the live workers: %s", exc)
                self._view = None
            self._read_at = at
            return self._view

    def first_in_a_while(self, message: str) -> bool:
        """Whether ``message`` was not let through in the last :data:`WARN_EVERY` (and is
        now)."""
        with self._lock:
            at = self.clock.monotonic()
            last = self._warned.get(message)
            if last is not None and at - last < WARN_EVERY.total_seconds():
                return False
            if len(self._warned) > 1000:
                self._warned.clear()
            self._warned[message] = at
            return True


def _is_worker(node: NodeRecord) -> bool:
    """A worker's row: its kind, or the tasks its info names (a row that names none is
    taken to have every task, as a worker too old to say would claim them all)."""
    return isinstance(node.info, dict) and (node.kind == "worker" or "tasks" in node.info)


def _takes(node: NodeRecord, queue: str) -> bool:
    """Whether the worker claims from ``queue`` (no queues named: every queue)."""
    queues = node.info.get("queues")
    return not queues or queue in queues


def _has(node: NodeRecord, task: str) -> bool:
    """Whether the worker claims runs of ``task``: one of its registry's, and ``shell``
    only when it runs shell commands."""
    if task == SHELL:
        return bool(node.info.get("allow_shell"))
    tasks = node.info.get("tasks")
    return not isinstance(tasks, list) or task in tasks
