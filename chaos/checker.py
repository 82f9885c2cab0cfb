"""The nemesis run's checker: one pass over everything that happened, one row per nemesis.

``check(run_dir)`` reads a run directory (``chaos/README.md`` describes its files) and
returns a :class:`Report`; ``python -m chaos.checker RUN_DIR [--json]`` prints it and exits
1 on any violation or unrecovered lag, 0 when the run kept every guarantee, 2 when the
directory cannot be read.

How the history becomes executions
----------------------------------
Handlers write monotonic times; wall time is ``mono + meta.mono_offset``. A ``start`` line
and an ``end`` line belong to one execution when they share (run, token, pid); should one
key start twice, its ends pair with its starts in order. An execution without an ``end``
was killed with its process: it ends at that pid's first ``exit`` event (events.jsonl) at or
after its start, and when the harness saw no exit it is taken to run until the final
snapshot (``final.json`` ``db_now``), the most damning reading. A killed writer can leave
the last line of a ``.jsonl`` file cut short; that line is dropped. A bad line anywhere else
means the file is damaged and the check fails (exit 2) rather than guess.

The checks (README "What the checker reports")
----------------------------------------------
- **lost**: an acknowledged submit whose job has no succeeded run in the snapshot.
- **missed**: a cron slot from the job's first slot (:func:`first_slot`) up to
  ``cron_until`` with no snapshot run within :data:`SLOT_TOLERANCE` and no skip whose fate
  the job's misfire policy allows (:data:`ALLOWED_SKIP_FATES`); a slot that only a
  disallowed skip covers says "policy" in its detail.
- **duplicate**: one (job, slot) with more than one run id, snapshot and history together:
  reported once per slot, however many runs share it.
- **overlap**: per pair of executions of one run. Two claims with the same token are always
  a violation, even when they do not overlap in time: a claim executes once. Otherwise the
  pair counts when the later one starts before the earlier one ends and less than
  ``run_lease`` after it started (only an expired lease lets a run be claimed again).
- **stale**: per succeeded run whose ``result.token`` is not its ``fencing_token``, or is
  below the token of one of its executions; a succeeded run without a result is stale too
  (nothing shows its completion came from its last claim).
- **early**: per execution that started more than ``early_tolerance`` before its slot.
- **rerun**: in the window of a fault of the database itself (``"database": true`` in
  nemeses.jsonl: the database is away for every node at once), per execution that started
  after an earlier execution of the same run had returned ``ok``: a run whose worker lived
  through the outage lost its completion and ran again (docs/reliability.md, "Outages").
  Elsewhere at-least-once allows it (a killed or cut-off worker's finished run).

Each is attributed to the first nemesis window holding its time (the slot; for an overlap
and a rerun the later execution's start). Windows are half-open, ``baseline[0] <= t <
end``, so a time on the border of two back-to-back windows belongs to the later one; a time
in no window is reported on the "outside" row.

Lag
---
A run's start lag is the start of the earliest execution of its first attempt (the lowest
attempt the history shows) minus its slot. Per window, p50 and p99 (nearest rank:
:func:`tickwork.stats.percentile`) are taken over the runs whose slot lies in the baseline
``[baseline[0], baseline[1])`` and over the after stretch ``[heal + recovery, end)``: from
``recovery`` (2 s) after the heal, the lag must be back where it was before any fault. The
p99 leaves out at least the largest start of a sample: a quick window's after stretch has
some 60 starts, where the nearest-rank p99 *is* the largest, and one start that the OS
held back for a few hundred milliseconds on a busy 2-core box is noise, not a harm that
lasts (a worker that never listens again delays most starts, and the p50 shows it too).
From 100 starts on this is the plain nearest-rank p99.

The lag recovered when the after-p50 is at most ``max(3 x reference p50, 50 ms)`` and the
after-p99 at most ``max(3 x reference p99, 250 ms)``, where the reference is the *first*
window's baseline: the cluster before any fault, so that a fault whose harm lasts (a worker
that never listens again) does not lower the bar for the windows after it; an empty
reference leaves the floors. The 250 ms floor is multiplied by the machine's load per core
(``"load"`` in nemeses.jsonl: the 1-minute load average over the cores as the window
began, before its fault, so that a harm burning CPU cannot raise its own bar) when that is
above 1, at most by 2: on an oversubscribed box the OS holds a start back in proportion
to the queue (CI's run at load 2.6 on 2 cores once saw an after-p99 of 256 ms). The p50's
floor does not move, so a harm that delays most starts still fails the window; a window
that passed only by the raised floor says so in its note.
An empty after sample is *not recovered* when slots were due
in the after stretch (cron slots, acknowledged submits or snapshot runs) yet none of them
started, since a stalled cluster measures nothing; with nothing due it is vacuously
recovered. Either case is spelled out in the lag's ``note``.

The largest lag of a slot that fell while the fault was on (``[fault[0], fault[1])``) is
reported too. For a fault of the leader (``"leader": true`` in nemeses.jsonl) it must stay
within ``leader_lease + leader_renew + 2 s`` (kind **failover**): some scheduler must lead,
and trigger the missed slots, by then.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import sys
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, get_args

from tickwork.stats import percentile

Kind = Literal["lost", "missed", "duplicate", "overlap", "stale", "early", "failover", "rerun"]
KINDS: tuple[Kind, ...] = get_args(Kind)

SLOT_TOLERANCE = 0.001  # s: slot times are floats; closer than this they are the same slot
DEFAULT_EVERY = 1.0  # s: the workload's cron jobs fire every second (``* * * * * *``)
LAG_RECOVERY_FACTOR = 3.0  # after-p50 and -p99 may reach this many times the reference's ...
LAG_RECOVERY_FLOOR = 0.25  # s: ... or, for the p99, this (see Lag.floor), whichever is larger
LAG_LOAD_SCALE_MAX = 2.0  # the p99 floor follows a load per core above 1, up to this many times
LAG_RECOVERY_FLOOR_P50 = 0.05  # s: ... and for the p50, this
DEFAULT_RECOVERY = 2.0  # s: the after stretch starts this long after the heal
FAILOVER_SLACK = 2.0  # s: a leader fault may stall slots leader lease + renew + this
P50 = 50
P99 = 99

# Which ledger fates account for a cron slot under each misfire policy. The harness keeps
# every outage shorter than the grace, so under 'all' no slot may be skipped. A policy not
# listed allows nothing.
ALLOWED_SKIP_FATES: dict[str, frozenset[str]] = {
    "all": frozenset(),
    "once": frozenset({"coalesced"}),
    "skip": frozenset({"misfire"}),
}

EXIT_OK = 0
EXIT_VIOLATION = 1  # a violation, or a window whose lag did not recover
EXIT_UNREADABLE = 2  # the run directory is incomplete or damaged

OUTSIDE = "(outside windows)"


class RunDirError(Exception):
    """The run directory cannot be checked: a required file is missing or damaged."""


# --------------------------------------------------------------------------- the run


@dataclass(frozen=True, slots=True)
class Meta:
    mono_offset: float  # s: wall = CLOCK_MONOTONIC + mono_offset
    run_lease: float  # s
    lag_window: float  # s: the "after" lag is measured over the window's last lag_window
    early_tolerance: float  # s: a start may precede its slot by this much
    recovery: float = DEFAULT_RECOVERY  # s: after the heal, lag must be back within this
    failover_bound: float | None = None  # s: a leader fault may stall slots this long at most


@dataclass(frozen=True, slots=True)
class Nemesis:
    name: str
    targets: tuple[str, ...]
    baseline: tuple[float, float]
    fault: tuple[float, float]
    end: float
    leader: bool = False  # a fault of the leader: its stall is bounded by the failover bound
    database: bool = False  # a fault of the database itself: no finished run may run again
    load: float = 0.0  # the machine's 1-minute load average per core as the window began

    @property
    def start(self) -> float:
        return self.baseline[0]

    def holds(self, at: float) -> bool:
        return self.start <= at < self.end


@dataclass(frozen=True, slots=True)
class Execution:
    """One handler invocation, from its ``start`` line to its end (see the module doc)."""

    run: int
    job: int
    slot: float
    attempt: int
    token: int
    pid: int
    node: str
    start: float  # wall time
    end: float  # wall time
    ended_by: Literal["end", "exit", "snapshot"]
    outcome: str | None  # None when the handler never wrote its end line

    def describe(self) -> str:
        return (
            f"token {self.token} pid {self.pid}@{self.node} "
            f"{self.start:.3f}-{self.end:.3f} (ended by {self.ended_by})"
        )


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    kind: str  # "cron" or "once"
    misfire: str
    created_at: float
    every: float  # s between cron slots


@dataclass(frozen=True, slots=True)
class Run:
    id: int
    job_id: int
    scheduled_for: float
    state: str
    attempt: int
    fencing_token: int | None
    result_token: int | None  # None: the run has no result
    result_pid: int | None


@dataclass(frozen=True, slots=True)
class Skip:
    job_id: int
    first_slot: float
    last_slot: float
    fate: str
    run_id: int | None

    def covers(self, slot: float) -> bool:
        return self.first_slot - SLOT_TOLERANCE <= slot <= self.last_slot + SLOT_TOLERANCE


@dataclass(frozen=True, slots=True)
class Submit:
    job: int
    slot: float
    acked: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    db_now: float
    jobs: tuple[Job, ...]
    runs: tuple[Run, ...]
    skips: tuple[Skip, ...]
    cron_until: float


@dataclass(frozen=True, slots=True)
class History:
    """A run directory, parsed."""

    meta: Meta
    nemeses: tuple[Nemesis, ...]
    executions: tuple[Execution, ...]
    submits: tuple[Submit, ...]
    snapshot: Snapshot


def read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise RunDirError(f"{path}: missing") from exc
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise RunDirError(f"{path}: not a JSON object")
    return value


def read_jsonl(path: Path, *, required: bool = True) -> list[dict[str, Any]]:
    """The objects of a ``.jsonl`` file, dropping a last line cut short by a killed writer.

    An optional file that does not exist reads as empty.
    """
    if not path.exists():
        if required:
            raise RunDirError(f"{path}: missing")
        return []
    # A writer killed mid-character leaves a broken UTF-8 tail: it only spoils that line.
    lines = path.read_text(errors="replace").splitlines()
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == last:
                break
            raise RunDirError(f"{path}:{number + 1}: not JSON ({exc})") from exc
        if not isinstance(value, dict):
            if number == last:
                break
            raise RunDirError(f"{path}:{number + 1}: not a JSON object")
        records.append(value)
    return records


def wall_of(mono: float, meta: Meta) -> float:
    return mono + meta.mono_offset


def pair_executions(
    lines: Iterable[dict[str, Any]],
    events: Iterable[dict[str, Any]],
    meta: Meta,
    db_now: float,
) -> list[Execution]:
    """Executions from history lines: start and end paired by (run, token, pid).

    An execution without an end ends when its pid exited, else at ``db_now``.
    """
    starts: dict[tuple[int, int, int], list[dict[str, Any]]] = defaultdict(list)
    ends: dict[tuple[int, int, int], list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        key = (int(line["run"]), int(line["token"]), int(line["pid"]))
        if line.get("ev") == "start":
            starts[key].append(line)
        elif line.get("ev") == "end":
            ends[key].append(line)
    exits: dict[int, list[float]] = defaultdict(list)
    for event in events:
        if event.get("ev") == "exit":
            exits[int(event["pid"])].append(float(event["wall"]))
    for walls in exits.values():
        walls.sort()

    executions: list[Execution] = []
    for key, key_starts in starts.items():
        pending = deque(sorted(ends.get(key, []), key=lambda line: float(line["mono"])))
        for line in sorted(key_starts, key=lambda line: float(line["mono"])):
            start = wall_of(float(line["mono"]), meta)
            # An end stamped before this start belongs to nothing we know of: drop it.
            while pending and wall_of(float(pending[0]["mono"]), meta) < start:
                pending.popleft()
            ended_by: Literal["end", "exit", "snapshot"]
            outcome: str | None = None
            if pending:
                end_line = pending.popleft()
                end, ended_by = wall_of(float(end_line["mono"]), meta), "end"
                outcome = str(end_line.get("outcome"))
            else:
                pid_exits = exits.get(key[2], [])
                index = bisect.bisect_left(pid_exits, start)
                if index < len(pid_exits):
                    end, ended_by = pid_exits[index], "exit"
                else:
                    end, ended_by = db_now, "snapshot"
            executions.append(
                Execution(
                    run=key[0],
                    job=int(line["job"]),
                    slot=float(line["slot"]),
                    attempt=int(line.get("attempt", 1)),
                    token=key[1],
                    pid=key[2],
                    node=str(line.get("node", "?")),
                    start=start,
                    end=end,
                    ended_by=ended_by,
                    outcome=outcome,
                )
            )
    executions.sort(key=lambda execution: (execution.start, execution.run, execution.token))
    return executions


def parse_snapshot(final: dict[str, Any]) -> Snapshot:
    jobs = tuple(
        Job(
            id=int(job["id"]),
            kind=str(job["kind"]),
            misfire=str(job.get("misfire", "all")),
            created_at=float(job["created_at"]),
            every=float(job.get("every", DEFAULT_EVERY)),
        )
        for job in final.get("jobs", [])
    )
    runs: list[Run] = []
    for run in final.get("runs", []):
        result = run.get("result")
        has_token = isinstance(result, dict) and result.get("token") is not None
        has_pid = isinstance(result, dict) and result.get("pid") is not None
        token = run.get("fencing_token")
        runs.append(
            Run(
                id=int(run["id"]),
                job_id=int(run["job_id"]),
                scheduled_for=float(run["scheduled_for"]),
                state=str(run["state"]),
                attempt=int(run.get("attempt", 1)),
                fencing_token=None if token is None else int(token),
                result_token=int(result["token"]) if has_token else None,
                result_pid=int(result["pid"]) if has_pid else None,
            )
        )
    skips = tuple(
        Skip(
            job_id=int(skip["job_id"]),
            first_slot=float(skip["first_slot"]),
            last_slot=float(skip["last_slot"]),
            fate=str(skip["fate"]),
            run_id=None if skip.get("run_id") is None else int(skip["run_id"]),
        )
        for skip in final.get("skips", [])
    )
    return Snapshot(
        db_now=float(final["db_now"]),
        jobs=jobs,
        runs=tuple(runs),
        skips=skips,
        cron_until=float(final["cron_until"]),
    )


def _failover_bound(raw_meta: dict[str, Any]) -> float | None:
    """leader lease + renew + FAILOVER_SLACK, when the run says its leader timings."""
    if "leader_lease" not in raw_meta or "leader_renew" not in raw_meta:
        return None
    return float(raw_meta["leader_lease"]) + float(raw_meta["leader_renew"]) + FAILOVER_SLACK


def load(run_dir: Path) -> History:
    """Parse a run directory; :class:`RunDirError` names the file that cannot be read."""
    current = run_dir / "meta.json"
    try:
        raw_meta = read_json(current)
        meta = Meta(
            mono_offset=float(raw_meta["mono_offset"]),
            run_lease=float(raw_meta["run_lease"]),
            lag_window=float(raw_meta["lag_window"]),
            early_tolerance=float(raw_meta["early_tolerance"]),
            recovery=float(raw_meta.get("recovery", DEFAULT_RECOVERY)),
            failover_bound=_failover_bound(raw_meta),
        )
        current = run_dir / "final.json"
        snapshot = parse_snapshot(read_json(current))
        current = run_dir / "nemeses.jsonl"
        nemeses = tuple(
            Nemesis(
                name=str(line["name"]),
                targets=tuple(str(target) for target in line.get("targets", [])),
                baseline=(float(line["baseline"][0]), float(line["baseline"][1])),
                fault=(float(line["fault"][0]), float(line["fault"][1])),
                end=float(line["end"]),
                leader=bool(line.get("leader", False)),
                database=bool(line.get("database", False)),
                load=float(line.get("load", 0.0)),
            )
            for line in read_jsonl(current)
        )
        current = run_dir / "submits.jsonl"
        submits = tuple(
            Submit(job=int(line["job"]), slot=float(line["slot"]), acked=float(line["acked"]))
            for line in read_jsonl(current, required=False)
        )
        current = run_dir / "events.jsonl"
        events = read_jsonl(current, required=False)
        current = run_dir / "history.jsonl"
        executions = pair_executions(read_jsonl(current), events, meta, snapshot.db_now)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise RunDirError(f"{current}: missing or malformed field ({exc!r})") from exc
    return History(meta, nemeses, tuple(executions), submits, snapshot)


# --------------------------------------------------------------------------- the checks


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken guarantee, with what it takes to find it in the logs."""

    kind: Kind
    at: float  # wall time that places it in a window: the slot, or an overlap's later start
    job: int
    slot: float
    detail: str
    runs: tuple[int, ...] = ()
    tokens: tuple[int, ...] = ()
    pids: tuple[int, ...] = ()
    window: int | None = None  # index into Report.rows; None: outside every window

    def to_json(self, nemesis: str | None) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "nemesis": nemesis,
            "at": self.at,
            "job": self.job,
            "slot": self.slot,
            "runs": list(self.runs),
            "tokens": list(self.tokens),
            "pids": list(self.pids),
            "detail": self.detail,
        }


