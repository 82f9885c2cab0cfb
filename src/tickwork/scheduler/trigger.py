"""Trigger: turns due slots of jobs into queued runs. Leader-only.

What it does, how often
-----------------------
While this node leads, it calls ``store.trigger(epoch)`` in batches of ``trigger_batch``
jobs, again at once while a batch came back full, then sleeps until the earliest
``next_run_at`` of any job: an exact timer, not a tick, so a run is queued within
milliseconds of its slot (when that timer runs out it triggers straight away, without
re-reading the due time). The timer is set from the store's clock as a trigger read it,
before its commit; so as not to oversleep by that commit and the round trips after the
read, it is sharpened by the node's wall clock and its last measured skew from the store's
(:meth:`~tickwork.skew.SkewWatch.earliest_store_now`), never by more than the call took.

It wakes up earlier when:

- a job is submitted or changed: a listener thread waits on ``CHANNEL_JOBS`` and wakes
  the loop. With the ``listen_notify`` capability (PostgreSQL) that covers every process
  and host, and the loop still re-plans every ``LISTEN_REPLAN``; while the listener is
  re-establishing a lost connection it re-plans every ``poll_interval`` instead, and once
  it listens again it re-plans at once (what was notified meanwhile is lost). Without the
  capability (SQLite) a listener hears submits made in this process only (``tickwork
  run``), so the loop also re-reads the earliest ``next_run_at`` every ``poll_interval``
  (200 ms by default), a read that takes no write lock;
- this node starts leading (the election wakes it).

Misfire and overlap policies are applied inside ``store.trigger`` (see
:func:`tickwork.job.plan_slots`); the slots it did not run are in the store's slot ledger,
and each range is logged here as one ``skip`` line with its fate.

Every next slot a trigger plans is searched within a budget (:mod:`tickwork.search`), so
no schedule can hold a trigger up: a cron job whose search finds no next slot (its rule
fires no more, or a calendar closed for decades spends the budget first) runs its due
slots and is completed, with one WARNING from the planning (``trigger completed job=N:
...``, :mod:`tickwork.store.planning`); it is not planned again.

Before every ``store.trigger`` call the loop asks :meth:`Election.epoch`, which turns None
as soon as the lease may have lapsed by the local monotonic clock; the epoch passed to the
store is the second line of defence (a stale one raises ``LeadershipLost``).

A trigger that fails for want of the database is retried after a capped, jittered backoff
(at most about 1 s); the outage is logged once by the store's health, not once per try.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.config import Config
from tickwork.errors import LeadershipLost, StoreError, StoreUnavailable
from tickwork.scheduler.election import Election
from tickwork.service import Backoff, Service
from tickwork.store.base import CHANNEL_JOBS, LISTEN_NOTIFY, Listener, TriggerResult
from tickwork.store.roles import LeaderStore

log = logging.getLogger("tickwork.scheduler")

LISTEN_REPLAN = timedelta(seconds=5)
"""With notifications, the trigger loop still re-reads the earliest due time this often."""
LISTEN_SLICE = timedelta(milliseconds=250)
"""The listener thread checks for a stop this often (it blocks on the database between)."""
RETRY = (0.05, 1.0)
"""Seconds: first and longest wait before triggering again after a store error
(jittered, see :class:`~tickwork.service.Backoff`)."""
STALL_BACKOFF = timedelta(milliseconds=1)
"""First retry delay when a job is due but a trigger advanced nothing; doubles each time,
up to ``poll_interval``."""
MAX_BATCHES = 100
"""Full batches triggered back to back before the loop yields (re-checks stop, leadership)."""


class Trigger(Service):
    """Queues due runs on time (see the module docstring). Leader-only; sleeps until the
    earliest due slot, or ``poll_interval`` without notifications."""

    name = "trigger"

    def __init__(
        self,
        store: LeaderStore,
        config: Config,
        election: Election,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.config = config
        self.election = election
        self._wakeup = threading.Event()
        self._notified = LISTEN_NOTIFY in store.capabilities
        self._listener: Listener | None = None
        self._retry = Backoff(*RETRY)
        self._stalls = 0

    def wake(self) -> None:
        self._wakeup.set()

    def run(self) -> None:
        listener_thread = threading.Thread(
            target=self._listen, name=f"{self.name}-listener", daemon=True
        )
        listener_thread.start()
        self.started.set()
        try:
            on_time = False
            while not self.stopping.is_set():
                # Cleared before the work, so a wake-up during it is not lost.
                self._wakeup.clear()
                timeout, until_due = self._cycle(on_time)
                # A zero wait is no sleep: it cannot have been cut short.
                woken = self.pause(self._wakeup, timeout) and timeout > 0
                # The timer ran out at a due time we know of: trigger without re-reading.
                on_time = until_due and not woken
        finally:
            listener_thread.join()

    def _idle(self) -> float:
        """The longest sleep: until a notification (bounded), or the next poll."""
        listener = self._listener
        if self._notified and listener is not None and listener.listening:
            return LISTEN_REPLAN.total_seconds()
        return self.config.poll_interval.total_seconds()

    def _cycle(self, on_time: bool) -> tuple[float, bool]:
        """Trigger whatever is due. Returns how long to sleep (seconds), and whether that
        sleep ends exactly at the next due time (then the next cycle triggers at once)."""
        epoch = self.election.epoch()
        if epoch is None:
            # Not leading: the election wakes us when that changes; the bound covers a
            # lease that lapsed locally and came back with a renewal at the same epoch.
            return self.config.leader_renew.total_seconds(), False
        try:
            if not on_time:
                due = self.store.next_due_at()
                began = self.clock.monotonic()
                now = self.clock.store_now() or self.store.now()
                if due is None or due > now:
                    return self._until(due, now, began)
            triggered = self._trigger(epoch)
            if triggered is None:
                return 0.0, False  # the next cycle re-checks stop and leadership
            result, began = triggered
            now = result.now or self.clock.store_now() or self.store.now()
            due = result.next_due_at
            if due is not None and due <= now and result.jobs_advanced == 0:
                # Due, yet nothing was triggered: we woke a hair early, or a deposed
                # leader's transaction holds the job. Retry soon, backing off.
                self._stalls += 1
                backoff = STALL_BACKOFF.total_seconds() * 2 ** min(self._stalls - 1, 16)
                return min(backoff, self.config.poll_interval.total_seconds()), False
            self._stalls = 0
            self._retry.reset()
            return self._until(due, now, began)
        except LeadershipLost:
            self.election.lost(epoch)
            return 0.0, False
        except StoreUnavailable as exc:
            wait = self._retry.next()
            log.debug("trigger failed: %s; retrying in %.2f s", exc, wait)  # logged once
            return wait, False
        except StoreError as exc:
            wait = self._retry.next()
            log.warning("trigger failed: %s; retrying in %.2f s", exc, wait)
            return wait, False
        except Exception:
            wait = self._retry.next()
            log.exception("trigger failed; retrying in %.2f s", wait)
            return wait, False

    def _until(self, due: datetime | None, now: datetime, began: float) -> tuple[float, bool]:
        """How long to sleep toward ``due``, the store's clock having read ``now`` in a call
        that began at ``began`` (monotonic)."""
        idle = self._idle()
        if due is None:
            return idle, False
        delay = self._sharpen(due, (due - now).total_seconds(), began)
        if delay > idle:
            return idle, False
        return max(0.0, delay), True

    def _sharpen(self, due: datetime, delay: float, began: float) -> float:
        """``delay`` (seconds to ``due`` by the store's clock as a call read it) less what
        has passed since, by the node's clock and its skew; but never less than ``delay``
        minus all the time since the call began (a clock that jumped since the last skew
        reading cannot make the timer run out much early). Unchanged under a test clock."""
        if self.clock.store_now() is not None:
            return delay
        earliest = self.election.skew.earliest_store_now()
        if earliest is None:
            return delay
        sharp = (due - earliest).total_seconds()
        floor = delay - (self.clock.monotonic() - began)
        return min(delay, max(sharp, floor))

    def _trigger(self, epoch: int) -> tuple[TriggerResult, float] | None:
        """Trigger batches back to back while they come back full; the last batch's result
        and when its call began (monotonic). None: stopped acting (leadership lapsed, a
        stop, or too many full batches in a row) before the end."""
        for _ in range(MAX_BATCHES):
            if self.stopping.is_set() or self.election.epoch() != epoch:
                return None
            began = self.clock.monotonic()
            result = self.store.trigger(
                epoch, limit=self.config.trigger_batch, now=self.clock.store_now()
            )
            self._log(epoch, result)
            if not result.batch_full:
                return result, began
        return None

    def _log(self, epoch: int, result: TriggerResult) -> None:
        if result.runs or result.jobs_advanced:
            # A one-off triggered ahead of its slot (ONE_OFF_LEAD) is not late: 0, not -100.
            lags = [(run.created_at - run.scheduled_for).total_seconds() for run in result.runs]
            lag = max([0.0, *lags])
            log.info(
                "trigger epoch=%d jobs=%d runs=%d max_lag_ms=%.1f",
                epoch,
                result.jobs_advanced,
                len(result.runs),
                lag * 1000,
            )
        for skip in result.skipped:
            log.info(
                "skip job=%d fate=%s slots=%d%s first=%s last=%s%s",
                skip.job_id,
                skip.fate,
                skip.count,
                "+" if skip.more else "",
                skip.first_slot.isoformat(),
                skip.last_slot.isoformat(),
                f" into_run={skip.run_id}" if skip.run_id is not None else "",
            )
        for run_id in result.cancelled_run_ids:
            log.info("cancel run=%d reason=overlap-replace", run_id)

    def _listen(self) -> None:
        """Wake the loop on CHANNEL_JOBS notifications until stopped. The listener
        re-listens by itself after a loss, and says so (a wake-up: re-plan now)."""
        slice_s = LISTEN_SLICE.total_seconds()
        try:
            self._listener = self.store.listener([CHANNEL_JOBS])
            self._wakeup.set()  # anything submitted before we listened: plan now
            while not self.stopping.is_set():
                try:
                    if self._listener.wait(slice_s):
                        self._wakeup.set()
                except Exception:
                    log.exception("trigger: listening failed; re-planning by polling")
                    self.clock.wait(
                        self.stopping,
                        self.clock.monotonic() + self.config.poll_interval.total_seconds(),
                    )
        except Exception:
            log.exception("trigger: cannot listen; re-planning by polling")
        finally:
            if self._listener is not None:
                _close_quietly(self._listener)


def _close_quietly(listener: Listener) -> None:
    try:
        listener.close()
    except Exception as exc:
        log.debug("trigger: closing the listener failed: %s", exc)
