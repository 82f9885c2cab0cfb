"""Fixtures of the node tests (their helpers are in worker_support.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from worker_support import make_app

from tickwork.app import App
from tickwork.store import Store


@pytest.fixture
def app(store: Store) -> Iterator[App]:
    """An App on the test's store with the fast worker timings, closed after the test."""
    application = make_app(store)
    yield application
    application.close()