def first_slot(created_at: float, every: float = DEFAULT_EVERY) -> float:
    """A cron job's first slot: the first multiple of ``every`` s strictly after creation.

    Slots lie on the epoch grid, as cron's whole seconds and minutes do. A per-second job
    created at 12.3 has its first slot at 13.0; one created at exactly 12.0 also at 13.0,
    because a slot at the very instant of creation is not the job's. A per-minute job
    (``every=60``) created at 12.3 first fires at 60.0.
    """
    return (math.floor(created_at / every) + 1) * every


def cron_slots(job: Job, until: float) -> list[float]:
    """Every slot of ``job`` from its first slot up to and including ``until``."""
    first = first_slot(job.created_at, job.every)
    if first > until + SLOT_TOLERANCE:
        return []
    # Multiply rather than accumulate, so float error does not drift over a long run.
    count = math.floor((until + SLOT_TOLERANCE - first) / job.every) + 1
    return [first + index * job.every for index in range(count)]


def find_lost(history: History) -> list[Violation]:
    succeeded = {run.job_id for run in history.snapshot.runs if run.state == "succeeded"}
    runs_of: dict[int, list[Run]] = defaultdict(list)
    for run in history.snapshot.runs:
        runs_of[run.job_id].append(run)
    violations: list[Violation] = []
    seen: set[int] = set()
    for submit in history.submits:
        if submit.job in succeeded or submit.job in seen:
            continue
        seen.add(submit.job)
        runs = runs_of.get(submit.job, [])
        states = ", ".join(f"run {run.id} {run.state}" for run in runs) or "no run at all"
        violations.append(
            Violation(
                kind="lost",
                at=submit.slot,
                job=submit.job,
                slot=submit.slot,
                runs=tuple(run.id for run in runs),
                detail=f"submit acked at {submit.acked:.3f}, no succeeded run ({states})",
            )
        )
    return violations


