"""The nemesis checker against a synthetic run directory and doctored copies of it.

``build_run()`` writes what a healthy nemesis run leaves behind: three nemesis windows, two
per-second cron jobs (misfire ``all`` and ``once``), a stream of one-off jobs, a worker
killed mid-execution and its run rescued after the lease, a scheduler outage long enough
that the ``once`` job coalesces its misfired slots, start lags of a few milliseconds. The
checker finds nothing wrong with it, which shows that builder and checker read the README
alike; then each negative control breaks one guarantee and the checker must flag exactly
that, in the right row.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chaos.checker import (
    EXIT_OK,
    EXIT_UNREADABLE,
    EXIT_VIOLATION,
    KINDS,
    OUTSIDE,
    Kind,
    Lag,
    LagSample,
    Report,
    RunDirError,
    check,
    first_slot,
    main,
)

T0 = 1_796_000_000.0  # the run's start, Unix seconds
MONO_OFFSET = 1_795_990_000.0  # s: wall = monotonic + this
RUN_LEASE = 4.0  # s
LAG_WINDOW = 5.0  # s
RECOVERY = 2.0  # s: the after stretch starts this long after the heal
GRACE = 5.0  # s: short, so that the synthetic 10 s scheduler outage misfires
EARLY_TOLERANCE = 0.01  # s
CRON_UNTIL = T0 + 90.0
DB_NOW = T0 + 100.0

JITTER = (0.002, 0.012)  # s: a healthy start lag
DURATION = (0.5, 3.0)  # s: how long the workload's handlers sleep

# name, targets, baseline, fault, end (seconds after T0)
NEMESES = (
    ("kill-worker", ["w2"], (10.0, 15.0), (15.0, 20.0), 30.0),
    ("partition-scheduler", ["s1"], (30.0, 35.0), (35.0, 45.0), 60.0),
    ("pause-primary", ["pg1"], (60.0, 65.0), (65.0, 70.0), 85.0),
)
KILL_WORKER, PARTITION, PAUSE = 0, 1, 2
DATABASE_FAULTS = {"pause-primary"}  # away for every node: a finished run may not run again

# Faults that stop runs from starting: slots in (first, last] start at resume + jitter.
STALLS = ((T0 + 35.0, T0 + 45.0, T0 + 45.2), (T0 + 65.0, T0 + 70.0, T0 + 70.05))

W1 = ("w1", 4700)
W2 = ("w2", 4711)  # killed at KILL_AT
W2_RESTARTED = ("w2", 4790)
KILL_AT = T0 + 16.0
EXITED_AT = T0 + 16.02
RESTARTED_AT = T0 + 17.0
W2_QUIET = (T0 + 12.5, RESTARTED_AT)  # w2 takes nothing new but the victim around its kill
VICTIM_SLOT = T0 + 15.25  # the one-off whose first execution dies with w2
RESCUE_DELAY = RUN_LEASE + 0.3  # s after the first start: the lease expired, then rescue

CRON_ALL, CRON_ONCE = 1, 2
FIRST_ONE_OFF = 100
ONE_OFF_SLOTS = [T0 + 5.25 + 0.5 * k for k in range(166)]  # up to T0 + 87.75
SUBMIT_AHEAD = 0.3  # s: one-offs are submitted this long before their slot


def at(seconds: float) -> float:
    return T0 + seconds


def mono(wall: float) -> float:
    return wall - MONO_OFFSET


@dataclass
class SyntheticRun:
    """The contents of a run directory, to doctor in memory and then write."""

    meta: dict[str, Any]
    nemeses: list[dict[str, Any]]
    history: list[dict[str, Any]]
    submits: list[dict[str, Any]]
    events: list[dict[str, Any]]
    final: dict[str, Any]
    run_ids: int = field(default=0)  # the last run id handed out

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "meta.json").write_text(json.dumps(self.meta))
        (directory / "final.json").write_text(json.dumps(self.final))
        for name, lines in (
            ("nemeses", self.nemeses),
            ("history", sorted(self.history, key=lambda line: line["mono"])),
            ("submits", self.submits),
            ("events", self.events),
        ):
            (directory / f"{name}.jsonl").write_text(
                "".join(json.dumps(line) + "\n" for line in lines)
            )
        return directory

    def run_at(self, slot: float, job: int | None = None) -> dict[str, Any]:
        found = [
            run
            for run in self.final["runs"]
            if abs(run["scheduled_for"] - slot) < 1e-6 and job in (None, run["job_id"])
        ]
        assert len(found) == 1, (slot, job, found)
        run: dict[str, Any] = found[0]
        return run

    def lines_of(self, run_id: int, ev: str | None = None) -> list[dict[str, Any]]:
        return [line for line in self.history if line["run"] == run_id and ev in (None, line["ev"])]

    def drop_run(self, run_id: int) -> None:
        self.final["runs"] = [run for run in self.final["runs"] if run["id"] != run_id]
        self.history = [line for line in self.history if line["run"] != run_id]

    def new_run_id(self) -> int:
        self.run_ids += 1
        return self.run_ids

    def execute(
        self,
        run: dict[str, Any],
        token: int,
        worker: tuple[str, int],
        start: float,
        end: float | None,
    ) -> None:
        """History lines of one execution of ``run``; ``end`` None: killed, no end line."""
        node, pid = worker
        base = {
            "run": run["id"],
            "job": run["job_id"],
            "slot": run["scheduled_for"],
            "attempt": run["attempt"],
            "token": token,
            "pid": pid,
            "node": node,
        }
        self.history.append({"ev": "start", **base, "mono": mono(start)})
        if end is not None:
            self.history.append({"ev": "end", **base, "mono": mono(end), "outcome": "ok"})


def stalled_until(slot: float) -> float | None:
    return next((resume for first, last, resume in STALLS if first < slot <= last), None)


def build_run(seed: int = 7) -> SyntheticRun:
    """A healthy nemesis run (see the module doc); ``seed`` picks lags and durations."""
    rng = random.Random(seed)
    synthetic = SyntheticRun(
        meta={
            "mode": "quick",
            "started": T0,
            "ended": at(95.0),
            "mono_offset": MONO_OFFSET,
            "run_lease": RUN_LEASE,
            "leader_lease": 3.0,
            "leader_renew": 0.6,
            "misfire_grace": GRACE,
            "lag_window": LAG_WINDOW,
            "early_tolerance": EARLY_TOLERANCE,
        },
        nemeses=[
            {
                "name": name,
                "targets": targets,
                "baseline": [at(baseline[0]), at(baseline[1])],
                "fault": [at(fault[0]), at(fault[1])],
                "end": at(end),
                "database": name in DATABASE_FAULTS,
            }
            for name, targets, baseline, fault, end in NEMESES
        ],
        history=[],
        submits=[],
        events=[
            {"ev": "start", "node": W1[0], "pid": W1[1], "wall": at(0.1)},
            {"ev": "start", "node": W2[0], "pid": W2[1], "wall": at(0.1)},
            {"ev": "kill", "node": W2[0], "pid": W2[1], "signal": "SIGKILL", "wall": KILL_AT},
            {"ev": "exit", "node": W2[0], "pid": W2[1], "code": -9, "wall": EXITED_AT},
            {"ev": "start", "node": W2[0], "pid": W2_RESTARTED[1], "wall": RESTARTED_AT},
        ],
        final={"db_now": DB_NOW, "jobs": [], "runs": [], "skips": [], "cron_until": CRON_UNTIL},
    )
    jobs, skips = synthetic.final["jobs"], synthetic.final["skips"]
    for job_id, name, misfire, created_at in (
        (CRON_ALL, "cron-all-1", "all", at(0.4)),
        (CRON_ONCE, "cron-once-1", "once", at(0.7)),
    ):
        jobs.append(
            {
                "id": job_id,
                "name": name,
                "kind": "cron",
                "misfire": misfire,
                "overlap": "allow",
                "misfire_grace": GRACE,
                "created_at": created_at,
                "state": "active",
                "next_run_at": CRON_UNTIL + 1.0,
            }
        )

    slots: list[tuple[float, int]] = []  # (slot, job) that get a run
    cron_slots = [at(float(second)) for second in range(1, 91)]
    slots += [(slot, CRON_ALL) for slot in cron_slots]
    coalesced: set[float] = set()
    folded_into: list[tuple[dict[str, Any], float]] = []  # (skip, the slot that runs)
    for first, last, resume in STALLS:
        # Misfire 'once': the late slots (older than the grace at resume) fold into the
        # latest of them; the on-time ones run.
        late = [slot for slot in cron_slots if first < slot <= last and resume - slot > GRACE]
        if len(late) > 1:
            skip = {
                "job_id": CRON_ONCE,
                "first_slot": late[0],
                "last_slot": late[-2],
                "count": len(late) - 1,
                "fate": "coalesced",
                "run_id": None,  # filled in below, once the run has its id
                "more": False,
            }
            skips.append(skip)
            folded_into.append((skip, late[-1]))
            coalesced.update(late[:-1])
    slots += [(slot, CRON_ONCE) for slot in cron_slots if slot not in coalesced]
    for index, slot in enumerate(ONE_OFF_SLOTS):
        job_id = FIRST_ONE_OFF + index
        jobs.append(
            {
                "id": job_id,
                "name": f"once-{job_id}",
                "kind": "once",
                "misfire": "all",
                "overlap": "allow",
                "misfire_grace": GRACE,
                "created_at": slot - SUBMIT_AHEAD,
                "state": "done",
                "next_run_at": None,
            }
        )
        synthetic.submits.append(
            {"job": job_id, "slot": slot, "acked": slot - SUBMIT_AHEAD + 0.0008}
        )
        slots.append((slot, job_id))

    for index, (slot, job_id) in enumerate(sorted(slots)):
        run = {
            "id": synthetic.new_run_id(),
            "job_id": job_id,
            "scheduled_for": slot,
            "state": "succeeded",
            "attempt": 1,
            "fencing_token": 1,
            "result": None,
        }
        synthetic.final["runs"].append(run)
        start = (stalled_until(slot) or slot) + rng.uniform(*JITTER)
        duration = rng.uniform(*DURATION)
        if slot == VICTIM_SLOT:
            # Dies with w2; the reaper rescues it once the lease has expired.
            synthetic.execute(run, 1, W2, start, None)
            synthetic.execute(run, 2, W1, start + RESCUE_DELAY, start + RESCUE_DELAY + duration)
            run["fencing_token"] = 2
            run["result"] = {"token": 2, "pid": W1[1]}
            continue
        if W2_QUIET[0] <= start < W2_QUIET[1] or index % 2 == 0:
            worker = W1
        else:
            worker = W2 if start < KILL_AT else W2_RESTARTED
        synthetic.execute(run, 1, worker, start, start + duration)
        run["result"] = {"token": 1, "pid": worker[1]}

    for skip, slot in folded_into:
        skip["run_id"] = synthetic.run_at(slot, CRON_ONCE)["id"]
    return synthetic


@pytest.fixture
def synthetic() -> SyntheticRun:
    return build_run()


def checked(synthetic: SyntheticRun, tmp_path: Path) -> tuple[Report, int]:
    """The report on ``synthetic`` written to disk, and the CLI's exit code on it."""
    run_dir = synthetic.write(tmp_path / "run")
    return check(run_dir), main([str(run_dir)])


