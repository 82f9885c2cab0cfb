"""Fixtures of the fault tests: a cluster of real worker processes on the test's store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from worker_procs import Cluster


@pytest.fixture
def cluster(store_url: str, tmp_path: Path) -> Iterator[Cluster]:
    """Worker processes started by the test, all killed at its end whatever happened."""
    started = Cluster(store_url, tmp_path)
    try:
        yield started
    finally:
        started.kill_all()