def find_missed(history: History) -> list[Violation]:
    snapshot = history.snapshot
    run_slots: dict[int, list[float]] = defaultdict(list)
    for run in snapshot.runs:
        run_slots[run.job_id].append(run.scheduled_for)
    for slots in run_slots.values():
        slots.sort()
    skips_of: dict[int, list[Skip]] = defaultdict(list)
    for skip in snapshot.skips:
        skips_of[skip.job_id].append(skip)

    violations: list[Violation] = []
    for job in snapshot.jobs:
        if job.kind != "cron":
            continue
        allowed = ALLOWED_SKIP_FATES.get(job.misfire, frozenset())
        slots = run_slots.get(job.id, [])
        for slot in cron_slots(job, snapshot.cron_until):
            index = bisect.bisect_left(slots, slot - SLOT_TOLERANCE)
            if index < len(slots) and slots[index] <= slot + SLOT_TOLERANCE:
                continue
            covering = [skip for skip in skips_of.get(job.id, []) if skip.covers(slot)]
            if any(skip.fate in allowed for skip in covering):
                continue
            if covering:
                fates = ", ".join(
                    f"{skip.fate} [{skip.first_slot:.3f}, {skip.last_slot:.3f}]"
                    for skip in covering
                )
                detail = (
                    f"no run; skipped as {fates}, which misfire policy {job.misfire!r} "
                    f"does not allow"
                )
            else:
                detail = "no run and no skip"
            violations.append(
                Violation(kind="missed", at=slot, job=job.id, slot=slot, detail=detail)
            )
    return violations


