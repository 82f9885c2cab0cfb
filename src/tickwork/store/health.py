"""StoreHealth: whether this process's store answers, told once per outage.

Every store call that fails for want of the database (``StoreUnavailable``) reports
:meth:`StoreHealth.failed`; every call that succeeds reports :meth:`StoreHealth.answered`;
every connection opened to replace a lost one reports :meth:`StoreHealth.reconnected`.
From that the process logs exactly two lines per outage, whatever the number of threads
and retries:

- one WARNING when the store is lost (``store ... lost: <the first error>``);
- one INFO when it answers again, with the outage's length.

An outage is failures that last: calls failing for OUTAGE_AFTER (1 s) with no call
answered in between. A single call cut off while a healthy server ended its session (an
administrator's ``pg_terminate_backend``, a connection past its lifetime) fails that call,
and its caller retries, but it is no outage: the next call is answered, and nothing is
logged above DEBUG. A real outage is noticed within OUTAGE_AFTER plus one retry, since
every service retries within a second.

The services that retry during an outage (claim, heartbeat, report, trigger, rescue,
election) log their own retries at DEBUG only. ``outages`` and ``reconnects`` are counted
for ``/metrics`` and the cluster view (each node sends :meth:`snapshot` with its
heartbeat).

A comeback
    The first call answered after calls failed (an outage, or a single failure that did
    not last) is a *comeback*: counted in ``comebacks``, and it sets every event handed to
    :meth:`sets_on_comeback`. A worker's heartbeat, claim loop and reporter wait on such an
    event between their retries, so the moment any one of the process's calls is answered
    again, all of them try again at once instead of at the end of their own backoff: the
    leases are extended and the outcomes written within about one round trip of the first
    answer. The leader's reaper reads ``comebacks`` and ``failing`` to hold its rescues
    back for a while after one (:mod:`tickwork.scheduler.reaper`).

``answered`` is on every store call's path, so it costs one attribute read while the store
is up; the lock is taken only at the transitions.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger("tickwork.store")

OUTAGE_AFTER = 1.0
"""Seconds calls must keep failing, with none answered, before it counts as an outage."""


class StoreHealth:
    """The store's reachability as this process has seen it (see the module docstring)."""

    def __init__(self, name: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._failing_since: float | None = None  # the first failure not yet answered
        self._first_error = ""
        self._down_since: float | None = None  # set once the failures lasted: an outage
        self.outages = 0
        """Times the store went from answering to not answering."""
        self.reconnects = 0
        """Connections opened to replace lost ones (pool and LISTEN)."""
        self.last_outage: float | None = None
        """Seconds the last finished outage lasted."""
        self.comebacks = 0
        """Times a call was answered after calls had failed (see the module docstring)."""
        self._on_comeback: list[threading.Event] = []

    @property
    def up(self) -> bool:
        return self._down_since is None

    @property
    def failing(self) -> bool:
        """Whether the last call that ended failed for want of the database (none answered
        since): true from the first failure, before it counts as an outage."""
        return self._failing_since is not None

    def down_for(self) -> float:
        """Seconds the current outage has lasted (0 while the store answers)."""
        since = self._down_since
        return 0.0 if since is None else max(0.0, self._clock() - since)

    def failed(self, error: BaseException | str) -> None:
        """A call failed because the database did not answer."""
        now = self._clock()
        with self._lock:
            if self._down_since is not None:
                return
            if self._failing_since is None:
                self._failing_since = now
                self._first_error = _first_line(error)
                log.debug("store %s: a call failed: %s", self.name, self._first_error)
                return
            if now - self._failing_since < OUTAGE_AFTER:
                return
            self._down_since = self._failing_since
            self.outages += 1
            first = self._first_error
        log.warning(
            "store %s lost: %s; retrying (one line again when it answers)", self.name, first
        )

    def answered(self) -> None:
        """A call succeeded."""
        if self._failing_since is None:  # the hot path: one attribute read
            return
        with self._lock:
            since, down = self._failing_since, self._down_since
            if since is None:
                return
            self._failing_since = None
            self._down_since = None
            self.comebacks += 1
            for event in self._on_comeback:
                event.set()
            if down is None:
                return  # a failure that did not last: no outage
            self.last_outage = max(0.0, self._clock() - down)
            reconnects = self.reconnects
        log.info(
            "store %s is back after %.1f s (%d reconnects so far)",
            self.name,
            self.last_outage,
            reconnects,
        )

    @contextlib.contextmanager
    def sets_on_comeback(self, event: threading.Event) -> Iterator[None]:
        """Within the block, set ``event`` at every comeback (in the answered call's thread:
        a waiter clears it before the call whose failure it then waits out)."""
        with self._lock:
            self._on_comeback.append(event)
        try:
            yield
        finally:
            with self._lock:
                self._on_comeback.remove(event)

    def reconnected(self) -> None:
        """A lost connection was replaced by a new one."""
        with self._lock:
            self.reconnects += 1

    def snapshot(self) -> dict[str, Any]:
        """What a node reports with its heartbeat: ``{"up", "outages", "reconnects"}``."""
        return {"up": self.up, "outages": self.outages, "reconnects": self.reconnects}


def _first_line(error: BaseException | str) -> str:
    text = str(error).strip()
    return text.partition("\n")[0] or type(error).__name__
