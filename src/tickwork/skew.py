"""Clock skew: how far a node's wall clock is from the store's, measured at every node
heartbeat, so an operator can see a drifting host.

tickwork never acts on a node's clock (the one-clock rule): due-ness, leases and expiry are
judged by the store's ``now()``, so a node whose clock runs 5 s fast fires nothing early.
But its logs are stamped 5 s off, and a handler that reads the host's clock is wrong by
5 s: handlers that must agree on the time read ``ctx.now()``, the store's.

The measurement, at each node heartbeat (and at registration)::

    t0 = local wall time;  db = store.now();  t1 = local wall time
    offset = (t0 + t1) / 2 - db      bound = (t1 - t0) / 2

The store read ``db`` somewhere between ``t0`` and ``t1`` by the local clock, so the
offset is off by at most ``bound``, the round trip halved: a 4 ms round trip to a store
whose clock is 5.010 s behind reads ``+5.01 s ±0.002``. Positive: the node is ahead.

A node more than :data:`SKEW_WARNING` off logs one WARNING when it goes off and one INFO
when it is back within, once per incident, not at every beat. The reading travels in the
node's heartbeat ``info`` as ``{"clock": {"offset": s, "bound": s}}``; ``tickwork
cluster``, the dashboard's cluster page and ``/metrics`` show it.

On SQLite the store's clock is the host's own: the offset is about 0, by construction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from tickwork.clock import Clock

log = logging.getLogger("tickwork.skew")

SKEW_WARNING = 1.0
"""Seconds: a node whose clock is further than this from the store's logs a warning."""


@dataclass(frozen=True, slots=True)
class Skew:
    """One measurement: ``offset`` seconds (node minus store), within ``bound`` seconds."""

    offset: float
    bound: float

    def __str__(self) -> str:
        return f"{self.offset:+.2f} s ±{self.bound:.3f}"

    def to_info(self) -> dict[str, float]:
        return {"offset": round(self.offset, 6), "bound": round(self.bound, 6)}

    @classmethod
    def from_info(cls, info: object) -> Skew | None:
        """The reading in a node's heartbeat ``info``; None when it carries none."""
        clock = info.get("clock") if isinstance(info, dict) else None
        if not isinstance(clock, dict):
            return None
        offset, bound = clock.get("offset"), clock.get("bound")
        numbers = (int, float)
        if not isinstance(offset, numbers) or not isinstance(bound, numbers):
            return None
        return cls(float(offset), float(bound))

    @property
    def off(self) -> bool:
        """Further from the store's clock than :data:`SKEW_WARNING`."""
        return abs(self.offset) > SKEW_WARNING


class SkewWatch:
    """Measures one node's skew when asked (each heartbeat) and logs each incident once.

    ``wall`` is the node's wall clock and ``store_now`` reads the store's (a round trip).
    Called from one thread at a time (the node's heartbeat).
    """

    def __init__(
        self, node_id: str, *, wall: Callable[[], datetime], store_now: Callable[[], datetime]
    ) -> None:
        self.node_id = node_id
        self._wall = wall
        self.store_now = store_now
        """The store's time (a round trip); also ``ctx.now()`` in a worker."""
        self.last: Skew | None = None
        self._off = False

    @classmethod
    def on(cls, node_id: str, clock: Clock, store_now: Callable[[], datetime]) -> SkewWatch:
        """The watch of a service on ``clock``: its wall time against ``store_now`` (the
        store's ``now``), or against the test clock's own time when it sets the store's
        (:meth:`~tickwork.clock.Clock.store_now`), where the skew is 0 by construction."""
        return cls(node_id, wall=clock.now, store_now=lambda: clock.store_now() or store_now())

    def measure(self) -> Skew | None:
        """Measure now; None when the store did not answer (the last reading stands)."""
        try:
            t0 = self._wall()
            db = self.store_now()
            t1 = self._wall()
        except Exception as exc:  # an outage is logged once by the store's health
            log.debug("clock skew of %s not measured: %s", self.node_id, exc)
            return None
        return self.record(t0, db, t1)

    def wall(self) -> datetime:
        """This node's wall time, as :meth:`record` wants it around a store call."""
        return self._wall()

    def record(self, t0: datetime, db: datetime, t1: datetime) -> Skew:
        """A reading from a store call the node made anyway: ``db``, the store's ``now()``
        in that call, read between the wall times ``t0`` and ``t1`` (a leader's renewal:
        its lease expires at the store's now plus the lease, so it costs no round trip)."""
        half = (t1 - t0) / 2
        skew = Skew(offset=(t0 + half - db).total_seconds(), bound=half.total_seconds())
        self.last = skew
        if skew.off and not self._off:
            log.warning(
                "clock of node %s is %s off the database clock (more than %g s): due times "
                "are still judged by the database, but this host's clock and logs are wrong",
                self.node_id,
                skew,
                SKEW_WARNING,
            )
        elif self._off and not skew.off:
            log.info("clock of node %s is back within %g s: %s", self.node_id, SKEW_WARNING, skew)
        self._off = skew.off
        return skew

    def earliest_store_now(self) -> datetime | None:
        """The earliest the store's clock can read now, by this node's wall clock and the
        last reading (None before one): ``wall - offset - bound``. For timers only, never
        for judging due-ness: a timer to a store time set by it does not run out early
        (unless the host's clock jumped since the reading), and costs no round trip."""
        skew = self.last
        if skew is None:
            return None
        return self._wall() - timedelta(seconds=skew.offset + skew.bound)

    def info(self, *, measure: bool = True) -> dict[str, dict[str, float]]:
        """``{"clock": ...}`` to merge into a heartbeat's info, measured now unless
        ``measure`` is false (the caller just recorded a reading); empty when there is no
        reading at all."""
        skew = (self.measure() if measure else None) or self.last
        return {} if skew is None else {"clock": skew.to_info()}