def find_duplicates(history: History) -> list[Violation]:
    """One violation per (job, slot) that more than one run id claims."""
    # (slot, run id, where) per job, from both the snapshot and the history.
    claims: dict[int, list[tuple[float, int, str]]] = defaultdict(list)
    for run in history.snapshot.runs:
        claims[run.job_id].append((run.scheduled_for, run.id, "snapshot"))
    for execution in history.executions:
        claims[execution.job].append((execution.slot, execution.run, "history"))

    violations: list[Violation] = []
    for job, job_claims in sorted(claims.items()):
        job_claims.sort()
        group: list[tuple[float, int, str]] = []
        for claim in [*job_claims, (math.inf, -1, "")]:
            if group and claim[0] - group[0][0] <= SLOT_TOLERANCE:
                group.append(claim)
                continue
            run_ids = sorted({run_id for _, run_id, _ in group})
            if len(run_ids) > 1:
                slot = group[0][0]
                executions = [e for e in history.executions if e.run in run_ids]
                where = "; ".join(
                    f"{source}: {sorted({r for _, r, s in group if s == source})}"
                    for source in ("snapshot", "history")
                    if any(s == source for _, _, s in group)
                )
                violations.append(
                    Violation(
                        kind="duplicate",
                        at=slot,
                        job=job,
                        slot=slot,
                        runs=tuple(run_ids),
                        tokens=tuple(e.token for e in executions),
                        pids=tuple(e.pid for e in executions),
                        detail=f"{len(run_ids)} runs for one slot ({where})",
                    )
                )
            group = [claim]
    return violations


