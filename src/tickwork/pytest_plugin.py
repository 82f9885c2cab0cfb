"""The pytest plugin of :mod:`tickwork.testing` (registered by the ``pytest11`` entry point,
so installing tickwork is enough).

Fixtures
    ``tickwork_clock``: a :class:`~tickwork.testing.FakeClock` at a fixed instant
    (:data:`START`); override the fixture to start elsewhere.

    ``tickwork_store_url``: a store of the test's own: a SQLite file in ``tmp_path``; or,
    when ``TICKWORK_TESTING_PG_URL`` names a PostgreSQL database, a fresh database made on
    that server (created, migrated, dropped after the test; the URL's role needs
    ``CREATEDB``). A handler that runs its own SQL in ``ctx.transaction()`` needs the
    PostgreSQL store: on SQLite its block gets a ``sqlite3`` connection.

    ``tickwork_app``: an :class:`~tickwork.App` on that store and clock, closed after the
    test. Register your tasks on it, or override it to return your own app (then build it
    on ``tickwork_store_url`` and ``tickwork_clock``).

    ``tickwork_kit``: a :class:`~tickwork.testing.TickworkTestKit` on ``tickwork_app``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tickwork.app import App
from tickwork.client import Client
from tickwork.testing import FakeClock, TickworkTestKit

PG_URL_ENV = "TICKWORK_TESTING_PG_URL"
"""The environment variable naming a PostgreSQL server's database to make test databases
from (``postgresql://user@host:5432/postgres``); unset or empty: SQLite."""
START = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)
"""Where ``tickwork_clock`` starts: a Monday, 09:00 UTC."""


@pytest.fixture
def tickwork_clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def tickwork_store_url(tmp_path: Path) -> Iterator[str]:
    base = os.environ.get(PG_URL_ENV, "").strip()
    if not base:
        yield f"sqlite:///{tmp_path / 'tickwork.db'}"
        return
    import psycopg

    name = f"tickwork_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(base)
    url = urlunsplit(parts._replace(path=f"/{name}"))
    try:
        with Client.open(url, migrate=True, create=True):
            pass
        yield url
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def tickwork_app(tickwork_store_url: str, tickwork_clock: FakeClock) -> Iterator[App]:
    app = App(tickwork_store_url, clock=tickwork_clock)
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def tickwork_kit(tickwork_app: App, tickwork_clock: FakeClock) -> Iterator[TickworkTestKit]:
    kit = TickworkTestKit(tickwork_app, tickwork_clock)
    try:
        yield kit
    finally:
        kit.close()
