"""In-process wake-ups for one SQLite file: SQLite has no LISTEN/NOTIFY.

Every store on the same file in one process shares one :class:`Signals`, so a submit or a
trigger wakes that process's sleepers at once (``tickwork run``); other processes poll.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from tickwork.store.base import Listener


class Signals:
    """A counter per channel, and a condition that wakes waiters when one moves."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.counts: dict[str, int] = {}

    def notify(self, *channels: str) -> None:
        if not channels:
            return
        with self.cond:
            for channel in channels:
                self.counts[channel] = self.counts.get(channel, 0) + 1
            self.cond.notify_all()


_SIGNALS: dict[str, Signals] = {}
_SIGNALS_LOCK = threading.Lock()


def signals_for(path: Path) -> Signals:
    key = str(path.resolve())
    with _SIGNALS_LOCK:
        return _SIGNALS.setdefault(key, Signals())


class SignalListener(Listener):
    def __init__(self, signals: Signals, channels: Sequence[str]) -> None:
        self.signals = signals
        self.channels = tuple(channels)
        with signals.cond:
            self.seen = self._total()

    def _total(self) -> int:
        return sum(self.signals.counts.get(c, 0) for c in self.channels)

    def wait(self, timeout: float) -> bool:
        with self.signals.cond:
            self.signals.cond.wait_for(lambda: self._total() != self.seen, max(timeout, 0))
            total = self._total()
            arrived = total != self.seen
            self.seen = total
            return arrived

    def close(self) -> None:
        pass