def find_overlaps(history: History) -> list[Violation]:
    by_run: dict[int, list[Execution]] = defaultdict(list)
    for execution in history.executions:
        by_run[execution.run].append(execution)
    lease = history.meta.run_lease
    violations: list[Violation] = []
    for run, executions in sorted(by_run.items()):
        for later_index, later in enumerate(executions):
            for earlier in executions[:later_index]:
                overlapping = later.start < earlier.end
                gap = later.start - earlier.start
                if earlier.token == later.token:
                    how = "overlapping" if overlapping else "one after the other"
                    reason = f"the same token executed twice, {how}"
                elif overlapping and gap < lease:
                    reason = (
                        f"overlap: the later started {gap:.3f} s after the earlier, "
                        f"within the {lease:g} s run lease"
                    )
                else:
                    continue
                violations.append(
                    Violation(
                        kind="overlap",
                        at=later.start,
                        job=later.job,
                        slot=later.slot,
                        runs=(run,),
                        tokens=(earlier.token, later.token),
                        pids=(earlier.pid, later.pid),
                        detail=f"{reason}: {earlier.describe()} and {later.describe()}",
                    )
                )
    return violations


def find_stale(history: History) -> list[Violation]:
    max_token: dict[int, Execution] = {}
    for execution in history.executions:
        known = max_token.get(execution.run)
        if known is None or execution.token > known.token:
            max_token[execution.run] = execution
    violations: list[Violation] = []
    for run in history.snapshot.runs:
        if run.state != "succeeded":
            continue
        reasons: list[str] = []
        newest = max_token.get(run.id)
        if run.result_token is None:
            reasons.append("succeeded without a result")
        else:
            if run.result_token != run.fencing_token:
                reasons.append(
                    f"accepted result token {run.result_token} (pid {run.result_pid}) "
                    f"is not the fencing token {run.fencing_token}"
                )
            if newest is not None and newest.token > run.result_token:
                reasons.append(
                    f"accepted result token {run.result_token} (pid {run.result_pid}) "
                    f"is older than an execution with {newest.describe()}"
                )
        if not reasons:
            continue
        tokens = [t for t in (run.result_token, run.fencing_token) if t is not None]
        pids = [p for p in (run.result_pid,) if p is not None]
        if newest is not None:
            tokens.append(newest.token)
            pids.append(newest.pid)
        violations.append(
            Violation(
                kind="stale",
                at=run.scheduled_for,
                job=run.job_id,
                slot=run.scheduled_for,
                runs=(run.id,),
                tokens=tuple(tokens),
                pids=tuple(pids),
                detail="; ".join(reasons),
            )
        )
    return violations


