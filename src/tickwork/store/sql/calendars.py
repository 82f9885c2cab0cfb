"""Calendars, written once for every dialect: create, update (re-planning the jobs that use
the calendar, in the same transaction), read, list, delete; and the binding of a job's
schedule to the calendar it names, which every job write does."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import date, datetime
from typing import Any

from tickwork import schedule as schedules
from tickwork.calendar import Calendar, calendar_from_definition
from tickwork.errors import (
    CalendarInUse,
    CalendarNotFound,
    CalendarStrandsJobs,
    UnknownCalendar,
    ValidationError,
)
from tickwork.job import JobSpec
from tickwork.store import rows
from tickwork.store.base import CHANNEL_JOBS, KEEP, CalendarChange, CalendarRecord, Keep
from tickwork.store.sql.core import SqlCore


def bind_calendar(spec: JobSpec, lookup: Callable[[str], Any]) -> JobSpec:
    """``spec`` with its schedule's calendar definition read by ``lookup`` (the calendar's
    row, or None), in the transaction that writes the job: a job never names a calendar
    that is not there. UnknownCalendar when it is not."""
    found = spec.schedule
    if not isinstance(found, schedules.Cron) or found.calendar is None:
        return spec
    row = lookup(found.calendar)
    if row is None:
        raise UnknownCalendar(found.calendar)
    calendar = calendar_from_definition(row["name"], row["definition"])
    return JobSpec(**{**_spec_fields(spec), "schedule": found.bind(calendar)})


def _edited(
    calendar: Calendar,
    *,
    country: str | Keep | None = KEEP,
    subdiv: str | Keep | None = KEEP,
    weekend: frozenset[int] | Keep = KEEP,
    add: Collection[date] = (),
    remove: Collection[date] = (),
) -> Calendar:
    """``calendar`` changed as :meth:`~tickwork.store.base.Store.update_calendar` says;
    InvalidCalendar (from :class:`Calendar`) when the result is not one."""
    added, removed = set(add), set(remove)
    if subdiv is KEEP and country is not KEEP:
        subdiv = None  # a new country: the old region was the old country's
    return Calendar(
        calendar.name,
        calendar.country if country is KEEP else country,
        calendar.subdiv if subdiv is KEEP else subdiv,
        calendar.weekend if weekend is KEEP else weekend,
        tuple((set(calendar.added) - removed) | added),
        tuple((set(calendar.removed) - added) | removed),
    )


def _spec_fields(spec: JobSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in JobSpec.__dataclass_fields__}


class CalendarTransitions(SqlCore):
    def create_calendar(self, calendar: Calendar, *, now: datetime | None = None) -> CalendarRecord:
        with self.driver.write() as tx:
            t = self.codec.time(tx.now(now))
            params = {"name": calendar.name, "definition": calendar.definition(), "now": t}
            row = tx.one(self.q["insert_calendar"], params)
        if row is None:
            raise ValidationError(
                f"calendar {calendar.name!r} exists (change it with: tickwork calendars "
                f"update {calendar.name} ...)",
                field="name",
            )
        return self._record(row)

    def update_calendar(
        self,
        name: str,
        *,
        country: str | Keep | None = KEEP,
        subdiv: str | Keep | None = KEEP,
        weekend: frozenset[int] | Keep = KEEP,
        add: Collection[date] = (),
        remove: Collection[date] = (),
        now: datetime | None = None,
    ) -> CalendarChange:
        time = self.codec.time
        with self.driver.write() as tx:
            t = tx.now(now)
            # Hazard: the row is held from here to the commit (FOR UPDATE; SQLite's write
            # lock), so a concurrent edit merges into this one's result, never into the
            # calendar as both read it.
            stored = tx.one(self.q["calendar_for_update"], {"name": name})
            if stored is None:
                raise CalendarNotFound(name)
            calendar = _edited(
                calendar_from_definition(name, stored["definition"]),
                country=country,
                subdiv=subdiv,
                weekend=weekend,
                add=add,
                remove=remove,
            )
            params = {"name": name, "definition": calendar.definition(), "now": time(t)}
            row = tx.one(self.q["update_calendar"], params)
            assert row is not None  # the row is held
            replanned = []
            stranded: list[tuple[int, str]] = []
            for job_row in tx.all(self.q["live_jobs_of_calendar"], {"name": calendar.name}):
                job = rows.job(job_row, self.codec)
                assert isinstance(job.schedule, schedules.Cron)
                bound = job.schedule.bind(calendar)
                found = bound.search(t)
                if found.slot is None:
                    # No slot to come (or none its search finds): refused, not completed
                    # behind the operator's back. The transaction rolls back.
                    stranded.append((job.id, str(bound.no_slot(t, found))))
                    continue
                due = job.next_run_at is not None and job.next_run_at <= t
                tx.count(
                    self.q["replan_job"],
                    {
                        "id": job.id,
                        "schedule": self.codec.schedule(bound),
                        "next_run_at": time(job.next_run_at if due else found.slot),
                        "state": rows.schedule_state(job_row),
                        "now": time(t),
                    },
                )
                replanned.append(job.id)
            if stranded:
                raise CalendarStrandsJobs(calendar.name, stranded)
            if replanned:
                tx.notify(CHANNEL_JOBS)
        return CalendarChange(self._record(row), replanned)

    def get_calendar(self, name: str) -> CalendarRecord:
        with self.driver.read() as tx:
            row = tx.one(self.q["get_calendar"], {"name": name})
        if row is None:
            raise CalendarNotFound(name)
        return self._record(row)

    def list_calendars(self) -> list[CalendarRecord]:
        with self.driver.read() as tx:
            return [self._record(r) for r in tx.all(self.q["list_calendars"], {})]

    def calendar_jobs(self, name: str) -> list[int]:
        with self.driver.read() as tx:
            return [r["id"] for r in tx.all(self.q["live_jobs_of_calendar_ids"], {"name": name})]

    def delete_calendar(self, name: str) -> None:
        with self.driver.write() as tx:
            # The row first: a submit binding the calendar holds it shared until it commits,
            # so its job is among the users read next, or it finds the calendar gone.
            tx.one(self.q["calendar_for_update"], {"name": name})
            users = [r["id"] for r in tx.all(self.q["live_jobs_of_calendar"], {"name": name})]
            if users:
                raise CalendarInUse(name, users)
            if tx.one(self.q["delete_calendar"], {"name": name}) is None:
                raise CalendarNotFound(name)

    def _record(self, row: Any) -> CalendarRecord:
        return CalendarRecord(
            calendar_from_definition(row["name"], row["definition"]),
            self.codec.from_time(row["created_at"]),
            self.codec.from_time(row["updated_at"]),
        )
