"""What the run transitions return: a submit, a trigger's runs and slot ledger, a lease's
status, a rescue, and a run's attempts (with the bounds on what an attempt keeps)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

from tickwork.faults import InjectedFault
from tickwork.job import Job, Run


@dataclass(frozen=True, slots=True)
class Submitted:
    job: Job
    created: bool  # False: an idempotency key or schedule name matched an existing job
    run: Run | None = None  # the run enqueued at submit, when the first slot was already due
    warnings: tuple[str, ...] = ()  # e.g. the DST changes of the next year the job meets


class SlotFate(StrEnum):
    """Why a slot of a recurring job did not get a run of its own (the slot ledger)."""

    MISFIRE = "misfire"  # older than the misfire grace; policy skip (or beyond the 'all' limit)
    COALESCED = "coalesced"  # folded into one run by misfire policy 'once'
    OVERLAP = "overlap"  # overlap 'forbid': the previous run was unfinished
    REPLACED = "replaced"  # overlap 'replace': a later slot of the same batch superseded it
    PAUSED = "paused"  # fell while the job was paused
    CANCELLED = "cancelled"  # fell after the job was cancelled (recorded by explain only)


class FaultMark(NamedTuple):
    """A fault a worker injected into the attempt that holds ``run_id`` under
    ``fencing_token`` (:mod:`tickwork.faults`), to be marked on the run."""

    run_id: int
    fencing_token: int
    fault: str
    by_run: int | None = None  # a crash: the run whose handler it came after, if another


@dataclass(frozen=True, slots=True)
class InjectedRun:
    """A run that executed more than once because of injected faults, and the faults."""

    run: Run
    faults: list[InjectedFault]

    @property
    def id(self) -> int:
        return self.run.id


@dataclass(frozen=True, slots=True)
class SlotSkip:
    """A run of consecutive slots of one job that share a fate."""

    job_id: int
    first_slot: datetime
    last_slot: datetime
    count: int  # slots in [first_slot, last_slot]; at least this many when `more` is set
    fate: SlotFate
    run_id: int | None = None  # the run it was coalesced into, when there is one
    more: bool = False  # more slots than were counted (a very long outage)
    recorded_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class TriggerResult:
    runs: list[Run] = field(default_factory=list)  # runs created by this call
    skipped: list[SlotSkip] = field(default_factory=list)
    cancelled_run_ids: list[int] = field(default_factory=list)  # overlap 'replace'
    jobs_advanced: int = 0
    batch_full: bool = False  # there may be more due jobs: call again without sleeping
    next_due_at: datetime | None = None  # earliest next_run_at after this call
    now: datetime | None = None  # the store's clock for this call (callers plan sleeps by it)


class LeaseStatus(StrEnum):
    HELD = "held"  # the lease was extended
    CANCELLED = "cancelled"  # the run was cancelled: stop the handler, report nothing
    LOST = "lost"  # the run was rescued, re-claimed or finished: stop, report nothing


@dataclass(frozen=True, slots=True)
class LeaseReport:
    """What a heartbeat found: the lease held (and until when), or why not."""

    status: LeaseStatus
    lease_expires_at: datetime | None


class Completion(NamedTuple):
    """A success to write: the run, the fencing token it was claimed under, its result."""

    run_id: int
    fencing_token: int
    result: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class RescueResult:
    requeued: list[int] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)


class AttemptEnd(StrEnum):
    """Why an attempt of a run ended: the outcome its history shows."""

    SUCCEEDED = "succeeded"  # the handler returned: the run succeeded (complete)
    FAILED = "failed"  # the handler raised or the worker refused it: retried, or dead (fail)
    TIMED_OUT = "timed_out"  # the run's timeout passed: the worker failed it (fail)
    LEASE_LOST = "lease_lost"  # its lease expired and the leader rescued the run (rescue)
    RELEASED = "released"  # its worker stopped and handed the run back (release)
    CANCELLED = "cancelled"  # an operator, or overlap 'replace', cancelled the run (cancel)
    INJECTED_FAULT = "injected_fault"  # a fault the worker injected ended it (mark, then any)


ATTEMPTS_KEPT = 20
"""Ended attempts a run keeps in its history; with more, the oldest are dropped (and
counted: :attr:`RunAttempts.dropped`). An attempt that runs now, or the one that
succeeded, is read from the run itself and never dropped."""
ATTEMPT_ERROR_LIMIT = 2048
"""Bytes (UTF-8) of an attempt's error (the exception line) kept; longer ones are cut in
the middle, with a marker saying how much (:func:`cut`)."""
ATTEMPT_TRACEBACK_LIMIT = 8192
"""Bytes (UTF-8) of an attempt's traceback kept, cut as :data:`ATTEMPT_ERROR_LIMIT`: its
first quarter (where a chain of exceptions starts) and the end (the innermost frames and
the exception)."""
RUN_ERROR_LIMIT = 8192
"""Characters of a run's ``error``: the last attempt's error and the end of its
traceback (:func:`run_error`)."""
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` with what no store can hold replaced by U+FFFD: a NUL (PostgreSQL text) and
    a lone surrogate (not UTF-8; ``str(exc)`` of bytes decoded with surrogateescape)."""
    return _UNSTORABLE.sub("\ufffd", text)


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` bytes of UTF-8: whole when it fits, else its first
    quarter and its end around a marker, ``[... 1234 bytes cut ...]``, split between
    characters. 4,000 bytes at a limit of 1,000 keep the first 243 and the last 731."""
    data = text.encode()
    if len(data) <= limit:
        return text
    # Sized for the largest count it could say (the whole text), so the result fits.
    marker = f"\n[... {len(data)} bytes cut ...]\n"
    room = max(limit - len(marker.encode()), 0)
    head = room // 4
    tail = room - head
    start = data[:head].decode(errors="ignore")
    end = data[len(data) - tail :].decode(errors="ignore") if tail else ""
    dropped = len(data) - len(start.encode()) - len(end.encode())
    return f"{start}\n[... {dropped} bytes cut ...]\n{end}"


def run_error(error: str, traceback: str | None = None) -> str:
    """What a run's ``error`` says after a failed attempt: the attempt's ``error`` and,
    when there is a traceback, as much of its end as fits in :data:`RUN_ERROR_LIMIT`
    characters (the whole traceback is on the attempt)."""
    if traceback is None:
        return error[:RUN_ERROR_LIMIT]
    room = RUN_ERROR_LIMIT - len(error) - 2
    if room <= 0:
        return error[:RUN_ERROR_LIMIT]
    return f"{error}\n\n{traceback.strip()[-room:]}"


TRACEBACK_START = "Traceback (most recent call last):"


def error_head(error: str) -> str:
    """The exception line of a run's ``error`` (:func:`run_error`'s ``error``, before the
    traceback): ``RuntimeError: flaky 15 failed``, its first line when it has several. An
    error that is a bare traceback (older rows, a handler's own text) gives its last line,
    where Python prints the exception."""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith(TRACEBACK_START):
        return lines[-1].strip()
    return lines[0].strip()


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt of a run, in its history (:meth:`tickwork.store.Store.run_attempts`).

    (Named so beside the worker's own in-flight ``Attempt``.) ``attempt`` is the run's
    attempt number at the time: a release spends none, so two records can share one, and
    an operator's retry starts again at 1. ``fencing_token`` is the token its claim
    issued; ``worker`` and ``started_at`` are its claim's. ``ended_at`` and ``ended`` are
    None while it runs. ``error`` is the exception line (or why it ended: the rescue's
    "lease expired ...", "cancelled"), ``traceback`` the handler's, when it raised; each is
    cut to its limit (:data:`ATTEMPT_ERROR_LIMIT`, :data:`ATTEMPT_TRACEBACK_LIMIT`)."""

    attempt: int
    fencing_token: int
    worker: str | None
    started_at: datetime | None
    ended_at: datetime | None
    ended: AttemptEnd | None
    error: str | None = None
    traceback: str | None = None


@dataclass(frozen=True, slots=True)
class RunAttempts:
    """A run as read with its attempts (one snapshot), oldest first: those kept (at most
    :data:`ATTEMPTS_KEPT` ended ones, then the one that runs now or succeeded), and how
    many older ones were dropped."""

    run: Run
    attempts: list[AttemptRecord]
    dropped: int = 0

    @property
    def run_id(self) -> int:
        return self.run.id