def find_early(history: History) -> list[Violation]:
    tolerance = history.meta.early_tolerance
    return [
        Violation(
            kind="early",
            at=execution.slot,
            job=execution.job,
            slot=execution.slot,
            runs=(execution.run,),
            tokens=(execution.token,),
            pids=(execution.pid,),
            detail=(
                f"started {execution.slot - execution.start:.3f} s before its slot "
                f"(tolerance {tolerance:g} s): {execution.describe()}"
            ),
        )
        for execution in history.executions
        if execution.start < execution.slot - tolerance
    ]


def find_reruns(history: History) -> list[Violation]:
    """Executions, in a window whose fault is the database's, of runs whose handler had
    returned ok before: the outage cost the run its completion."""
    returned: dict[int, Execution] = {}  # run -> its first execution that returned ok
    violations: list[Violation] = []
    for execution in history.executions:  # by start
        first = returned.get(execution.run)
        if first is not None and first.end <= execution.start:
            window = window_of(execution.start, history.nemeses)
            if window is not None and history.nemeses[window].database:
                violations.append(
                    Violation(
                        kind="rerun",
                        at=execution.start,
                        job=execution.job,
                        slot=execution.slot,
                        runs=(execution.run,),
                        tokens=(first.token, execution.token),
                        pids=(first.pid, execution.pid),
                        detail=f"executed again after it returned ok: {first.describe()}, "
                        f"then {execution.describe()}",
                    )
                )
        if first is None and execution.outcome == "ok":
            returned[execution.run] = execution
    return violations


# --------------------------------------------------------------------------- lag


@dataclass(frozen=True, slots=True)
class LagSample:
    """The start lags of the runs whose slot fell in one stretch of a window."""

    lags: tuple[float, ...]  # s, sorted

    @property
    def p50(self) -> float | None:
        return percentile(self.lags, P50)

    @property
    def p99(self) -> float | None:
        """The nearest-rank p99, but never the largest of two or more: below 100 starts
        the nearest rank is the maximum, and one start the OS held back on a busy box
        would decide the window (see the module doc)."""
        lags = self.lags
        if len(lags) < 2:
            return lags[0] if lags else None
        return lags[min(math.ceil(P99 * len(lags) / 100), len(lags) - 1) - 1]


@dataclass(frozen=True, slots=True)
class Lag:
    """Start lag before the fault and at the end of the window (see the module doc)."""

    baseline: LagSample
    after: LagSample
    after_due: int  # slots due in the after stretch, started or not
    fault: LagSample = LagSample(())  # slots that fell while the fault was on
    reference: LagSample | None = None  # the healthy cluster: the first window's baseline
    load: float = 0.0  # load per core as the window began (Nemesis.load)

    @property
    def healthy(self) -> LagSample:
        """What "back to its level" means: the first window's baseline (the cluster before
        any fault: a fault whose harm lasts must not lower the bar for the next ones), or
        this window's own baseline when there is no reference."""
        if self.reference is not None and self.reference.p99 is not None:
            return self.reference
        return self.baseline

    @property
    def floor(self) -> float:
        """The p99 threshold's floor, in seconds: LAG_RECOVERY_FLOOR, times the load per
        core when the box was oversubscribed (a start the OS holds back waits about that
        much longer), at most LAG_LOAD_SCALE_MAX times."""
        return LAG_RECOVERY_FLOOR * min(max(1.0, self.load), LAG_LOAD_SCALE_MAX)

    @property
    def threshold(self) -> float:
        """The largest after-p99 that counts as recovered, in seconds."""
        return self._threshold(self.floor)

    @property
    def unscaled(self) -> float:
        """:attr:`threshold` on an idle machine (the floor not raised by the load)."""
        return self._threshold(LAG_RECOVERY_FLOOR)

    def _threshold(self, floor: float) -> float:
        p99 = self.healthy.p99
        return floor if p99 is None else max(LAG_RECOVERY_FACTOR * p99, floor)

    @property
    def threshold_p50(self) -> float:
        """The largest after-p50 that counts as recovered, in seconds."""
        p50 = self.healthy.p50
        floor = LAG_RECOVERY_FLOOR_P50
        return floor if p50 is None else max(LAG_RECOVERY_FACTOR * p50, floor)

    @property
    def recovered(self) -> bool:
        if self.after.p99 is None or self.after.p50 is None:
            return self.after_due == 0
        return self.after.p99 <= self.threshold and self.after.p50 <= self.threshold_p50

    @property
    def note(self) -> str:
        notes: list[str] = []
        if self.baseline.p99 is None:
            notes.append(
                f"no run started with its slot in the baseline: the threshold is the "
                f"{self.floor * 1000:.0f} ms floor"
            )
        if self.after.p99 is None:
            if self.after_due:
                notes.append(
                    f"{self.after_due} slots were due in the after stretch but none started: "
                    f"not recovered"
                )
            else:
                notes.append("nothing was due in the after stretch: recovered, vacuously")
        elif not self.recovered:
            assert self.after.p50 is not None
            if self.load > 1:
                notes.append(
                    f"load {self.load:g} per core: the p99 floor is {self.floor * 1000:.0f} ms"
                )
            notes.append(
                f"after-p50/p99 {self.after.p50 * 1000:.0f}/{self.after.p99 * 1000:.0f} ms "
                f"exceed {self.threshold_p50 * 1000:.0f}/{self.threshold * 1000:.0f} ms"
            )
        if self.recovered and self.after.p99 is not None and self.after.p99 > self.unscaled:
            notes.append(
                f"after-p99 {self.after.p99 * 1000:.0f} ms passed only by the floor raised to "
                f"{self.floor * 1000:.0f} ms at load {self.load:g} per core"
            )
        return "; ".join(notes)


