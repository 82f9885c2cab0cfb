"""What every part of :class:`~tickwork.store.sqlite.SqliteStore` stands on: the driver (a
connection per thread, the write lock), the in-process signals, and fair share's cursor.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import cast

from tickwork.errors import StoreMissing
from tickwork.store.health import StoreHealth
from tickwork.store.sql import SqlStore
from tickwork.store.sqlite.driver import SqliteDriver, path_from_url


def _holds_a_database(path: Path) -> bool:
    """Whether ``path`` is a file with something in it (SQLite takes an empty file for a new
    database, and its first write would make it one)."""
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


class SqliteCore(SqlStore):
    def __init__(self, url: str, *, migrate: bool | None = None, create: bool = True) -> None:
        """``create``: see :func:`tickwork.store.open_store`; False opens an existing file
        only (StoreMissing, and nothing made, for a missing or empty one)."""
        self.url = url
        self.path = path_from_url(url)
        if not create and not _holds_a_database(self.path):
            raise StoreMissing(str(self.path.resolve()), url)
        self.sqlite = SqliteDriver(url, self.path, create=create)
        super().__init__(self.sqlite)
        # A file on this host has no outages to tell: a busy write lock is contention, and
        # the callers' own retries cover it.
        self.health = StoreHealth(url)
        self._signals = self.sqlite.signals
        self._write = self.sqlite.transaction
        self._after = ""
        """Fair share's cursor: the tenant this store's last limited claim reached."""
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        if migrate or (migrate is None and fresh):
            self.migrate()

    def _now(self, now: datetime | None) -> int:
        return cast(int, self.sqlite.at(now))
