"""Conformance: every store searches slots within the search budget (issue 23). A rule that
cannot fire is refused at submit and nothing is written; a calendar edit that would leave a
live job never firing is refused and nothing changes; a job whose next slot its search
cannot find is completed by the trigger, logged once, and the trigger goes on."""

from __future__ import annotations

import logging
import re
from datetime import UTC, date, datetime, timedelta

import pytest

from tickwork.calendar import make_calendar
from tickwork.errors import CalendarStrandsJobs, NeverFires
from tickwork.job import JobSpec, JobState
from tickwork.schedule import Cron
from tickwork.search import SEARCH_BUDGET
from tickwork.store import Store

T0 = datetime(2026, 12, 29, 12, tzinfo=UTC)  # a Tuesday

pytestmark = pytest.mark.timeout(60)


def job(expr: str, calendar: str = "x", name: str | None = None, **rules: object) -> JobSpec:
    schedule = Cron(expr, "UTC", calendar=calendar, **rules)  # type: ignore[arg-type]
    return JobSpec(task="tests.report", schedule=schedule, name=name)


def lead(store: Store, now: datetime) -> int:
    lease = store.acquire_leadership("test-leader", timedelta(days=30), now=now)
    assert lease is not None
    return lease.epoch


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            job("0 9 * 2 *", business_day=23),
            "cron '0 9 * 2 *' with calendar 'x' (the 23rd business day of the month) never "
            "fires: February has at most 21 business days in calendar x (weekend SAT,SUN)",
        ),
        (job("0 9 * * 6"), "cron '0 9 * * 6' with calendar 'x' (business days only) never"),
        (job("* * * * 6", name="minutely"), "cron '* * * * 6' with calendar 'x' (business"),
    ],
)
def test_a_rule_that_cannot_fire_is_refused_and_nothing_is_written(
    store: Store, spec: JobSpec, message: str
) -> None:
    store.create_calendar(make_calendar("x"), now=T0)
    with pytest.raises(NeverFires, match=re.escape(message)):
        store.submit(spec, now=T0)
    with pytest.raises(NeverFires, match=r"^job 1 of the batch: cron ") as caught:
        store.submit_many([job("0 9 * * *"), spec], now=T0)
    assert caught.value.index == 1
    with pytest.raises(NeverFires):
        store.put_schedule(JobSpec(task=spec.task, schedule=spec.schedule, name="n"), now=T0)
    assert store.list_jobs().items == []


def test_a_calendar_edit_that_strands_a_job_is_refused_and_changes_nothing(store: Store) -> None:
    store.create_calendar(make_calendar("x", weekend="SUN"), now=T0)
    saturday = store.submit(job("0 9 * * 6"), now=T0).job
    daily = store.submit(job("0 9 * * *"), now=T0).job
    paused = store.submit(job("0 9 * * 6", on_holiday="skip"), now=T0).job
    store.pause_job(paused.id, now=T0)
    paused = store.get_job(paused.id)

    with pytest.raises(CalendarStrandsJobs) as caught:
        store.update_calendar("x", weekend=frozenset({5, 6}), now=T0)

    assert caught.value.job_ids == [saturday.id, paused.id]
    assert f"job {saturday.id} (cron '0 9 * * 6' with calendar 'x' (business days only)" in str(
        caught.value
    )
    assert store.get_calendar("x").calendar.weekend == frozenset({6})
    assert [store.get_job(j.id) for j in (saturday, daily, paused)] == [saturday, daily, paused]

    # Once the jobs that would never fire are cancelled, the edit goes through.
    store.cancel_job(saturday.id, now=T0)
    store.cancel_job(paused.id, now=T0)
    change = store.update_calendar("x", weekend=frozenset({5, 6}), now=T0)
    assert change.replanned == [daily.id]


def test_a_job_whose_next_slot_the_search_cannot_find_is_finished_and_logged_once(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # Every weekday closed for longer than the budget can walk, from 2027 on.
    years = SEARCH_BUDGET // 200 + 10
    days = (date(2027, 1, 1) + timedelta(days=k) for k in range(366 * years))
    closed = [d.isoformat() for d in days if d.weekday() < 5]
    store.create_calendar(make_calendar("closed", add=closed), now=T0)
    stuck = store.submit(job("0 9 * * *", calendar="closed"), now=T0).job
    store.create_calendar(make_calendar("x"), now=T0)
    fine = store.submit(job("0 9 * * *"), now=T0).job
    assert stuck.next_run_at == datetime(2026, 12, 30, 9, tzinfo=UTC)
    epoch = lead(store, T0)

    first = store.trigger(epoch, now=datetime(2026, 12, 30, 9, 0, 1, tzinfo=UTC))
    with caplog.at_level(logging.WARNING, logger="tickwork.scheduler"):
        last = store.trigger(epoch, now=datetime(2026, 12, 31, 9, 0, 1, tzinfo=UTC))
        again = store.trigger(epoch, now=datetime(2027, 1, 1, 9, 0, 1, tzinfo=UTC))

    assert {r.job_id for r in first.runs} == {stuck.id, fine.id}
    assert {r.job_id for r in last.runs} == {stuck.id, fine.id}  # its due slot still ran
    assert [r.job_id for r in again.runs] == [fine.id]
    done = store.get_job(stuck.id)
    assert (done.state, done.next_run_at) == (JobState.FINISHED, None)
    assert store.get_job(fine.id).next_run_at == datetime(2027, 1, 4, 9, tzinfo=UTC)
    lines = [r.getMessage() for r in caplog.records if f"job={stuck.id}" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"trigger completed job={stuck.id}: cron '0 9 * * *' with calendar 'closed' (business "
        f"days only) finds no slot within the search budget ({SEARCH_BUDGET:,} days and slots "
        "examined, to 20"
    )