def start_lags(executions: Iterable[Execution]) -> dict[int, tuple[float, float]]:
    """Per run id: (slot, start lag) of the earliest execution of its first attempt."""
    first: dict[int, Execution] = {}
    for execution in executions:
        known = first.get(execution.run)
        if known is None or (execution.attempt, execution.start) < (known.attempt, known.start):
            first[execution.run] = execution
    return {run: (e.slot, e.start - e.slot) for run, e in first.items()}


def sample(lags: Iterable[tuple[float, float]], start: float, end: float) -> LagSample:
    return LagSample(tuple(sorted(lag for slot, lag in lags if start <= slot < end)))


def due_slots(history: History) -> list[float]:
    """Every slot something should have started at: cron slots, submits, snapshot runs."""
    slots = [submit.slot for submit in history.submits]
    slots.extend(run.scheduled_for for run in history.snapshot.runs)
    for job in history.snapshot.jobs:
        if job.kind == "cron":
            slots.extend(cron_slots(job, history.snapshot.cron_until))
    return sorted(slots)


# --------------------------------------------------------------------------- the report


@dataclass(frozen=True, slots=True)
class Row:
    """One nemesis window; its violation counts are ``Report.counts(index)``."""

    nemesis: Nemesis
    lag: Lag


@dataclass(frozen=True, slots=True)
class Report:
    """What ``check`` found: one row per nemesis window and every violation in detail.

    ``violations`` is the number of violations, ``details`` the violations themselves (each
    knows its window; None is outside every window), ``ok`` whether the run kept every
    guarantee and every window's lag recovered.
    """

    run_dir: Path
    rows: tuple[Row, ...]
    details: tuple[Violation, ...]

    @property
    def violations(self) -> int:
        return len(self.details)

    @property
    def unrecovered(self) -> tuple[str, ...]:
        """Names of the nemeses whose lag did not recover."""
        return tuple(row.nemesis.name for row in self.rows if not row.lag.recovered)

    @property
    def ok(self) -> bool:
        return not self.details and not self.unrecovered

    def counts(self, window: int | None) -> dict[Kind, int]:
        """Violations per kind in row ``window`` (None: outside every window)."""
        counts: dict[Kind, int] = dict.fromkeys(KINDS, 0)
        for violation in self.details:
            if violation.window == window:
                counts[violation.kind] += 1
        return counts

    def nemesis_name(self, window: int | None) -> str:
        return OUTSIDE if window is None else self.rows[window].nemesis.name

    def table(self) -> list[list[str]]:
        """Header and one line of cells per nemesis, then the outside row."""
        lines = [
            [
                "nemesis",
                "lost",
                "missed",
                "dup",
                "overlap",
                "stale",
                "early",
                "failover",
                "rerun",
                "lag p50/p99 before (ms)",
                "max lag in fault (ms)",
                "lag p50/p99 after (ms)",
                "recovered",
            ]
        ]
        windows: list[int | None] = [*range(len(self.rows)), None]
        for window in windows:
            counts = self.counts(window)
            cells = [self.nemesis_name(window), *(str(counts[kind]) for kind in KINDS)]
            if window is None:
                cells += ["-", "-", "-", "-"]
            else:
                lag = self.rows[window].lag
                cells += [
                    milliseconds(lag.baseline),
                    f"{lag.fault.lags[-1] * 1000:.0f}" if lag.fault.lags else "-",
                    milliseconds(lag.after),
                    "yes" if lag.recovered else "no",
                ]
            lines.append(cells)
        return lines

    def render(self) -> str:
        """The table in fixed-width columns, then every violation and lag note."""
        lines = self.table()
        widths = [max(len(line[column]) for line in lines) for column in range(len(lines[0]))]
        text = [
            "  ".join(
                cell.ljust(width) if column == 0 else cell.rjust(width)
                for column, (cell, width) in enumerate(zip(line, widths, strict=True))
            ).rstrip()
            for line in lines
        ]
        for row in self.rows:
            if row.lag.note:
                text.append(f"lag {row.nemesis.name}: {row.lag.note}")
        for violation in self.details:
            text.append(
                f"{violation.kind} [{self.nemesis_name(violation.window)}] job {violation.job} "
                f"slot {violation.slot:.3f} runs {list(violation.runs)}: {violation.detail}"
            )
        text.append(self.verdict())
        return "\n".join(text)

    def markdown(self) -> str:
        """The same table as a Markdown table, for the docs."""
        header, *body = self.table()
        numeric = [False, *([True] * (len(header) - 1))]
        lines = [
            "| " + " | ".join(header) + " |",
            "| " + " | ".join("---:" if right else "---" for right in numeric) + " |",
            *("| " + " | ".join(cells) + " |" for cells in body),
        ]
        return "\n".join(lines)

    def verdict(self) -> str:
        if self.ok:
            return "ok: no violation, lag recovered in every window"
        parts = [f"{self.violations} violation(s)"] if self.details else []
        if self.unrecovered:
            parts.append("lag not recovered after " + ", ".join(self.unrecovered))
        return "FAIL: " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        def lag_json(lag: LagSample) -> dict[str, Any]:
            return {"n": len(lag.lags), "p50": lag.p50, "p99": lag.p99}

        return {
            "run_dir": str(self.run_dir),
            "ok": self.ok,
            "violations": self.violations,
            "nemeses": [
                {
                    "name": row.nemesis.name,
                    "counts": self.counts(window),
                    "lag": {
                        "baseline": lag_json(row.lag.baseline),
                        "fault_max": row.lag.fault.lags[-1] if row.lag.fault.lags else None,
                        "after": lag_json(row.lag.after),
                        "after_due": row.lag.after_due,
                        "threshold": row.lag.threshold,
                        "load": row.lag.load,
                        "recovered": row.lag.recovered,
                        "note": row.lag.note,
                    },
                }
                for window, row in enumerate(self.rows)
            ],
            "outside": self.counts(None),
            "details": [
                violation.to_json(
                    None if violation.window is None else self.nemesis_name(violation.window)
                )
                for violation in self.details
            ],
        }


