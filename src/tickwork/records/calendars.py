"""A stored calendar, and what editing one did."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tickwork.calendar import Calendar


@dataclass(frozen=True, slots=True)
class CalendarRecord:
    """A stored calendar: its definition and when it was created and last changed."""

    calendar: Calendar
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class CalendarChange:
    """What editing a calendar did: the calendar as stored, and the jobs re-planned."""

    record: CalendarRecord
    replanned: list[int]
