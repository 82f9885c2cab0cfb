"""The one shape of every long-running loop: start, signal started, stop idempotently.

A :class:`Service` runs :meth:`Service.run` in its own daemon thread. ``run`` loops until
``self.stopping`` is set, ending each pass with :meth:`Service.pause`: a wait on the
service's clock until a deadline or an event (``self.stopping``, or a wake-up event that
:meth:`stop` also sets), so that :meth:`stop` interrupts it at once and a test's
:class:`~tickwork.testing.FakeClock` moves it on. Each subclass's docstring header says
what it does, how often, and whether it is leader-only.

Passes are counted: :attr:`Service.passes` is how many passes have ended, and
:meth:`Service.wait_passes` lets a test wait for "three rescue passes done" instead of
sleeping and hoping the loop ran.

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

from tickwork.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("tickwork")


class Service:
    name = "service"

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.stopping = threading.Event()
        self.started = threading.Event()
        self.passes = 0
        """Passes of the loop ended so far (see :meth:`pause`)."""
        self._passed = threading.Condition()
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

    def pause(self, event: threading.Event, timeout: float | None) -> bool:
        """End a pass: count it, then wait on the clock until ``event`` is set or ``timeout``
        seconds (None: no limit) have passed. Returns whether ``event`` is set.

        The deadline is fixed before the pass is counted, so a test that saw the count
        and then moved a fake clock is sure to move this wait."""
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        self.end_pass()
        return self.clock.wait(event, deadline)

    def end_pass(self) -> None:
        """Count a pass that ends without a wait (the loop goes straight on)."""
        with self._passed:
            self.passes += 1
            self._passed.notify_all()

    def wait_passes(self, n: int, timeout: float = 10.0) -> int:
        """Block until at least ``n`` passes have ended in all (not ``n`` more); return the
        count. Raises TimeoutError after ``timeout`` real seconds."""
        with self._passed:
            if not self._passed.wait_for(lambda: self.passes >= n, timeout):
                raise TimeoutError(
                    f"{self.name}: {self.passes} passes ended within {timeout:g} s, not {n}"
                )
            return self.passes

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