def milliseconds(lag: LagSample) -> str:
    if lag.p50 is None or lag.p99 is None:
        return "-"
    return f"{lag.p50 * 1000:.0f}/{lag.p99 * 1000:.0f}"


def window_of(at: float, nemeses: Sequence[Nemesis]) -> int | None:
    """The first window holding ``at`` (windows are half-open), None when none does."""
    return next((index for index, nemesis in enumerate(nemeses) if nemesis.holds(at)), None)


def check(run_dir: Path) -> Report:
    """Check a run directory against tickwork's guarantees (see the module doc)."""
    history = load(run_dir)
    found = [
        *find_lost(history),
        *find_missed(history),
        *find_duplicates(history),
        *find_overlaps(history),
        *find_stale(history),
        *find_early(history),
        *find_reruns(history),
    ]
    details = tuple(
        sorted(
            (replace(v, window=window_of(v.at, history.nemeses)) for v in found),
            key=lambda v: (v.at, KINDS.index(v.kind), v.job),
        )
    )
    lags = list(start_lags(history.executions).values())
    due = due_slots(history)
    rows = []
    slow: list[Violation] = []
    reference = sample(lags, *history.nemeses[0].baseline) if history.nemeses else None
    for window, nemesis in enumerate(history.nemeses):
        after_start = min(nemesis.fault[1] + history.meta.recovery, nemesis.end)
        after_due = bisect.bisect_left(due, nemesis.end) - bisect.bisect_left(due, after_start)
        lag = Lag(
            baseline=sample(lags, *nemesis.baseline),
            after=sample(lags, after_start, nemesis.end),
            after_due=after_due,
            fault=sample(lags, *nemesis.fault),
            reference=reference,
            load=nemesis.load,
        )
        rows.append(Row(nemesis, lag))
        slow.extend(find_slow_failover(nemesis, lag, history.meta, window))
    details = tuple(sorted((*details, *slow), key=lambda v: (v.at, KINDS.index(v.kind), v.job)))
    return Report(run_dir, tuple(rows), details)


def find_slow_failover(nemesis: Nemesis, lag: Lag, meta: Meta, window: int) -> list[Violation]:
    """A leader fault whose slots waited longer than the failover bound (leader lease +
    renew + 2 s): some scheduler must lead, and trigger the missed slots, by then."""
    bound = meta.failover_bound
    worst = lag.fault.lags[-1] if lag.fault.lags else None
    if not nemesis.leader or bound is None or worst is None or worst <= bound:
        return []
    return [
        Violation(
            kind="failover",
            at=nemesis.fault[0],
            job=0,
            slot=nemesis.fault[0],
            detail=(
                f"a slot that fell during the fault started {worst:.2f} s late; failover "
                f"must take at most {bound:.2f} s (leader lease + renew + {FAILOVER_SLACK:g} s)"
            ),
            window=window,
        )
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chaos.checker",
        description="Check a nemesis run directory; exit 1 on a violation or unrecovered lag.",
    )
    parser.add_argument("run_dir", type=Path, help="the run directory (chaos/README.md)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        report = check(args.run_dir)
    except RunDirError as exc:
        print(f"cannot check {args.run_dir}: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    print(json.dumps(report.to_json(), indent=2) if args.json else report.render())
    return EXIT_OK if report.ok else EXIT_VIOLATION


if __name__ == "__main__":
    sys.exit(main())
