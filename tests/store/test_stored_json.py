"""Conformance: a row whose JSON (args, a result) nests deeper than Python's decoder goes is
read all the same, with a placeholder, so that one such row cannot break a listing.

No tickwork path writes such a row (args nest 32 deep at most, and Python's encoder gives up
where its decoder does); another writer, or SQL by hand, can."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from urllib.parse import urlsplit

import psycopg

from tickwork.job import TOO_DEEP, JobSpec
from tickwork.schedule import Once
from tickwork.store import Store

DEPTH = 3000
"""Nesting past Python's recursion limit (1000): json.loads raises RecursionError."""


def write(store_url: str, statement: str, value: str, row_id: int) -> None:
    """``statement`` (parameters ``value`` and ``id``) straight on the database."""
    if store_url.startswith("sqlite:"):
        with sqlite3.connect(urlsplit(store_url).path) as conn:
            conn.execute(statement.replace("%(value)s", ":value").replace("%(id)s", ":id"),
                         {"value": value, "id": row_id})  # fmt: skip
        return
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute(statement, {"value": value, "id": row_id})


def test_json_nested_past_the_decoder_is_read_as_a_placeholder(
    store: Store, store_url: str
) -> None:
    deep = "[" * DEPTH + "]" * DEPTH
    submitted = store.submit(JobSpec(task="t", schedule=Once(delay=timedelta(0))))
    assert submitted.run is not None
    write(store_url, "UPDATE tickwork_jobs SET args = %(value)s WHERE id = %(id)s",
          '{"k": ' + deep + "}", submitted.job.id)  # fmt: skip
    write(store_url, "UPDATE tickwork_runs SET args = %(value)s, result = %(value)s "
          "WHERE id = %(id)s", '{"k": ' + deep + "}", submitted.run.id)  # fmt: skip

    job = store.get_job(submitted.job.id)
    (listed,) = store.list_jobs().items
    run = store.get_run(submitted.run.id)
    (claimed,) = store.claim("w1", limit=1)

    assert job.args == listed.args == {"value": TOO_DEEP}
    assert run.args == run.result == {"value": TOO_DEEP}
    assert claimed.args == {"value": TOO_DEEP}
