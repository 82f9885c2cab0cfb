"""explain's slot arithmetic, pure: which instants are slots, the slot before, the latest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tickwork.explain import explain_slot, is_slot, latest_slot, parse_slot, slot_before
from tickwork.job import DEFAULT_MISFIRE_GRACE, Job, JobState, MisfirePolicy, OverlapPolicy
from tickwork.retry import RetryPolicy
from tickwork.schedule import Cron, Interval, Once, Schedule
from tickwork.store.base import SlotFate, SlotSkip

CREATED = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)


def job(schedule: Schedule, state: JobState = JobState.ACTIVE, **fields: object) -> Job:
    values: dict[str, object] = {
        "id": 1,
        "tenant": "default",
        "name": "report",
        "task": "shell",
        "args": {},
        "schedule": schedule,
        "state": state,
        "next_run_at": None,
        "queue": "default",
        "priority": 0,
        "retry": RetryPolicy(),
        "timeout": None,
        "misfire": MisfirePolicy.ONCE,
        "misfire_grace": DEFAULT_MISFIRE_GRACE,
        "overlap": OverlapPolicy.ALLOW,
        "idempotency_key": None,
        "created_at": CREATED,
        "updated_at": CREATED,
    }
    values.update(fields)
    return Job(**values)  # type: ignore[arg-type]


def test_the_slot_before_of_a_weekly_cron_is_found_days_back() -> None:
    weekly = job(Cron("0 9 * * MON"))
    friday = datetime(2026, 3, 6, 12, tzinfo=UTC)

    assert slot_before(weekly, friday) == datetime(2026, 3, 2, 9, tzinfo=UTC)


def test_the_slot_before_of_a_leap_day_cron_is_found_years_back() -> None:
    leap = job(Cron("0 0 29 2 *"))

    assert slot_before(leap, datetime(2027, 6, 1, tzinfo=UTC)) == datetime(2024, 2, 29, tzinfo=UTC)


def test_the_slot_before_of_an_interval_counts_from_its_anchor() -> None:
    every = job(Interval(timedelta(seconds=90), anchor=CREATED))

    assert slot_before(every, CREATED + timedelta(seconds=200)) == CREATED + timedelta(seconds=180)
    assert slot_before(every, CREATED + timedelta(seconds=180)) == CREATED + timedelta(seconds=90)
    assert slot_before(every, CREATED) is None


def test_is_slot_tells_slots_from_times_between_them() -> None:
    hourly = job(Cron("0 * * * *"))
    nine = datetime(2026, 3, 2, 9, tzinfo=UTC)

    assert is_slot(hourly, nine) == (True, nine - timedelta(hours=1), nine + timedelta(hours=1))
    assert is_slot(hourly, nine + timedelta(minutes=1))[0] is False
    assert is_slot(hourly, nine + timedelta(microseconds=1))[0] is False


def test_the_latest_slot_is_at_or_before_now_and_after_creation() -> None:
    hourly = job(Cron("0 * * * *"))
    now = datetime(2026, 1, 2, 10, tzinfo=UTC)

    assert latest_slot(hourly, now) == now
    assert latest_slot(hourly, now + timedelta(minutes=59)) == now
    # Nothing has fallen since the job was created: its first slot.
    assert latest_slot(hourly, CREATED + timedelta(minutes=1)) == datetime(
        2026, 1, 1, 13, tzinfo=UTC
    )
    at = datetime(2030, 1, 1, tzinfo=UTC)
    assert latest_slot(job(Once(at=at)), now) == at


def test_a_time_without_an_offset_is_read_in_the_cron_zone_or_utc() -> None:
    berlin = job(Cron("0 9 * * *", "Europe/Berlin"))
    every = job(Interval(timedelta(hours=1), anchor=CREATED))

    assert parse_slot("2026-07-01T09:00", berlin) == datetime(2026, 7, 1, 7, tzinfo=UTC)
    assert parse_slot("2026-07-01T09:00", every) == datetime(2026, 7, 1, 9, tzinfo=UTC)
    assert parse_slot("2026-07-01T09:00+02:00", every) == datetime(2026, 7, 1, 7, tzinfo=UTC)


def test_a_one_off_job_names_its_one_slot() -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    once = job(Once(at=at), next_run_at=at)

    text = explain_slot(once, at + timedelta(hours=1), [], [], now=CREATED, leader=None)

    assert f"has no slot at {(at + timedelta(hours=1)).isoformat()}: its one slot is" in text
    assert at.isoformat() in text


def test_a_cancelled_job_is_blamed_only_for_slots_after_the_cancel() -> None:
    cancelled_at = CREATED + timedelta(hours=2)
    hourly = job(Cron("0 * * * *"), JobState.CANCELLED, updated_at=cancelled_at)
    now = CREATED + timedelta(days=1)

    after = explain_slot(hourly, CREATED.replace(minute=0, second=0) + timedelta(hours=3), [], [],
                         now=now, leader=None)  # fmt: skip
    before = explain_slot(hourly, CREATED.replace(minute=0, second=0) + timedelta(hours=1), [], [],
                          now=now, leader=None)  # fmt: skip

    assert "the job was cancelled at" in after
    assert "which fell before the job was cancelled" in before


def test_the_slot_at_a_recurring_jobs_creation_instant_did_not_exist_yet() -> None:
    every = job(Interval(timedelta(minutes=1), anchor=CREATED))

    text = explain_slot(every, CREATED, [], [], now=CREATED + timedelta(hours=1), leader=None)

    assert "the job did not exist yet" in text


def test_a_skip_of_one_slot_is_not_described_as_a_range() -> None:
    slot = datetime(2026, 1, 2, 9, tzinfo=UTC)
    hourly = job(Cron("0 * * * *"), overlap=OverlapPolicy.FORBID)
    alone = SlotSkip(1, slot, slot, 1, SlotFate.OVERLAP, recorded_at=slot)
    several = SlotSkip(1, slot, slot + timedelta(hours=2), 3, SlotFate.OVERLAP)

    one = explain_slot(hourly, slot, [], [alone], now=slot, leader=None)
    three = explain_slot(hourly, slot, [], [several], now=slot, leader=None)

    assert one.endswith(f"so the slot was skipped (recorded at {slot.isoformat()}).")
    assert "share this fate" not in one
    assert three.endswith(
        f"; 3 slots from {slot.isoformat()} to {(slot + timedelta(hours=2)).isoformat()} "
        "share this fate."
    )


def test_a_slot_at_the_calendars_end_is_explained_in_any_zone() -> None:
    from tickwork.clock import LATEST

    for schedule in (Cron("* * * * *", "Pacific/Kiritimati"), Cron("0 9 * * *", "Europe/Berlin")):
        text = explain_slot(job(schedule), LATEST, [], [], now=CREATED, leader=None)

        assert "has not reached" in text or "has no slot at" in text


def test_a_legacy_interval_anchored_in_year_one_is_explained() -> None:
    # Stored before the range rule; reads must not overflow on it.
    legacy = job(Interval(timedelta(seconds=60), anchor=datetime(1, 1, 1, tzinfo=UTC)))

    now = CREATED + timedelta(hours=1)

    slot = latest_slot(legacy, now)
    text = explain_slot(legacy, slot, [], [], now=now, leader=None)

    assert slot == datetime(2026, 1, 1, 13, 0, tzinfo=UTC)
    assert "has no record of the slot 2026-01-01T13:00:00+00:00" in text
