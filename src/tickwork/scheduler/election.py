"""Election: one scheduler leads at a time, by a lease with an epoch. Leader-only duties
(trigger, rescue, prune) ask :meth:`Election.epoch` before every act.

What it does, how often
-----------------------
Every ``leader_renew`` (2 s by default) a leader renews its lease and a standby tries to
acquire it. Runs on every scheduler node; it is what decides which node is the leader.

The protocol
------------
The store keeps one lease row (named ``scheduler`` in ``tickwork_leases``): ``holder``, ``epoch``,
``expires_at``, all judged by the **store's clock**.

1. **Acquire.** A standby calls ``acquire_leadership(node, ttl)`` every ``leader_renew``.
   The store grants it only when the row is free or expired by its own clock, and then
   raises the epoch, so every change of holder (and every re-take after an expiry) has a
   new, larger epoch: the fencing token of leadership.
2. **Renew.** The leader calls ``renew_leadership(node, epoch, ttl)`` every
   ``leader_renew``; the store extends ``expires_at`` to its now + ``ttl`` only if the
   row still names this node at this epoch and has not expired.
3. **Act only while surely leading, by the local monotonic clock.** Before sending each
   acquire or renew the node reads its monotonic clock: ``t0``. The store stamps the lease
   at a moment no earlier than ``t0`` in real time, so the lease is valid at least until
   ``t0 + ttl`` of elapsed time, whatever the offset between the two clocks (only their
   *rates* matter). The node acts as leader until ``t0 + ttl - leader_safety_margin``; the
   margin absorbs clock rate drift and the time a trigger call spends on its way to the
   store. This needs no answer from the store: a leader whose renewals hang (a partition,
   a stalled database) stops acting on its own, before any standby can have taken over.
4. **Any failure stops leading at once.** A renewal that raises ``LeadershipLost`` or any
   store error, or a fenced write that raises ``LeadershipLost``, drops leadership locally
   immediately; the node becomes a standby and tries to acquire at its next beat.
5. **Fencing is the second line.** Every leader-only write that could double an effect
   (``trigger``) carries the epoch; the store rejects a stale or expired one. So even a
   node paused past its lease (SIGSTOP, a long GC, a VM migration) that wakes up thinking
   it leads cannot trigger a slot twice: the unique (job, slot) key and the epoch stop it.
6. **Every new epoch is a term.** The acquire that raises the epoch also records a term
   (``tickwork_leader_terms``: epoch, holder, start) and ends the one before at the expiry
   of the lease it held, in its transaction; renewals write nothing more. ``explain`` reads
   the terms to say why a slot ran late: "no leader from 16:07:38 to 16:07:49; epoch 2 → 3".
7. **Resign on stop.** A node that stops cleanly gives the lease up, so a standby takes
   over at its next attempt (within ``leader_renew``) instead of waiting out the TTL.

Worked numbers (defaults: lease 10 s, renew 2 s, margin 0.5 s): a leader that sent its
last successful renewal at ``t0`` acts until ``t0 + 9.5 s``. If it dies right after, the
store's lease runs out at most 10 s later, and a standby, trying every 2 s, takes over
within 10 + 2 = 12 s of the last renewal: "a dead leader is replaced within about 12 s".
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.config import Config
from tickwork.errors import LeadershipLost, StoreError, StoreUnavailable
from tickwork.service import Service
from tickwork.skew import SkewWatch
from tickwork.store.roles import LeaderStore

log = logging.getLogger("tickwork.scheduler")


@dataclass(frozen=True, slots=True)
class Leadership:
    """This node leads at ``epoch`` until ``valid_until`` on its monotonic clock."""

    epoch: int
    valid_until: float


class Election(Service):
    """Leader election over the store's lease row (see the module docstring).

    Every ``leader_renew``: renew when leading, else try to acquire. On every node.
    ``on_change(epoch or None)`` is called from the election thread when this node starts
    or stops leading, so leader-only services can wake up at once.

    With ``register``, the node also shows in the cluster view (``tickwork cluster``): it
    registers as a ``scheduler`` node on start, is marked seen at every beat, and removes
    its row on stop. Off by default: a process that also runs a worker under the same node
    id (``tickwork run``) lets the worker own that row.
    """

    name = "election"

    def __init__(
        self,
        store: LeaderStore,
        config: Config,
        clock: Clock = SYSTEM_CLOCK,
        on_change: Callable[[int | None], None] | None = None,
        *,
        register: bool = False,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.config = config
        self.node_id = config.node_id
        self.on_change = on_change
        self.register = register
        self.skew = SkewWatch.on(self.node_id, clock, store.now)
        self._skew_recorded = False  # by this beat's renewal: the node heartbeat needs none
        self._leadership: Leadership | None = None
        self._state_lock = threading.Lock()

    # -- what leader-only services ask -----------------------------------------------------

    def epoch(self) -> int | None:
        """The epoch this node may act at right now, or None when it may not act.

        None as soon as the lease may have lapsed by the local monotonic clock, even while
        the renewal that would tell is still on its way.
        """
        with self._state_lock:
            held = self._leadership
        if held is None or self.clock.monotonic() >= held.valid_until:
            return None
        return held.epoch

    def lost(self, epoch: int, reason: str = "fenced") -> None:
        """A fenced write said ``epoch`` is over: stop leading now (if still at it)."""
        self._drop(epoch, reason)

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        self.started.set()
        registered = self.register and self._register()
        period = self.config.leader_renew.total_seconds()
        try:
            while not self.stopping.is_set():
                began = self.clock.monotonic()
                self.beat()
                if registered:
                    self._seen()
                self.pause(self.stopping, max(0.0, began + period - self.clock.monotonic()))
        finally:
            self._resign()
            if registered:
                self._deregister()

    def beat(self) -> None:
        """One attempt now: renew when leading, else try to acquire. The loop calls it every
        ``leader_renew``; tests call it to step the protocol by hand."""
        with self._state_lock:
            held = self._leadership
        ttl = self.config.leader_lease
        sent_at = self.clock.monotonic()  # before the request: see the protocol, step 3
        now = self.clock.store_now()
        self._skew_recorded = False
        wall_before = self.skew.wall()
        try:
            if held is None:
                lease = self.store.acquire_leadership(self.node_id, ttl, now=now)
            else:
                lease = self.store.renew_leadership(self.node_id, held.epoch, ttl, now=now)
        except LeadershipLost:
            if held is not None:
                self._drop(held.epoch, "lost")
            return
        except StoreError as exc:
            if held is not None:
                self._drop(held.epoch, f"store error: {exc}")
            elif isinstance(exc, StoreUnavailable):
                log.debug("election: acquire failed: %s", exc)  # the outage is logged once
            else:
                log.warning("election: acquire failed: %s", exc)
            return
        except Exception:
            log.exception("election: %s failed", "acquire" if held is None else "renew")
            if held is not None:
                self._drop(held.epoch, "internal error")
            return
        if lease is None:
            return  # standby: another node leads
        # The lease expires at the store's now() of this call plus ttl: a skew reading for
        # free. (Not a second round trip: a leader's beat stays one call on a slow link.)
        self.skew.record(wall_before, lease.expires_at - ttl, self.skew.wall())
        self._skew_recorded = True
        margin = self.config.leader_safety_margin
        valid_until = sent_at + (ttl - margin).total_seconds()
        with self._state_lock:
            previous = self._leadership
            self._leadership = Leadership(lease.epoch, valid_until)
        if self.clock.monotonic() >= valid_until:
            # The answer came too late to act on. Keep the epoch: the next beat renews it
            # (or, if it expired meanwhile, re-acquires at a new epoch).
            log.warning("election: the store answered too late to act on epoch %d", lease.epoch)
            return
        was_acting = (
            previous is not None
            and previous.epoch == lease.epoch
            and previous.valid_until > sent_at
        )
        if not was_acting:
            log.info("lead epoch=%d node=%s", lease.epoch, self.node_id)
            self._notify(lease.epoch)

    def _drop(self, epoch: int, reason: str) -> None:
        with self._state_lock:
            held = self._leadership
            if held is None or held.epoch != epoch:
                return
            self._leadership = None
        log.warning("resign epoch=%d node=%s reason=%s", epoch, self.node_id, reason)
        self._notify(None)

    def _resign(self) -> None:
        with self._state_lock:
            held = self._leadership
            self._leadership = None
        if held is None:
            return
        try:
            self.store.resign_leadership(self.node_id, held.epoch)
        except Exception as exc:
            # The lease then simply expires after its TTL.
            log.warning("resign epoch=%d node=%s failed: %s", held.epoch, self.node_id, exc)
        else:
            log.info("resign epoch=%d node=%s reason=stop", held.epoch, self.node_id)
        self._notify(None)

    def _notify(self, epoch: int | None) -> None:
        if self.on_change is not None:
            self.on_change(epoch)

    # -- the cluster view (a failure here changes nothing about leadership) ----------------

    def _info(self) -> dict[str, Any]:
        """What the cluster view shows of this scheduler; sent with every beat."""
        return {
            "leader_lease": self.config.leader_lease.total_seconds(),
            "leader_renew": self.config.leader_renew.total_seconds(),
            "beat": self.config.leader_renew.total_seconds(),
            "store": self.store.health.snapshot(),
            **self.skew.info(measure=not self._skew_recorded),
        }

    def _register(self) -> bool:
        try:
            self.store.register_node(
                self.node_id,
                "scheduler",
                socket.gethostname(),
                os.getpid(),
                self._info(),
                now=self.clock.store_now(),
            )
        except Exception as exc:
            log.warning("could not register node %s: %s", self.node_id, exc)
            return False
        return True

    def _seen(self) -> None:
        try:
            self.store.node_heartbeat(self.node_id, info=self._info(), now=self.clock.store_now())
        except Exception as exc:
            log.debug("node heartbeat of %s failed: %s", self.node_id, exc)

    def _deregister(self) -> None:
        try:
            self.store.deregister_node(self.node_id)
        except Exception as exc:
            log.debug("could not deregister node %s: %s", self.node_id, exc)