def assert_flags_only(report: Report, kind: Kind, window: int | None) -> None:
    """Exactly one violation, of ``kind``, in row ``window``; every lag recovered."""
    windows: list[int | None] = [KILL_WORKER, PARTITION, PAUSE, None]
    expected = {w: dict.fromkeys(KINDS, 0) for w in windows}
    expected[window][kind] = 1
    assert {w: report.counts(w) for w in windows} == expected
    assert report.unrecovered == ()


def test_the_synthetic_run_has_no_violation(synthetic: SyntheticRun, tmp_path: Path) -> None:
    report, code = checked(synthetic, tmp_path)

    assert report.details == ()
    assert report.violations == 0
    assert report.ok
    assert code == EXIT_OK
    assert [row.nemesis.name for row in report.rows] == [name for name, *_ in NEMESES]
    for row in report.rows:
        assert row.lag.recovered
        assert len(row.lag.baseline.lags) > 10
        assert len(row.lag.after.lags) > 10
        assert row.lag.after.p99 is not None
        assert JITTER[0] <= row.lag.after.p99 <= JITTER[1]


def test_the_synthetic_run_holds_a_rescue_and_a_coalesced_skip(synthetic: SyntheticRun) -> None:
    """The valid run is only convincing if it holds the legitimate oddities."""
    victim = synthetic.run_at(VICTIM_SLOT)
    starts = synthetic.lines_of(victim["id"], "start")
    assert [line["token"] for line in starts] == [1, 2]
    assert starts[1]["mono"] - starts[0]["mono"] >= RUN_LEASE
    assert synthetic.lines_of(victim["id"], "end")[0]["token"] == 2
    (skip,) = synthetic.final["skips"]
    assert (skip["fate"], skip["first_slot"], skip["last_slot"]) == ("coalesced", at(36), at(39))
    assert synthetic.run_at(at(40), CRON_ONCE)["id"] == skip["run_id"]


