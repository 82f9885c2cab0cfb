"""``tickwork explain JOB_ID --at TIME`` in a real process: one paragraph per fate of a slot.

Each test builds a job's history in process, moving the store's clock (``now=``) through
the past, then asks the CLI, which reads the store at the real now. Slots are on a
*/10 cron from ``hour``, a whole hour two hours ago.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from cli_support import assert_error, ok, snapshot, submit, tickwork, trigger_at

from tickwork.store import Store

MIN = timedelta(minutes=1)
S = timedelta(seconds=1)


@pytest.fixture
def hour(store: Store) -> datetime:
    return store.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)


def explain(store: Store, job_id: int, at: datetime | None = None) -> str:
    argv = ["explain", str(job_id), "--db", store.url]
    if at is not None:
        argv += ["--at", at.isoformat()]
    out = ok(*argv).out
    assert out.endswith("\n")
    assert "\n" not in out[:-1], "one paragraph, one line"
    return out


def job(store: Store, hour: datetime, **options: Any) -> int:
    return submit(store, now=hour + S, cron="*/10 * * * *", name="report", **options).id


def test_a_triggered_slot_names_its_run(store: Store, hour: datetime) -> None:
    job_id = job(store, hour)
    (run,) = trigger_at(store, hour + 10 * MIN + S)

    text = explain(store, job_id, hour + 10 * MIN)

    assert f"was triggered for {(hour + 10 * MIN).isoformat()}" in text
    assert f"run {run.id} is queued (attempt 1 of 3)" in text


def test_json_names_the_slots_run_or_its_fate(store: Store, hour: datetime) -> None:
    job_id = job(store, hour, misfire="skip")
    (run,) = trigger_at(store, hour + 40 * MIN + S)  # 10, 20, 30 misfired; 40 ran

    def answer(slot: datetime) -> dict[str, Any]:
        at = slot.isoformat()
        found: dict[str, Any] = ok(
            "explain", str(job_id), "--at", at, "--db", store.url, "--json"
        ).json()
        return found

    skipped, ran = answer(hour + 20 * MIN), answer(hour + 40 * MIN)

    assert (skipped["run_id"], skipped["fate"]) == (None, "misfire")
    assert (ran["run_id"], ran["fate"]) == (run.id, None)


def test_a_slot_skipped_by_misfire_skip(store: Store, hour: datetime) -> None:
    job_id = job(store, hour, misfire="skip")
    trigger_at(store, hour + 40 * MIN + S)  # the scheduler was down: 10, 20, 30 misfired

    text = explain(store, job_id, hour + 20 * MIN)

    assert "did not run at" in text
    assert "missed by more than the misfire grace of 60 s" in text
    assert "the misfire policy is 'skip', so it was skipped" in text
    assert "3 slots from" in text


def test_a_slot_coalesced_by_misfire_once(store: Store, hour: datetime) -> None:
    job_id = job(store, hour, misfire="once")
    # Down until 40:01: 10, 20 coalesced into 30 (the latest missed), 40 on time.
    runs = trigger_at(store, hour + 40 * MIN + S)
    into = next(run for run in runs if run.scheduled_for == hour + 30 * MIN)

    text = explain(store, job_id, hour + 10 * MIN)

    assert f"policy 'once' folded the missed slots into run {into.id}" in text
    assert "2 slots from" in text
    assert f"was triggered for {(hour + 30 * MIN).isoformat()}" in explain(
        store, job_id, hour + 30 * MIN
    )


def test_a_slot_skipped_by_overlap_forbid(store: Store, hour: datetime) -> None:
    job_id = job(store, hour, overlap="forbid")
    trigger_at(store, hour + 10 * MIN + S)  # its run stays queued: unfinished
    trigger_at(store, hour + 20 * MIN + S)

    text = explain(store, job_id, hour + 20 * MIN)

    assert "the previous run was still unfinished and the overlap policy is 'forbid'" in text


def test_a_slot_skipped_while_paused(store: Store, hour: datetime) -> None:
    job_id = job(store, hour)
    store.pause_job(job_id, now=hour + 5 * MIN)
    store.resume_job(job_id, now=hour + 35 * MIN)  # 10, 20, 30 fell while paused

    text = explain(store, job_id, hour + 20 * MIN)

    assert "the job was paused when the slot fell, so it was skipped; 3 slots from" in text


def test_a_slot_of_a_job_that_is_still_paused(store: Store, hour: datetime) -> None:
    job_id = job(store, hour)
    store.pause_job(job_id, now=hour + 5 * MIN)

    assert "the job is paused (since" in explain(store, job_id, hour + 20 * MIN)
    future = explain(store, job_id, hour + timedelta(days=2))
    assert "will not run at" in future
    assert "unless resumed before then" in future


def test_a_slot_after_the_job_was_cancelled(store: Store, hour: datetime) -> None:
    job_id = job(store, hour)
    store.cancel_job(job_id, now=hour + 15 * MIN)

    after = explain(store, job_id, hour + 20 * MIN)
    before = explain(store, job_id, hour + 10 * MIN)

    assert f"the job was cancelled at {(hour + 15 * MIN).isoformat()}" in after
    assert "so no slot after that is triggered" in after
    assert "which fell before the job was cancelled" in before


def test_a_time_that_is_not_a_slot(store: Store, hour: datetime) -> None:
    job_id = job(store, hour)

    text = explain(store, job_id, hour + 13 * MIN)

    assert f"has no slot at {(hour + 13 * MIN).isoformat()}" in text
    assert f"the slot before is {(hour + 10 * MIN).isoformat()}" in text
    assert f"the next is {(hour + 20 * MIN).isoformat()}" in text


def test_a_future_slot(store: Store, hour: datetime) -> None:
    job_id = job(store, hour)
    slot = hour + timedelta(days=1)

    assert f"has not reached {slot.isoformat()} yet; it is active" in explain(store, job_id, slot)


def test_a_due_slot_without_a_scheduler(store: Store, hour: datetime) -> None:
    job_id = job(store, hour)  # never triggered: no scheduler ran

    text = explain(store, job_id, hour + 10 * MIN)

    assert "is due at" in text
    assert "but has not been triggered yet" in text
    assert "no scheduler holds the leader lease: start `tickwork scheduler`" in text


def test_a_slot_before_the_job_existed(store: Store, hour: datetime) -> None:
    job_id = job(store, hour)

    assert "the job did not exist yet" in explain(store, job_id, hour - 10 * MIN)


def test_without_at_the_latest_slot_is_explained(store: Store, hour: datetime) -> None:
    job_id = job(store, hour)

    result = ok("explain", str(job_id), "--db", store.url, "--json").json()

    slot = datetime.fromisoformat(result["slot"])
    assert set(result) == {"job_id", "slot", "run_id", "fate", "explanation"}
    assert result["job_id"] == job_id
    assert store.now() - timedelta(minutes=10) < slot <= store.now()
    assert slot.minute % 10 == 0
    assert "is due at" in result["explanation"]


def test_at_without_an_offset_is_read_in_the_cron_time_zone(store: Store) -> None:
    berlin = submit(store, cron="0 9 * * *", tz="Europe/Berlin").id

    result = ok("explain", str(berlin), "--at", "2031-12-01T09:00", "--db", store.url, "--json")

    assert result.json()["slot"] == "2031-12-01T08:00:00+00:00"
    explanation = result.json()["explanation"]
    assert "has not reached 2031-12-01T09:00:00+01:00 (Europe/Berlin) yet" in explanation


@pytest.mark.parametrize(
    ("at", "message"),
    [
        ("yesterday", "--at 'yesterday' is not an ISO-8601 time"),
        ("2031-13-01T09:00", "is not an ISO-8601 time"),
        ("", "is not an ISO-8601 time"),
    ],
)
def test_a_bad_at_exits_2_and_writes_nothing(store: Store, at: str, message: str) -> None:
    job_id = submit(store, every="1h").id
    before = snapshot(store)

    assert_error(tickwork("explain", str(job_id), "--at", at, "--db", store.url), 2, message)

    assert snapshot(store) == before


def test_explain_of_a_slot_between_two_leaders_says_when_none_led(
    store: Store, hour: datetime
) -> None:
    job_id = job(store, hour, tz="Europe/Berlin")
    ttl = 10 * S
    assert store.acquire_leadership("sched-a", ttl, now=hour) is not None
    assert store.acquire_leadership("sched-b", 5 * MIN, now=hour + 5 * MIN) is not None
    # sched-b's last renewal: its lease runs out at :10:05, 5 s after the slot at :10:00.
    store.renew_leadership("sched-b", 2, ttl, now=hour + 9 * MIN + 55 * S)
    takeover = hour + 10 * MIN + 20 * S
    third = store.acquire_leadership("sched-c", ttl, now=takeover)
    assert third is not None
    assert third.epoch == 3
    (run,) = store.trigger(third.epoch, now=takeover).runs

    text = explain(store, job_id, hour + 10 * MIN)

    berlin = ZoneInfo("Europe/Berlin")
    gap_start = (hour + 10 * MIN + 5 * S).astimezone(berlin).isoformat()
    gap_end = takeover.astimezone(berlin).time().isoformat()
    assert f"run {run.id} is queued" in text
    assert (
        f"It ran late: no leader from {gap_start} to {gap_end} (Europe/Berlin); "
        "epoch 2 → 3 (sched-b, then sched-c)."
    ) in text
