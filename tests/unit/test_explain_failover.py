"""explain of a slot that ran late during a failover: the gap with no leader, from the
history of leadership terms, in the schedule's zone. Pure: the records are built here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tickwork.explain import explain, explain_slot
from tickwork.job import (
    DEFAULT_MISFIRE_GRACE,
    Job,
    JobState,
    MisfirePolicy,
    OverlapPolicy,
    Run,
    RunState,
)
from tickwork.retry import RetryPolicy
from tickwork.schedule import Cron
from tickwork.store.base import LeaderTerm, Lease, SlotFate, SlotSkip

S = timedelta(seconds=1)
CREATED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def job(tz: str = "Europe/Berlin", **fields: object) -> Job:
    values: dict[str, object] = {
        "id": 7,
        "tenant": "default",
        "name": "report",
        "task": "shell",
        "args": {},
        "schedule": Cron("* * * * *", tz),
        "state": JobState.ACTIVE,
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


def run(slot: datetime, triggered: datetime) -> Run:
    return Run(
        id=41,
        job_id=7,
        tenant="default",
        task="shell",
        args={},
        queue="default",
        priority=0,
        scheduled_for=slot,
        run_at=slot,
        state=RunState.SUCCEEDED,
        attempt=1,
        max_attempts=3,
        fencing_token=1,
        worker="w1",
        lease_expires_at=None,
        started_at=triggered + S,
        finished_at=triggered + 2 * S,
        error=None,
        result=None,
        timeout=None,
        created_at=triggered,
    )


# The slot at 16:08:00 Berlin (15:08 UTC); epoch 2's lease ran out at 16:07:38, epoch 3
# began at 16:08:09 and triggered the slot at once.
slot = datetime(2026, 12, 1, 15, 8, tzinfo=UTC)
ended = datetime(2026, 12, 1, 15, 7, 38, tzinfo=UTC)
began = datetime(2026, 12, 1, 15, 8, 9, tzinfo=UTC)
TERMS = [
    LeaderTerm(2, "sched-a", CREATED, ended),
    LeaderTerm(3, "sched-b", began, None),
]
LEADER = Lease("sched-b", 3, began + 10 * S)


def test_a_slot_in_a_gap_between_epochs_says_no_leader_from_when_to_when() -> None:
    text = explain_slot(job(), slot, [run(slot, began + S)], [], now=began + 60 * S,
                        leader=LEADER, terms=TERMS)  # fmt: skip

    assert (
        "It ran late: no leader from 2026-12-01T16:07:38+01:00 to 16:08:09 (Europe/Berlin); "
        "epoch 2 → 3 (sched-a, then sched-b)."
    ) in text


def test_the_gap_is_in_utc_for_a_utc_schedule_and_on_the_record() -> None:
    found = explain(job("UTC"), slot, [run(slot, began + S)], [], now=began + 60 * S,
                    leader=LEADER, terms=TERMS)  # fmt: skip

    assert "no leader from 2026-12-01T15:07:38+00:00 to 15:08:09; epoch 2 → 3" in found.text


def test_a_slot_triggered_on_time_says_nothing_of_leaders() -> None:
    early = slot - 30 * S
    on_time = explain_slot(job(), early, [run(early, early + S)], [], now=began,
                           leader=LEADER, terms=TERMS)  # fmt: skip

    assert "no leader" not in on_time
    assert "epoch" not in on_time


def test_a_slot_late_with_a_leader_throughout_blames_no_failover() -> None:
    steady = [LeaderTerm(2, "sched-a", CREATED, None)]

    text = explain_slot(job(), slot, [run(slot, slot + 30 * S)], [], now=began,
                        leader=Lease("sched-a", 2, began), terms=steady)  # fmt: skip

    assert "no leader" not in text


def test_a_slot_skipped_by_misfire_during_the_gap_names_it() -> None:
    skip = SlotSkip(7, slot, slot, 1, SlotFate.MISFIRE, recorded_at=began + S)

    text = explain_slot(job(misfire=MisfirePolicy.SKIP), slot, [], [skip], now=began + 60 * S,
                        leader=LEADER, terms=TERMS)  # fmt: skip

    assert "it was missed by more than the misfire grace" in text
    assert "no leader from 2026-12-01T16:07:38+01:00 to 16:08:09 (Europe/Berlin)" in text


def test_a_due_slot_while_no_node_leads_says_since_when() -> None:
    lapsed = [LeaderTerm(2, "sched-a", CREATED, ended)]
    due = job(next_run_at=slot)

    text = explain_slot(due, slot, [], [], now=slot + 20 * S, leader=None, terms=lapsed)

    assert (
        "no scheduler holds the leader lease (none since 2026-12-01T16:07:38+01:00 "
        "(Europe/Berlin), when sched-a's lease at epoch 2 ran out)"
    ) in text
