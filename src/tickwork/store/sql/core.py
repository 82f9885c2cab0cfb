"""What every part of :class:`~tickwork.store.sql.SqlStore` stands on: a driver, its codec
and its queries."""

from __future__ import annotations

from collections.abc import Mapping

from tickwork.store.base import Store
from tickwork.store.driver import Codec, Driver


class SqlCore(Store):
    driver: Driver
    codec: Codec
    q: Mapping[str, str]
    """The dialect's named queries (its ``queries.sql``): the same names in each dialect."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.codec = driver.codec
        self.q = driver.queries
