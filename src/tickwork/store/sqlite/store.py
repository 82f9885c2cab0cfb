"""SqliteStore, composed of its parts (see the package's docstring)."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.store.base import Listener
from tickwork.store.sqlite.runs import SqliteRuns
from tickwork.store.sqlite.schema import SqliteSchema
from tickwork.store.sqlite.signals import SignalListener
from tickwork.store.sqlite.submit import SqliteSubmit
from tickwork.store.sqlite.trigger import SqliteTrigger


class SqliteStore(SqliteSchema, SqliteSubmit, SqliteTrigger, SqliteRuns):
    capabilities = frozenset()

    def listener(self, channels: Sequence[str]) -> Listener:
        return SignalListener(self._signals, channels)
