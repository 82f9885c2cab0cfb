"""``serve_until_signal``: the signal handler takes no lock.

A Python signal handler runs in the main thread between two of its bytecodes, possibly
while that thread holds a lock; a handler that takes the same lock (``Event.set()``
takes its condition's) waits for itself for ever. A hung ``tickwork run`` after SIGTERM
was seen once in CI. Here ``stop()`` holds a lock when the second signal comes, and
``hurry()`` needs it: called from the handler it could never get it.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from tickwork.cli.serve import StopWait, serve_until_signal


def test_a_second_signal_hurries_a_stop_that_holds_the_lock_hurry_needs() -> None:
    lock = threading.Lock()
    hurried = threading.Event()
    starved: list[str] = []
    stopped: list[bool] = []

    def start(wait: StopWait) -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    def stop() -> None:
        with lock:
            os.kill(os.getpid(), signal.SIGTERM)  # the second signal: hurry
            time.sleep(0.2)  # still holding the lock when a handler runs
        stopped.append(hurried.wait(5.0))

    def hurry() -> None:
        if lock.acquire(timeout=2.0):
            hurried.set()
            lock.release()
        else:
            starved.append(threading.current_thread().name)

    before = signal.getsignal(signal.SIGTERM)
    serve_until_signal(start, stop, hurry=hurry)

    assert starved == []
    assert stopped == [True]
    assert signal.getsignal(signal.SIGTERM) is before  # restored


def test_a_signal_during_start_stops_right_after_it() -> None:
    calls: list[str] = []

    def start(wait: StopWait) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        calls.append("started")

    serve_until_signal(start, lambda: calls.append("stopped"))

    assert calls == ["started", "stopped"]


def test_a_start_that_waits_is_woken_by_a_signal_and_stop_follows() -> None:
    """A start waiting for the database (``wait``) hears SIGTERM at once, not at the end of
    its wait, and the stop still runs."""
    calls: list[str] = []

    def start(wait: StopWait) -> None:
        assert wait(0.01) is False  # no signal yet: the wait just passes
        os.kill(os.getpid(), signal.SIGTERM)
        began = time.monotonic()
        assert wait(30.0) is True
        calls.append(f"woken after {time.monotonic() - began < 5}")

    serve_until_signal(start, lambda: calls.append("stopped"))

    assert calls == ["woken after True", "stopped"]
