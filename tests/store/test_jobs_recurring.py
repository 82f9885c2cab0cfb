"""Conformance: jobs listed by whether they recur (cron, interval) or run once, so a list
of many one-off jobs cannot bury the recurring ones (the dashboard's Jobs filter)."""

from __future__ import annotations

from datetime import datetime, timedelta

from tickwork.job import JobSpec
from tickwork.schedule import Cron, Interval, Once
from tickwork.store import Store


def test_jobs_are_listed_recurring_or_one_off(store: Store, t0: datetime) -> None:
    cron = store.submit(JobSpec(task="t", schedule=Cron(expr="0 9 * * *")), now=t0).job
    every = store.submit(
        JobSpec(task="t", schedule=Interval(every=timedelta(minutes=5))), now=t0
    ).job
    once = [
        store.submit(JobSpec(task="t", schedule=Once(at=t0 + timedelta(hours=1))), now=t0).job
        for _ in range(3)
    ]

    recurring = store.list_jobs(recurring=True, limit=2)
    assert [j.id for j in recurring.items] == [every.id, cron.id]
    one_off = store.list_jobs(recurring=False)
    assert [j.id for j in one_off.items] == [j.id for j in reversed(once)]
    assert len(store.list_jobs().items) == 5
