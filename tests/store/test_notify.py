"""Conformance: notifications wake sleepers in other processes (stores with LISTEN_NOTIFY)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from tickwork.job import JobSpec
from tickwork.schedule import Once
from tickwork.store import Store, open_store
from tickwork.store.base import CHANNEL_JOBS, CHANNEL_RUNS, LISTEN_NOTIFY


def test_a_due_submit_wakes_a_listener_on_the_runs_channel(store: Store, store_url: str) -> None:
    if LISTEN_NOTIFY not in store.capabilities:
        pytest.skip("this store has no notifications: its sleepers poll")
    listener = store.listener([CHANNEL_RUNS])
    try:
        assert listener.wait(0.05) is False
        other = open_store(store_url)
        try:
            other.submit(JobSpec(task="t", schedule=Once(delay=timedelta(0))))
        finally:
            other.close()
        assert listener.wait(5.0) is True
        assert listener.wait(0.05) is False  # drained
    finally:
        listener.close()


def test_a_listener_with_nothing_to_hear_waits_out_its_timeout(store: Store) -> None:
    listener = store.listener([CHANNEL_JOBS])
    try:
        started = time.monotonic()
        assert listener.wait(0.2) is False
        assert time.monotonic() - started >= 0.15
    finally:
        listener.close()
        listener.close()  # idempotent
