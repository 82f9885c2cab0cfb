"""PostgresStore, composed of its parts (see the package's docstring)."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.store.base import LISTEN_NOTIFY, MULTI_HOST, SKIP_LOCKED, Listener
from tickwork.store.postgres.listener import PgListener
from tickwork.store.postgres.runs import PgRuns
from tickwork.store.postgres.schema import PgSchema
from tickwork.store.postgres.submit import PgSubmit
from tickwork.store.postgres.trigger import PgTrigger


class PostgresStore(PgSchema, PgSubmit, PgTrigger, PgRuns):
    capabilities = frozenset({LISTEN_NOTIFY, SKIP_LOCKED, MULTI_HOST})

    def listener(self, channels: Sequence[str]) -> Listener:
        return PgListener(self._pool, channels)
