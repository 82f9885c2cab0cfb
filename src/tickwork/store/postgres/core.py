"""What every part of :class:`~tickwork.store.postgres.PostgresStore` stands on: the driver
and its pool, the raw connections the hot paths take, and the claim's state between calls
(which path the next claim takes, and fair share's cursor).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from psycopg.rows import DictRow

from tickwork.store.postgres.driver import PgDriver
from tickwork.store.postgres.pool import POOL_MAX_SIZE, Conn
from tickwork.store.sql import SqlStore

DEFAULT_APPLICATION_NAME = "tickwork"
"""How tickwork's sessions show in ``pg_stat_activity`` unless told who they are."""


class PgCore(SqlStore):
    def __init__(
        self,
        url: str,
        *,
        migrate: bool = False,
        connect: bool = True,
        pool_size: int = POOL_MAX_SIZE,
        application_name: str = DEFAULT_APPLICATION_NAME,
    ) -> None:
        self.url = url
        driver = PgDriver(url, application_name, pool_size=pool_size)
        super().__init__(driver)
        self.health = driver.health
        self._pool = driver.pool
        self._handler_pool = driver.handler_pool
        # The hot paths below take connections straight from the driver, no Tx in between.
        self._conn: Callable[[], AbstractContextManager[Conn]] = driver.conn
        self._tx: Callable[[], AbstractContextManager[Conn]] = driver.tx
        self._limited = False
        """Whether the last claim found a limit or several tenants' runs: claims take the
        limited path."""
        self._others = False
        """Whether runs of a task the last claimer lacked were waiting: the next claim
        reads its own tasks apart (complete_then_claim_own) until that says none are."""
        self._after = ""
        """Fair share's cursor: the tenant this store's last limited claim reached."""
        if connect:  # fail now, not at the first call, if it cannot connect at all
            with self._conn():
                pass
        if migrate:
            self.migrate()

    def _all(self, query: str, params: dict[str, Any], *, binary: bool = False) -> list[DictRow]:
        with self._conn() as conn:
            return conn.execute(query, params, binary=binary).fetchall()
