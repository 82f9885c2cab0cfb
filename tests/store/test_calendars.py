"""Conformance: calendars (create, update re-planning their jobs in one transaction, read,
delete refused while in use) and jobs that name one, on every store."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast

import pytest

from tickwork.calendar import make_calendar
from tickwork.client import Client
from tickwork.errors import (
    CalendarInUse,
    CalendarNotFound,
    InvalidCalendar,
    UnknownCalendar,
    ValidationError,
)
from tickwork.job import JobSpec, JobState
from tickwork.schedule import Cron
from tickwork.store import Store, open_store

T0 = datetime(2026, 12, 22, 12, tzinfo=UTC)  # a Tuesday, before Christmas
BERLIN_NINE_ON_24TH = datetime(2026, 12, 24, 8, tzinfo=UTC)
BERLIN_NINE_ON_28TH = datetime(2026, 12, 28, 8, tzinfo=UTC)


def daily(calendar: str = "de-by", name: str = "report", **rules: object) -> JobSpec:
    rules.setdefault("on_holiday", "next-business-day")
    schedule = Cron("0 9 * * *", "Europe/Berlin", calendar=calendar, **rules)  # type: ignore[arg-type]
    return JobSpec(task="tests.report", schedule=schedule, name=name)


@pytest.fixture
def de_by(store: Store) -> None:
    store.create_calendar(make_calendar("de-by", country="DE", subdiv="BY"), now=T0)


def lead(store: Store, now: datetime) -> int:
    lease = store.acquire_leadership("test-leader", timedelta(days=30), now=now)
    assert lease is not None
    return lease.epoch


@pytest.mark.usefixtures("de_by")
def test_created_calendar_reads_back_and_lists(store: Store) -> None:
    record = store.get_calendar("de-by")
    assert record.calendar == make_calendar("de-by", country="DE", subdiv="BY")
    assert record.created_at == record.updated_at == T0
    store.create_calendar(make_calendar("at", country="AT"), now=T0)
    assert [r.calendar.name for r in store.list_calendars()] == ["at", "de-by"]


@pytest.mark.usefixtures("de_by")
def test_a_taken_name_is_refused_and_the_calendar_unchanged(store: Store) -> None:
    with pytest.raises(ValidationError, match="calendar 'de-by' exists"):
        store.create_calendar(make_calendar("de-by", country="FR"), now=T0)
    assert store.get_calendar("de-by").calendar.country == "DE"


def test_unknown_calendars_are_not_found(store: Store) -> None:
    with pytest.raises(CalendarNotFound):
        store.get_calendar("nope")
    with pytest.raises(CalendarNotFound):
        store.update_calendar("nope", add=[date(2026, 12, 24)], now=T0)
    with pytest.raises(CalendarNotFound):
        store.delete_calendar("nope")


def test_a_job_naming_an_unknown_calendar_is_refused_and_nothing_is_written(
    store: Store,
) -> None:
    with pytest.raises(UnknownCalendar, match="unknown calendar 'nope'"):
        store.submit(daily("nope"), now=T0)
    with pytest.raises(UnknownCalendar):
        store.put_schedule(daily("nope"), now=T0)
    assert store.list_jobs().items == []


@pytest.mark.usefixtures("de_by")
def test_a_job_carries_its_calendar_and_plans_with_it(store: Store) -> None:
    job = store.put_schedule(daily(), now=T0).job
    assert isinstance(job.schedule, Cron)
    assert job.schedule.calendar_def == store.get_calendar("de-by").calendar
    assert job.next_run_at == datetime(2026, 12, 23, 8, tzinfo=UTC)
    # The same declaration again changes nothing.
    again = store.put_schedule(daily(), now=T0 + timedelta(seconds=1))
    assert again.job == job


@pytest.mark.usefixtures("de_by")
def test_editing_a_calendar_replans_its_jobs_in_the_same_call(store: Store) -> None:
    job = store.put_schedule(daily(), now=T0 + timedelta(days=1, hours=12)).job
    assert job.next_run_at == BERLIN_NINE_ON_24TH
    other = store.put_schedule(daily(name="other", on_holiday="skip"), now=T0).job
    store.pause_job(other.id, now=T0)

    change = store.update_calendar(
        "de-by", add=[date(2026, 12, 24)], now=T0 + timedelta(days=1, hours=12)
    )

    assert sorted(change.replanned) == sorted([job.id, other.id])
    replanned = store.get_job(job.id)
    assert replanned.next_run_at == BERLIN_NINE_ON_28TH  # the 24th is off now
    assert isinstance(replanned.schedule, Cron)
    assert replanned.schedule.calendar_def == change.record.calendar
    assert store.get_job(other.id).state is JobState.PAUSED


@pytest.mark.usefixtures("de_by")
def test_an_edit_changes_what_it_names_and_keeps_the_rest(store: Store) -> None:
    store.update_calendar("de-by", add=[date(2026, 12, 24), date(2026, 12, 31)], now=T0)
    change = store.update_calendar(
        "de-by", remove=[date(2026, 12, 31), date(2026, 12, 26)], now=T0 + timedelta(hours=1)
    )
    calendar = change.record.calendar
    assert calendar.added == (date(2026, 12, 24),)  # a removed date is no longer added
    assert calendar.removed == (date(2026, 12, 26), date(2026, 12, 31))
    assert (calendar.country, calendar.subdiv, calendar.weekend) == ("DE", "BY", {5, 6})
    assert change.record.updated_at == T0 + timedelta(hours=1)

    moved = store.update_calendar("de-by", country="AT", now=T0).record.calendar
    assert (moved.country, moved.subdiv) == ("AT", None)  # BY was Germany's
    assert moved.added == (date(2026, 12, 24),)
    cleared = store.update_calendar("de-by", country=None, subdiv=None, now=T0).record.calendar
    assert (cleared.country, cleared.subdiv) == (None, None)


@pytest.mark.usefixtures("de_by")
def test_an_edit_that_leaves_no_calendar_is_refused_and_writes_nothing(store: Store) -> None:
    before = store.get_calendar("de-by")
    with pytest.raises(InvalidCalendar, match="both added and removed"):
        store.update_calendar(
            "de-by", add=[date(2026, 12, 24)], remove=[date(2026, 12, 24)], now=T0
        )
    with pytest.raises(InvalidCalendar):
        store.update_calendar("de-by", subdiv="XX", now=T0)
    assert store.get_calendar("de-by") == before


@pytest.mark.usefixtures("de_by")
def test_the_trigger_runs_the_moved_slot_and_none_on_the_holiday(store: Store) -> None:
    store.update_calendar("de-by", add=[date(2026, 12, 24)], now=T0)
    job = store.put_schedule(daily(), now=T0 + timedelta(days=1, hours=12)).job
    assert job.next_run_at == BERLIN_NINE_ON_28TH
    epoch = lead(store, T0)

    result = store.trigger(epoch, now=BERLIN_NINE_ON_28TH + timedelta(seconds=1))

    assert [r.scheduled_for for r in result.runs] == [BERLIN_NINE_ON_28TH]
    assert store.get_job(job.id).next_run_at == datetime(2026, 12, 29, 8, tzinfo=UTC)


@pytest.mark.usefixtures("de_by")
def test_a_calendar_in_use_is_not_deleted_and_the_error_names_the_jobs(store: Store) -> None:
    job = store.put_schedule(daily(), now=T0).job
    with pytest.raises(CalendarInUse, match=rf"1 job\(s\) use it \({job.id}\)") as caught:
        store.delete_calendar("de-by")
    assert caught.value.job_ids == [job.id]
    assert store.calendar_jobs("de-by") == [job.id]
    assert store.get_calendar("de-by").calendar.name == "de-by"

    store.cancel_job(job.id, now=T0)  # a cancelled job keeps its copy and needs none
    store.delete_calendar("de-by")
    with pytest.raises(CalendarNotFound):
        store.get_calendar("de-by")
    assert store.calendar_jobs("de-by") == []


class Together:
    """``store``, except that once armed each thread's first call waits until ``barrier``'s
    other threads have made theirs: concurrent edits overlap as much as they can (the real
    store underneath)."""

    def __init__(self, store: Store, barrier: threading.Barrier) -> None:
        self._store = store
        self._barrier = barrier
        self._started = threading.local()
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.armed and not getattr(self._started, "done", False):
                self._started.done = True
                self._barrier.wait()
            return found(*args, **kwargs)

        return call


def concurrently(*edits: Callable[[], object]) -> None:
    errors: list[BaseException] = []

    def run(edit: Callable[[], object]) -> None:
        try:
            edit()
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(edit,)) for edit in edits]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors


@pytest.mark.usefixtures("de_by")
def test_two_concurrent_edits_of_a_calendar_are_both_kept(store_url: str) -> None:
    stores = [open_store(store_url) for _ in range(2)]
    try:
        barrier = threading.Barrier(2, timeout=5)
        together = [Together(s, barrier) for s in stores]
        first, second = (Client(cast(Store, s)) for s in together)
        for s in together:
            s.armed = True
        concurrently(
            lambda: first.update_calendar("de-by", add=["2026-12-23"]),
            lambda: second.update_calendar("de-by", add=["2026-12-30"], weekend="FRI,SAT"),
        )
        calendar = stores[0].get_calendar("de-by").calendar
    finally:
        for s in stores:
            s.close()
    assert calendar.added == (date(2026, 12, 23), date(2026, 12, 30))
    assert calendar.weekend == frozenset({4, 5})
    assert (calendar.country, calendar.subdiv) == ("DE", "BY")
