"""The one shape of every long-running loop: start, signal started, stop idempotently.

A :class:`Service` runs :meth:`Service.run` in its own daemon thread. ``run`` loops until
``self.stopping`` is set, sleeping with ``self.stopping.wait(timeout)`` (or a store
listener) so that :meth:`stop` interrupts it at once. Each subclass's docstring header
says what it does, how often, and whether it is leader-only.

A loop whose store call failed waits by a :class:`Backoff` before the next try: capped
(so it is back at work within about a second of the database answering again) and
jittered (so a fleet of processes that lost the database together does not come back
in lockstep). The outage itself is logged once, by the store's health
(:mod:`tickwork.store.health`); loops log their retries at DEBUG.
"""

from __future__ import annotations

import logging
import random
import threading

log = logging.getLogger("tickwork")


class Service:
    name = "service"

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.started = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the loop in a daemon thread and return once it has signalled started."""
        with self._lock:
            if self._thread is not None:
                return
            self.stopping.clear()
            self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
            self._thread.start()
        self.started.wait()

    def _main(self) -> None:
        try:
            self.run()
        except Exception:
            log.exception("%s crashed", self.name)
            raise
        finally:
            self.started.set()

    def run(self) -> None:
        """The loop body; call ``self.started.set()`` once ready. Override."""
        raise NotImplementedError

    def stop(self, timeout: float | None = None) -> None:
        """Ask the loop to stop and wait for it. Idempotent; safe before start."""
        self.stopping.set()
        self.wake()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._lock:
            self._thread = None

    def wake(self) -> None:
        """Interrupt a sleep early (override when the loop sleeps on something else)."""

    @property
    def running(self) -> bool:
        with self._lock:
            return self._thread is not None and self._thread.is_alive()


class Backoff:
    """Waits between retries: ``first``, doubling, capped at ``cap`` seconds; each wait is
    drawn from its upper half (``d/2`` to ``d``). :meth:`reset` after a success.

    With the services' defaults (0.05 s, capped at 1 s): 0.025-0.05, 0.05-0.1, 0.1-0.2,
    0.2-0.4, 0.4-0.8, then 0.5-1 s for as long as the store stays away.
    """

    def __init__(self, first: float, cap: float) -> None:
        self.first = first
        self.cap = cap
        self._next = first

    def next(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self.cap)
        return delay * (0.5 + random.random() / 2)

    def reset(self) -> None:
        self._next = self.first
