"""A ``ledger`` table in a store's own database: what a handler's side effect looks like
in the exactly-once tests (one row per execution that landed)."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg

CREATE = "CREATE TABLE ledger (run_id BIGINT NOT NULL, pid INTEGER NOT NULL)"


def placeholder(conn: Any) -> str:
    """The parameter mark of ``conn``'s driver."""
    return "?" if isinstance(conn, sqlite3.Connection) else "%s"


def insert(conn: Any, run_id: int, pid: int) -> None:
    mark = placeholder(conn)
    conn.execute(f"INSERT INTO ledger (run_id, pid) VALUES ({mark}, {mark})", (run_id, pid))


def connect(url: str) -> Any:
    """An autocommit connection of its own to the store ``url``'s database."""
    if url.startswith("sqlite:"):
        return sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=60)
    return psycopg.connect(url, autocommit=True)


class Ledger:
    """The table, read and written on connections of its own."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sql(CREATE)

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        conn = connect(self.url)
        try:
            cur = conn.execute(query)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
        finally:
            conn.close()

    def rows(self) -> list[tuple[int, int]]:
        return [(r[0], r[1]) for r in self.sql("SELECT run_id, pid FROM ledger ORDER BY run_id")]

    def counts(self) -> dict[int, int]:
        """Rows per run id."""
        found = self.sql("SELECT run_id, count(*) FROM ledger GROUP BY run_id")
        return {int(r[0]): int(r[1]) for r in found}
