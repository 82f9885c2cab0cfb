"""A 503 says what happened: a store that did not answer in time (every pooled connection
busy, a statement or lock timeout: load) is not a database that cannot be reached (an
outage), and the answer says which. Both are ``store_unavailable``, with a JSON body and a
``Retry-After``; the dashboard's page says the same."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import psycopg
import pytest
from api_support import bearer, error_of
from fastapi.testclient import TestClient

from tickwork.client import Client
from tickwork.store import open_store
from tickwork.web.app import create_app

LOCK_TIMEOUT = "300ms"


def retry_after(answer: object) -> int:
    value = answer.headers["retry-after"]  # type: ignore[attr-defined]
    assert value.isdigit(), value
    return int(value)


@contextmanager
def jobs_table_locked(url: str) -> Iterator[None]:
    """Another session holds the jobs table, as a long migration or a stuck transaction
    would: every statement on it waits for the lock."""
    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute("LOCK TABLE tickwork_jobs IN ACCESS EXCLUSIVE MODE")
        yield


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """A PostgreSQL store whose sessions give up on a lock after LOCK_TIMEOUT (as an
    operator sets ``lock_timeout`` or ``statement_timeout`` on tickwork's role)."""
    dbname = pg_database.rsplit("/", 1)[1]
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE \"{dbname}\" SET lock_timeout = '{LOCK_TIMEOUT}'")
    return pg_database


def test_a_lock_timeout_is_a_503_saying_the_store_did_not_answer_in_time(pg_url: str) -> None:
    with Client(open_store(pg_url)) as client:
        _, key = client.create_api_key(tenant="ops", admin=True)
        with TestClient(create_app(client, open_access=False), headers=bearer(key)) as web:
            with jobs_table_locked(pg_url):
                answer = web.get("/api/v1/jobs")
                page = _page(web, "/jobs")
            after = web.get("/api/v1/jobs")

    assert answer.status_code == 503
    error = error_of(answer)
    assert error["code"] == "store_unavailable"
    assert "did not answer in time" in error["message"]
    assert "cannot be reached" not in error["message"]
    assert retry_after(answer) >= 1
    assert page == (503, "did not answer in time")
    assert after.status_code == 200


def test_a_pool_that_stays_exhausted_is_a_503_saying_the_store_did_not_answer_in_time(
    pg_database: str,
) -> None:
    with Client(open_store(pg_database)) as client:
        _, key = client.create_api_key(tenant="ops", admin=True)
        pool = client.store.driver.pool  # type: ignore[attr-defined]
        pool.wait = 0.3  # the pool's wait for a free connection, shortened for the test
        with (
            TestClient(create_app(client, open_access=False), headers=bearer(key)) as web,
            ExitStack() as held,  # every connection of the pool in use elsewhere
        ):
            for _ in range(pool.max_size):
                held.enter_context(pool.connection())
            answer = web.get("/api/v1/runs")

    assert answer.status_code == 503
    error = error_of(answer)
    assert error["code"] == "store_unavailable"
    assert "did not answer in time" in error["message"]
    assert retry_after(answer) >= 1


def test_a_store_that_cannot_be_reached_is_a_503_saying_so(store_url: str) -> None:
    with Client(open_store(store_url)) as client:
        _, key = client.create_api_key(tenant="ops", admin=True)
    down = Client(open_store(store_url))
    down.close()

    with TestClient(create_app(down, open_access=False), headers=bearer(key)) as web:
        answer = web.get("/api/v1/jobs")
        page = _page(web, "/jobs")
        ready = web.get("/readyz")

    assert answer.status_code == 503
    error = error_of(answer)
    assert error["code"] == "store_unavailable"
    assert "cannot be reached" in error["message"]
    assert "did not answer in time" not in error["message"]
    assert "closed" not in error["message"]  # details stay in the server's log
    assert retry_after(answer) >= 1
    assert page == (503, "cannot be reached")
    assert ready.status_code == 503
    assert retry_after(ready) >= 1


def _page(web: TestClient, path: str) -> tuple[int, str]:
    """A dashboard page's status and which of the two 503 messages it shows."""
    answer = web.get(path)
    text = answer.text
    said = next(
        (words for words in ("did not answer in time", "cannot be reached") if words in text),
        "neither",
    )
    if answer.status_code == 503:
        assert retry_after(answer) >= 1
    return answer.status_code, said