def test_a_duplicated_slot_is_flagged(synthetic: SyntheticRun, tmp_path: Path) -> None:
    original = synthetic.run_at(at(50), CRON_ALL)
    synthetic.final["runs"].append({**original, "id": synthetic.new_run_id()})

    report, code = checked(synthetic, tmp_path)

    assert_flags_only(report, "duplicate", PARTITION)
    (violation,) = report.details
    assert violation.runs == (original["id"], synthetic.run_ids)
    assert violation.slot == at(50)
    assert code == EXIT_VIOLATION


def test_a_lost_job_is_flagged(synthetic: SyntheticRun, tmp_path: Path) -> None:
    run = synthetic.run_at(at(75.25))
    run["state"], run["result"] = "failed", None

    report, code = checked(synthetic, tmp_path)

    assert_flags_only(report, "lost", PAUSE)
    (violation,) = report.details
    assert violation.job == run["job_id"]
    assert "failed" in violation.detail
    assert code == EXIT_VIOLATION


def test_a_zombies_accepted_completion_is_flagged_stale(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    victim = synthetic.run_at(VICTIM_SLOT)
    victim["result"] = {"token": 1, "pid": W2[1]}  # the killed claim's completion won

    report, code = checked(synthetic, tmp_path)

    assert_flags_only(report, "stale", KILL_WORKER)
    (violation,) = report.details
    assert violation.runs == (victim["id"],)
    assert {1, 2} <= set(violation.tokens)
    assert W2[1] in violation.pids
    assert code == EXIT_VIOLATION


def test_a_lag_that_never_recovers_is_flagged(synthetic: SyntheticRun, tmp_path: Path) -> None:
    after = (at(NEMESES[PAUSE][3][1] + RECOVERY), at(NEMESES[PAUSE][4]))
    for line in synthetic.history:
        if after[0] <= line["slot"] < after[1]:
            line["mono"] += 2.0

    report, code = checked(synthetic, tmp_path)

    assert report.violations == 0
    assert report.unrecovered == ("pause-primary",)
    lag = report.rows[PAUSE].lag
    assert lag.after.p99 is not None
    assert lag.after.p99 >= 2.0
    assert "exceed" in lag.note
    assert report.table()[PAUSE + 1][-1] == "no"
    assert not report.ok
    assert code == EXIT_VIOLATION


def test_a_missed_cron_slot_is_flagged(synthetic: SyntheticRun, tmp_path: Path) -> None:
    synthetic.drop_run(synthetic.run_at(at(52), CRON_ALL)["id"])

    report, code = checked(synthetic, tmp_path)

    assert_flags_only(report, "missed", PARTITION)
    (violation,) = report.details
    assert (violation.job, violation.slot) == (CRON_ALL, at(52))
    assert violation.detail == "no run and no skip"
    assert code == EXIT_VIOLATION


def test_a_skip_the_policy_does_not_allow_counts_as_missed(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    synthetic.drop_run(synthetic.run_at(at(62), CRON_ALL)["id"])
    synthetic.final["skips"].append(
        {
            "job_id": CRON_ALL,
            "first_slot": at(62),
            "last_slot": at(62),
            "count": 1,
            "fate": "misfire",
            "run_id": None,
            "more": False,
        }
    )

    report, code = checked(synthetic, tmp_path)

    assert_flags_only(report, "missed", PAUSE)
    (violation,) = report.details
    assert "policy" in violation.detail
    assert "misfire" in violation.detail
    assert code == EXIT_VIOLATION


def test_a_coalesced_skip_is_allowed_only_under_misfire_once(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    next(job for job in synthetic.final["jobs"] if job["id"] == CRON_ONCE)["misfire"] = "skip"

    report, _ = checked(synthetic, tmp_path)

    missed = [v for v in report.details if v.kind == "missed"]
    assert [v.slot for v in missed] == [at(36), at(37), at(38), at(39)]
    assert report.violations == 4


def test_an_early_start_is_flagged(synthetic: SyntheticRun, tmp_path: Path) -> None:
    run = synthetic.run_at(at(17), CRON_ALL)
    (start,) = synthetic.lines_of(run["id"], "start")
    start["mono"] = mono(at(17) - 0.5)

    report, code = checked(synthetic, tmp_path)

    assert_flags_only(report, "early", KILL_WORKER)
    (violation,) = report.details
    assert violation.runs == (run["id"],)
    assert "0.500 s before its slot" in violation.detail
    assert code == EXIT_VIOLATION


def test_two_executions_of_one_run_within_the_lease_overlap(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    run = synthetic.run_at(at(77.25))
    (start,) = synthetic.lines_of(run["id"], "start")
    first_start = start["mono"] + MONO_OFFSET
    other = W1 if start["pid"] != W1[1] else W2_RESTARTED
    synthetic.execute(run, 2, other, first_start + 0.3, first_start + 2.0)
    run["fencing_token"], run["result"] = 2, {"token": 2, "pid": other[1]}

    report, code = checked(synthetic, tmp_path)

    assert_flags_only(report, "overlap", PAUSE)
    (violation,) = report.details
    assert violation.tokens == (1, 2)
    assert violation.pids == (start["pid"], other[1])
    assert "run lease" in violation.detail
    assert code == EXIT_VIOLATION


def test_a_second_execution_after_the_lease_is_no_overlap(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    """A partitioned worker's claim may still run when the rescued claim starts."""
    run = synthetic.run_at(at(77.25))
    (start,) = synthetic.lines_of(run["id"], "start")
    (end,) = synthetic.lines_of(run["id"], "end")
    first_start = start["mono"] + MONO_OFFSET
    end["mono"] = mono(first_start + RUN_LEASE + 2.0)
    other = W1 if start["pid"] != W1[1] else W2_RESTARTED
    synthetic.execute(run, 2, other, first_start + RUN_LEASE, first_start + RUN_LEASE + 1.0)
    run["fencing_token"], run["result"] = 2, {"token": 2, "pid": other[1]}

    report, code = checked(synthetic, tmp_path)

    assert report.violations == 0
    assert code == EXIT_OK


def test_a_run_that_returned_and_ran_again_in_an_outage_of_the_database_is_a_rerun(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    """Its completion was lost or fenced off: the outage cost a run whose worker lived."""
    run = synthetic.run_at(at(72.25))
    (start,) = synthetic.lines_of(run["id"], "start")
    (end,) = synthetic.lines_of(run["id"], "end")
    returned = end["mono"] + MONO_OFFSET
    other = W1 if start["pid"] != W1[1] else W2_RESTARTED
    synthetic.execute(run, 2, other, returned + 1.0, returned + 2.0)
    run["fencing_token"], run["result"] = 2, {"token": 2, "pid": other[1]}

    report, code = checked(synthetic, tmp_path)

    assert_flags_only(report, "rerun", PAUSE)
    (violation,) = report.details
    assert violation.runs == (run["id"],)
    assert violation.tokens == (1, 2)
    assert "returned ok" in violation.detail
    assert report.table()[0][KINDS.index("rerun") + 1] == "rerun"
    assert code == EXIT_VIOLATION


def test_a_run_that_returned_and_ran_again_in_a_workers_fault_is_allowed(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    """At-least-once: a worker killed before its completion was written."""
    run = synthetic.run_at(at(18.25))
    (start,) = synthetic.lines_of(run["id"], "start")
    (end,) = synthetic.lines_of(run["id"], "end")
    returned = end["mono"] + MONO_OFFSET
    other = W1 if start["pid"] != W1[1] else W2_RESTARTED
    synthetic.execute(run, 2, other, returned + 1.0, returned + 2.0)
    run["fencing_token"], run["result"] = 2, {"token": 2, "pid": other[1]}

    report, code = checked(synthetic, tmp_path)

    assert report.violations == 0
    assert code == EXIT_OK


def test_the_same_token_executed_twice_is_an_overlap_even_past_the_lease(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    run = synthetic.run_at(at(78.25))
    (start,) = synthetic.lines_of(run["id"], "start")
    (end,) = synthetic.lines_of(run["id"], "end")
    first_start = start["mono"] + MONO_OFFSET
    end["mono"] = mono(first_start + RUN_LEASE + 1.5)
    other = W1 if start["pid"] != W1[1] else W2_RESTARTED
    synthetic.execute(run, 1, other, first_start + RUN_LEASE + 0.5, first_start + RUN_LEASE + 2.0)

    report, code = checked(synthetic, tmp_path)

    assert_flags_only(report, "overlap", PAUSE)
    (violation,) = report.details
    assert violation.tokens == (1, 1)
    assert "same token" in violation.detail
    assert "overlapping" in violation.detail
    assert code == EXIT_VIOLATION


def test_a_killed_execution_ends_when_its_process_exits(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    """The rescue starts within the lease but after w2 died: nothing ran twice at once."""
    victim = synthetic.run_at(VICTIM_SLOT)
    rescue = synthetic.lines_of(victim["id"])[1:]
    for line in rescue:
        line["mono"] = mono(EXITED_AT + 0.5) + (0.0 if line["ev"] == "start" else 1.0)

    report, _ = checked(synthetic, tmp_path)

    assert report.violations == 0


def test_a_killed_execution_without_an_exit_runs_until_the_snapshot(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    victim = synthetic.run_at(VICTIM_SLOT)
    for line in synthetic.lines_of(victim["id"])[1:]:
        line["mono"] = mono(EXITED_AT + 0.5) + (0.0 if line["ev"] == "start" else 1.0)
    synthetic.events = [event for event in synthetic.events if event["ev"] != "exit"]

    report, _ = checked(synthetic, tmp_path)

    assert_flags_only(report, "overlap", KILL_WORKER)
    (violation,) = report.details
    assert "ended by snapshot" in violation.detail


def test_a_violation_outside_every_window_gets_its_own_row(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    synthetic.drop_run(synthetic.run_at(at(5), CRON_ALL)["id"])

    report, code = checked(synthetic, tmp_path)

    assert_flags_only(report, "missed", None)
    outside = report.table()[-1]
    assert outside[:3] == [OUTSIDE, "0", "1"]
    assert code == EXIT_VIOLATION


def test_a_truncated_last_history_line_is_tolerated(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    run_dir = synthetic.write(tmp_path / "run")
    with (run_dir / "history.jsonl").open("a") as history:
        history.write('{"ev": "start", "run": 12, "job": 1, "sl')

    report = check(run_dir)

    assert report.violations == 0
    assert report.ok


def test_a_damaged_line_before_the_last_is_an_error(
    synthetic: SyntheticRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = synthetic.write(tmp_path / "run")
    lines = (run_dir / "history.jsonl").read_text().splitlines()
    lines[10] = lines[10][:20]
    (run_dir / "history.jsonl").write_text("\n".join(lines) + "\n")

    with pytest.raises(RunDirError, match=r"history\.jsonl:11"):
        check(run_dir)
    assert main([str(run_dir)]) == EXIT_UNREADABLE
    assert "history.jsonl:11" in capsys.readouterr().err


def test_missing_events_and_submits_read_as_empty(synthetic: SyntheticRun, tmp_path: Path) -> None:
    run_dir = synthetic.write(tmp_path / "run")
    (run_dir / "events.jsonl").unlink()
    (run_dir / "submits.jsonl").unlink()

    report = check(run_dir)

    # Without its exit the killed execution runs on, but the rescue came after the lease.
    assert report.violations == 0


def test_an_empty_after_sample_with_slots_due_is_not_recovered(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    after = (at(NEMESES[PAUSE][3][1] + RECOVERY), at(NEMESES[PAUSE][4]))
    synthetic.history = [
        line for line in synthetic.history if not after[0] <= line["slot"] < after[1]
    ]

    report, code = checked(synthetic, tmp_path)

    lag = report.rows[PAUSE].lag
    assert lag.after.lags == ()
    assert lag.after_due > 0
    assert not lag.recovered
    assert "none started" in lag.note
    assert report.violations == 0
    assert code == EXIT_VIOLATION


def test_an_empty_after_sample_with_nothing_due_is_recovered(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    quiet_from = at(NEMESES[PAUSE][3][1] + RECOVERY - 1.0)
    synthetic.final["cron_until"] = quiet_from
    for run in list(synthetic.final["runs"]):
        cron_after = run["job_id"] < FIRST_ONE_OFF and run["scheduled_for"] > quiet_from
        one_off_in = run["job_id"] >= FIRST_ONE_OFF and quiet_from <= run["scheduled_for"] < at(
            NEMESES[PAUSE][4]
        )
        if cron_after or one_off_in:
            synthetic.drop_run(run["id"])
    synthetic.submits = [
        submit
        for submit in synthetic.submits
        if not quiet_from <= submit["slot"] < at(NEMESES[PAUSE][4])
    ]

    report, code = checked(synthetic, tmp_path)

    lag = report.rows[PAUSE].lag
    assert lag.after.lags == ()
    assert lag.after_due == 0
    assert lag.recovered
    assert "nothing was due" in lag.note
    assert report.violations == 0
    assert code == EXIT_OK


@pytest.mark.parametrize(
    ("created_at", "every", "slot"),
    [(12.3, 1.0, 13.0), (12.0, 1.0, 13.0), (12.999, 1.0, 13.0), (12.3, 60.0, 60.0),
     (60.0, 60.0, 120.0), (T0 + 0.4, 1.0, T0 + 1.0)],
)  # fmt: skip
def test_a_jobs_first_slot_is_the_first_whole_step_strictly_after_its_creation(
    created_at: float, every: float, slot: float
) -> None:
    assert first_slot(created_at, every) == slot


def test_the_report_renders_one_row_per_nemesis_and_the_outside_row(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    synthetic.drop_run(synthetic.run_at(at(52), CRON_ALL)["id"])
    report, _ = checked(synthetic, tmp_path)

    text = report.render().splitlines()
    assert text[0].split()[:7] == ["nemesis", "lost", "missed", "dup", "overlap", "stale", "early"]
    rows = {line.split()[0]: line.split() for line in text[1:5]}
    assert set(rows) == {"kill-worker", "partition-scheduler", "pause-primary", "(outside"}
    assert rows["partition-scheduler"][1:7] == ["0", "1", "0", "0", "0", "0"]
    assert rows["partition-scheduler"][-1] == "yes"
    assert any("job 1 slot" in line and "no run and no skip" in line for line in text)
    assert text[-1] == "FAIL: 1 violation(s)"
    markdown = report.markdown().splitlines()
    assert len(markdown) == 2 + len(NEMESES) + 1
    assert markdown[3].startswith("| partition-scheduler | 0 | 1 | 0 |")


def test_the_cli_prints_the_violations_as_json(
    synthetic: SyntheticRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = synthetic.run_at(at(75.25))
    run["state"], run["result"] = "failed", None
    run_dir = synthetic.write(tmp_path / "run")

    code = main([str(run_dir), "--json"])

    printed = json.loads(capsys.readouterr().out)
    assert code == EXIT_VIOLATION
    assert printed["ok"] is False
    assert printed["violations"] == 1
    assert printed["nemeses"][PAUSE]["counts"]["lost"] == 1
    assert printed["nemeses"][PAUSE]["lag"]["recovered"] is True
    (detail,) = printed["details"]
    assert detail["kind"] == "lost"
    assert detail["nemesis"] == "pause-primary"
    assert detail["job"] == run["job_id"]
    assert detail["runs"] == [run["id"]]


def test_python_dash_m_runs_the_checker(synthetic: SyntheticRun, tmp_path: Path) -> None:
    healthy = synthetic.write(tmp_path / "healthy")
    synthetic.drop_run(synthetic.run_at(at(52), CRON_ALL)["id"])
    broken = synthetic.write(tmp_path / "broken")
    root = Path(__file__).parents[2]  # the repository, where chaos/ is

    def run(run_dir: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "chaos.checker", str(run_dir)],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )

    ok, failed = run(healthy), run(broken)
    assert (ok.returncode, failed.returncode) == (EXIT_OK, EXIT_VIOLATION)
    assert ok.stdout.splitlines()[-1].startswith("ok:")
    assert "missed" in failed.stdout


def test_a_leader_fault_that_stalls_slots_past_the_failover_bound_is_flagged(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    # Leader lease 3 s + renew 0.6 s + 2 s: the partition's 10 s stall is far past it.
    synthetic.meta.update(leader_lease=3.0, leader_renew=0.6)
    synthetic.nemeses[PARTITION]["leader"] = True

    report, code = checked(synthetic, tmp_path)

    assert_flags_only(report, "failover", PARTITION)
    (slow,) = report.details
    assert "5.60 s" in slow.detail
    assert report.rows[PARTITION].lag.fault.lags[-1] > 9.0
    assert code == EXIT_VIOLATION


def test_a_stall_within_the_failover_bound_or_of_a_non_leader_fault_is_no_violation(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    # The same 10 s stall, of a fault that is not the leader's (a paused database): only
    # reported, as the window's largest lag. And a leader fault with a bound above it.
    synthetic.meta.update(leader_lease=3.0, leader_renew=0.6)
    synthetic.nemeses[PAUSE]["leader"] = True
    synthetic.meta.update(leader_lease=10.0)

    report, code = checked(synthetic, tmp_path)

    assert report.violations == 0
    assert report.rows[PARTITION].lag.fault.lags[-1] > 9.0
    assert report.rows[PAUSE].lag.fault.lags[-1] < 12.6
    assert code == EXIT_OK


def test_a_lasting_harm_is_judged_against_the_first_baseline_not_its_own(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    # From the partition on, every start is 0.3 s later (say, a worker that never listens
    # again): the later windows' own baselines are as bad as their after stretches.
    harmed_from = at(NEMESES[PARTITION][2][0])
    for line in synthetic.history:
        if line["slot"] >= harmed_from:
            line["mono"] += 0.3

    report, code = checked(synthetic, tmp_path)

    assert report.violations == 0
    assert report.unrecovered == ("partition-scheduler", "pause-primary")
    pause = report.rows[PAUSE].lag
    assert pause.baseline.p50 is not None
    assert pause.baseline.p50 > 0.3  # its own baseline would have let it pass
    assert pause.healthy == report.rows[KILL_WORKER].lag.baseline
    assert code == EXIT_VIOLATION


def stretch(*lags: float) -> LagSample:
    return LagSample(tuple(sorted(lags)))


def test_one_straggler_in_a_small_after_sample_does_not_decide_the_window() -> None:
    # 60 starts in the after stretch, the usual quick window: the nearest-rank p99 is the
    # largest, so one run the OS scheduler held back on a busy box would fail the window.
    healthy = stretch(*[0.02] * 29, 0.06)
    one = Lag(baseline=healthy, after=stretch(*[0.02] * 59, 1.2), after_due=60)
    two = Lag(baseline=healthy, after=stretch(*[0.02] * 58, 0.4, 1.2), after_due=60)

    assert one.recovered
    assert one.after.p99 == pytest.approx(0.02)
    assert not two.recovered  # a second late start is a pattern, not a straggler
    assert "exceed" in two.note


def test_a_sample_of_a_hundred_or_more_is_judged_by_its_nearest_rank_p99() -> None:
    healthy = stretch(*[0.02] * 99, 0.06)
    late = [0.02] * 198
    assert Lag(baseline=healthy, after=stretch(*late, 1.0, 1.0), after_due=200).recovered
    assert not Lag(baseline=healthy, after=stretch(*late, 0.3, 1.0, 1.0), after_due=201).recovered
    assert stretch(*[0.02] * 99, 0.9).p99 == pytest.approx(0.02)  # 100: the 99th of them


def test_the_p99_floor_follows_the_load_per_core_of_an_oversubscribed_box() -> None:
    # Two starts of 60 held back 300 ms: a pattern on an idle box, the OS's queue on one
    # running 1.3 processes per core (CI's nemesis run at load 2.6 on 2 cores).
    healthy = stretch(*[0.02] * 29, 0.06)
    after = stretch(*[0.02] * 58, 0.3, 0.3)
    assert not Lag(baseline=healthy, after=after, after_due=60, load=0.4).recovered
    assert not Lag(baseline=healthy, after=after, after_due=60, load=1.0).recovered
    busy = Lag(baseline=healthy, after=after, after_due=60, load=1.3)
    assert busy.recovered
    assert busy.threshold == pytest.approx(0.325)
    assert "passed only by the floor raised to 325 ms" in busy.note
    assert Lag(baseline=healthy, after=stretch(*[0.02] * 60), after_due=60, load=1.3).note == ""


def test_the_load_never_lifts_the_p99_floor_past_twice_or_the_p50_floor() -> None:
    healthy = stretch(*[0.02] * 29, 0.06)
    swamped = Lag(baseline=healthy, after=stretch(*[0.02] * 58, 0.6, 0.6), after_due=60, load=9)
    assert swamped.threshold == pytest.approx(0.5)
    assert not swamped.recovered
    # A harm that lasts shows in the p50, whose floor the load does not move.
    deaf = Lag(baseline=healthy, after=stretch(*[0.08] * 60), after_due=60, load=4)
    assert deaf.threshold_p50 == pytest.approx(0.06)
    assert not deaf.recovered


def test_the_checker_reads_each_windows_load_from_the_run_directory(
    synthetic: SyntheticRun, tmp_path: Path
) -> None:
    synthetic.nemeses[PAUSE]["load"] = 1.6  # written by chaos.run.run_window

    report, _ = checked(synthetic, tmp_path)

    assert report.rows[PAUSE].lag.load == 1.6
    assert report.rows[PAUSE].lag.floor == pytest.approx(0.4)
    assert report.rows[KILL_WORKER].lag.load == 0.0  # a run directory without it: idle
    assert report.to_json()["nemeses"][PAUSE]["lag"]["load"] == 1.6
