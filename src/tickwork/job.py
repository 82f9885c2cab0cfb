"""Jobs and runs: value types, states and the allowed transitions.

``docs/job-lifecycle.md`` draws the run state machine; the words are those of
``docs/glossary.md``.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple, TypeVar

from tickwork.errors import InvalidArgs, ValidationError
from tickwork.retry import RetryPolicy
from tickwork.schedule import Schedule

MAX_ARGS_BYTES = 256 * 1024
"""Default limit on a job's JSON args, encoded as UTF-8."""
MAX_RESULT_BYTES = 256 * 1024
"""Limit on a run's JSON result, encoded as UTF-8 (the ``http`` and ``shell`` tasks keep
only the last 4 KiB of output, far below it)."""
MAX_ARGS_DEPTH = 32
"""How deep a job's args may nest, the args object itself being the first level. Deep
enough for any payload in use (GeoJSON, JSON Schema documents stay under 20), and far below
the depth at which what handles args after submit gives up: pydantic's serializer (about
250 levels), Python's json (under 1000, fewer in a deep call stack), ``copy.deepcopy``."""
TOO_DEEP = "(nested too deeply to show)"
"""What :func:`shown_json` puts where a value nests deeper than it shows."""
DEFAULT_TENANT = "default"
DEFAULT_QUEUE = "default"
DEFAULT_MISFIRE_GRACE = timedelta(seconds=60)
"""A missed slot younger than this at trigger time still counts as on time."""
DEFAULT_MISFIRE_LIMIT = 100
"""Misfire ``all`` enqueues at most this many missed slots per job per catch-up."""
MAX_NAME_LENGTH = 200
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Unicode's explicit embeddings, overrides and isolates: text holding one is shown in
another order than it is written ("Trojan Source"). A name in a right-to-left script needs
none of them."""
E = TypeVar("E", bound=StrEnum)

_CONTROLS_AS_CODES = {
    code: f"[U+{code:04X}]"
    for code in (
        *(c for c in range(0x20) if chr(c) not in "\t\n\r"),
        *range(0x7F, 0xA0),
        *(ord(ch) for ch in BIDI_CONTROLS),
    )
}


class ScheduleState(StrEnum):
    """Whether a job's schedule still gets slots triggered: what the store keeps
    (``tickwork_jobs.state``) and what trigger, pause, resume and cancel act on. Not what a
    user reads: that is the job's :class:`JobState`, derived from this and, for a one-off
    job, from its run (docs/job-lifecycle.md)."""

    ACTIVE = "active"  # slots are triggered as they fall due
    PAUSED = "paused"  # no slot is triggered until resume (runs already queued still run)
    CANCELLED = "cancelled"  # final: no more slots; queued runs were cancelled
    COMPLETED = "completed"  # no slot remains to trigger; its last run may still be waiting


class JobState(StrEnum):
    """What a job is doing, in an operator's words (docs/job-lifecycle.md).

    A recurring job is ``active``, ``paused`` or ``cancelled``. A one-off job is
    ``scheduled`` until its slot is triggered and then reads as its run: ``queued``,
    ``running``, ``failed`` (an attempt failed; the retry waits), ``succeeded``, ``dead`` or
    ``cancelled``; or it is ``paused`` or ``cancelled`` itself. ``finished``: no slot is left
    and no run says how it went (its runs were pruned past the retention, or a recurring
    schedule reached the calendar's end). Derived on every read by :meth:`of` (and, for the
    listings' filter, by the same rule in each store's SQL); never stored.
    """

    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    FAILED = "failed"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    ACTIVE = "active"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    FINISHED = "finished"

    @classmethod
    def of(cls, schedule: ScheduleState, one_off: bool, latest_run: str | None) -> JobState:
        """The state of a job whose schedule is in ``schedule``, a one-off job or not, whose
        latest run (by slot) is in ``latest_run`` (a :class:`RunState` value; None: no run,
        or not read because the schedule is not completed)."""
        if schedule is ScheduleState.ACTIVE:
            return cls.SCHEDULED if one_off else cls.ACTIVE
        if schedule is ScheduleState.COMPLETED:
            if one_off and latest_run is not None:
                return _JOB_STATE_OF_RUN[latest_run]
            return cls.FINISHED
        return _JOB_STATE_OF_SCHEDULE[schedule]

    @property
    def has_slots(self) -> bool:
        """Whether the job's schedule may still trigger a slot (now, or once resumed)."""
        return self in (JobState.SCHEDULED, JobState.ACTIVE, JobState.PAUSED)


RETIRED_JOB_STATES = {
    "completed": (
        "job state 'completed' is gone: a one-off job now says how its run went (queued, "
        "running, failed, succeeded, dead, cancelled), and 'finished' once its runs were "
        "pruned; recurring jobs are active, paused or cancelled"
    ),
}
"""Job states that older tickwork had, and what each became (the message of the
ValidationError a filter on one gets)."""


class RunState(StrEnum):
    QUEUED = "queued"  # waiting for its run_at, then for a worker
    RUNNING = "running"  # claimed: a worker holds a lease and a fencing token
    SUCCEEDED = "succeeded"  # final
    FAILED = "failed"  # an attempt failed; the retry waits for run_at
    DEAD = "dead"  # final: attempts exhausted or discarded (the dead-letter list)
    CANCELLED = "cancelled"  # final


FINISHED_RUN_STATES = frozenset({RunState.SUCCEEDED, RunState.DEAD, RunState.CANCELLED})

_JOB_STATE_OF_RUN = {run.value: JobState(run.value) for run in RunState}
"""A completed one-off job reads as its latest run: each run state has its job state, of
the same name."""
_JOB_STATE_OF_SCHEDULE = {
    ScheduleState.PAUSED: JobState.PAUSED,
    ScheduleState.CANCELLED: JobState.CANCELLED,
}

RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.RUNNING, RunState.CANCELLED}),
    RunState.RUNNING: frozenset(
        {
            RunState.SUCCEEDED,  # complete
            RunState.FAILED,  # fail, attempts left
            RunState.DEAD,  # fail on the last attempt; rescue on the last attempt
            RunState.QUEUED,  # rescue (lease expired) or release (graceful stop)
            RunState.CANCELLED,  # cancel
        }
    ),
    RunState.FAILED: frozenset({RunState.RUNNING, RunState.QUEUED, RunState.CANCELLED}),
    RunState.DEAD: frozenset({RunState.QUEUED}),  # retry by an operator
    RunState.SUCCEEDED: frozenset(),
    RunState.CANCELLED: frozenset(),
}


def can_transition(src: RunState, dst: RunState) -> bool:
    return dst in RUN_TRANSITIONS[src]


class MisfirePolicy(StrEnum):
    SKIP = "skip"  # resume at the next future slot
    ONCE = "once"  # one run for all missed slots (the default)
    ALL = "all"  # every missed slot, up to DEFAULT_MISFIRE_LIMIT


class OverlapPolicy(StrEnum):
    ALLOW = "allow"  # a new slot runs even while the previous run is unfinished
    FORBID = "forbid"  # skip a slot while the previous run is unfinished
    REPLACE = "replace"  # cancel the unfinished run, then run the new slot


TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
"""A W3C trace context ``traceparent`` header, version 00."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a caller submits; validated on construction, so a store only sees good input."""

    task: str
    schedule: Schedule
    args: dict[str, Any] = field(default_factory=dict)
    tenant: str = DEFAULT_TENANT
    name: str | None = None
    queue: str = DEFAULT_QUEUE
    priority: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout: timedelta | None = None
    misfire: MisfirePolicy = MisfirePolicy.ONCE
    misfire_grace: timedelta = DEFAULT_MISFIRE_GRACE
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    idempotency_key: str | None = None
    max_args_bytes: int = MAX_ARGS_BYTES
    trace_context: str | None = None
    """The W3C ``traceparent`` of the submitting span (:mod:`tickwork.worker.otel`): set by
    the client at submit while a span is active; a job's runs' spans link to it."""

    def __post_init__(self) -> None:
        check_label("task", self.task)
        check_label("tenant", self.tenant)
        check_label("queue", self.queue)
        if self.name is not None:
            check_label("name", self.name)
        if self.idempotency_key is not None:
            check_label("idempotency_key", self.idempotency_key)
        if not isinstance(self.priority, int) or isinstance(self.priority, bool):
            raise ValidationError(
                f"priority must be an integer, got {self.priority!r}", field="priority"
            )
        if not -1000 <= self.priority <= 1000:
            raise ValidationError(
                f"priority must be between -1000 and 1000, got {self.priority}", field="priority"
            )
        if self.timeout is not None and self.timeout <= timedelta(0):
            raise ValidationError("timeout must be positive", field="timeout")
        if self.misfire_grace < timedelta(0):
            raise ValidationError("misfire_grace must not be negative", field="misfire_grace")
        object.__setattr__(self, "misfire", _choice(MisfirePolicy, self.misfire, "misfire"))
        object.__setattr__(self, "overlap", _choice(OverlapPolicy, self.overlap, "overlap"))
        check_args(self.args, self.max_args_bytes)
        if self.trace_context is not None and not TRACEPARENT.fullmatch(self.trace_context):
            raise ValidationError(
                f"trace_context must be a W3C traceparent, got {self.trace_context!r}",
                field="trace_context",
            )

    @property
    def args_json(self) -> str:
        return json.dumps(self.args, separators=(",", ":"), sort_keys=True)


def check_args(args: object, limit: int = MAX_ARGS_BYTES) -> None:
    """Args must be a JSON object of at most ``limit`` bytes, nested at most
    :data:`MAX_ARGS_DEPTH` deep, that every store can hold, or InvalidArgs."""
    if not isinstance(args, dict):
        raise InvalidArgs(f"args must be a JSON object, got {type(args).__name__}")
    if not args:  # most jobs' args: nothing to walk or encode
        return
    # Depth first, by a loop: encoding a value nested thousands deep would itself overflow.
    if _depth(args) > MAX_ARGS_DEPTH:
        raise InvalidArgs(_TOO_DEEP_MESSAGE)
    try:
        encoded = json.dumps(args, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidArgs(f"args are not JSON-serialisable: {exc}") from None
    if len(encoded) > limit:
        raise InvalidArgs(f"args are {len(encoded)} bytes encoded; the limit is {limit} bytes")
    problem = _unstorable_text(args)
    if problem is not None:
        raise InvalidArgs(f"args contain {problem}")


_TOO_DEEP_MESSAGE = f"args are nested deeper than {MAX_ARGS_DEPTH} levels"


def result_problem(result: object, limit: int = MAX_RESULT_BYTES) -> str | None:
    """Why a store cannot hold ``result`` (a handler's result, a failure's), or None.

    The same rules as args (:func:`check_args`): JSON, nested at most MAX_ARGS_DEPTH deep,
    at most ``limit`` bytes encoded, text a database can store. A worker checks a result
    before writing it: completions are written in batches, and one the store refused would
    hold every other completion of the batch back with it, again at every retry.
    """
    if _depth(result) > MAX_ARGS_DEPTH:
        return f"it is nested deeper than {MAX_ARGS_DEPTH} levels"
    try:
        encoded = json.dumps(result, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        return f"it is not JSON ({exc})"
    if len(encoded) > limit:
        return f"it is {len(encoded)} bytes encoded; the limit is {limit} bytes"
    problem = _unstorable_text(result)
    return None if problem is None else f"it contains {problem}"


def _depth(value: object) -> int:
    """How deep dicts and lists nest in ``value`` (a scalar is 0, ``{}`` is 1)."""
    deepest = 0
    pending = [(value, 1)]
    while pending:  # a loop, not recursion: the value may nest past the recursion limit
        item, level = pending.pop()
        if isinstance(item, dict | list | tuple):
            deepest = max(deepest, level)
            if level > MAX_ARGS_DEPTH:
                break  # deep enough to refuse; the rest need not be walked
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, level + 1) for child in children)
    return deepest


def shown_json(value: Any, depth: int = MAX_ARGS_DEPTH) -> Any:
    """``value`` (decoded JSON: args, a result) made safe to show and encode anywhere.

    A container nested deeper than ``depth`` becomes :data:`TOO_DEEP`; a lone surrogate in
    text (or in a key) becomes U+FFFD; a NaN or infinite number becomes None. A value within
    bounds comes back equal. For reads: one row stored before the limits existed, or a
    handler's odd result, must not break a listing (the HTTP API, the dashboard, ``--json``).
    """
    if isinstance(value, dict):
        if depth < 1:
            return TOO_DEEP
        return {_shown_text(str(k)): shown_json(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if depth < 1:
            return TOO_DEEP
        return [shown_json(v, depth - 1) for v in value]
    if isinstance(value, str):
        return _shown_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def read_json(data: str | bytes) -> Any:
    """JSON a store holds (args, a result), decoded. A value nested deeper than Python's
    decoder goes, which no tickwork path writes but SQL by hand can, reads as
    ``{"value": TOO_DEEP}``: one such row must not break every read that meets it."""
    try:
        return json.loads(data)
    except RecursionError:
        return {"value": TOO_DEEP}


def shown_object(value: Any) -> dict[str, Any]:
    """:func:`shown_json` of what should be a JSON object (args, a result); anything else
    (a row written past the checks) is wrapped as ``{"value": ...}``, as a worker wraps a
    handler's return value that is not an object."""
    shown = shown_json(value)
    return shown if isinstance(shown, dict) else {"value": shown}


def show_controls(text: str) -> str:
    """``text`` with its control characters (but tab and line ends) and bidirectional
    controls written as their codes, ``[U+202E]``: user text for a page or a terminal,
    where they would reorder, hide or rewrite what is shown around them."""
    return text.translate(_CONTROLS_AS_CODES)


def _shown_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    return text


def _unstorable_text(value: object) -> str | None:
    """Why a JSON value's text cannot be stored (valid JSON that a database refuses)."""
    pending = [value]
    while pending:  # a loop, not recursion: args nest as deep as the JSON parser allows
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "a NUL character (\\u0000), which PostgreSQL cannot store"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "an unpaired surrogate (\\ud800 to \\udfff), which is not valid text"
    return None


def parse_args(text: str, limit: int = MAX_ARGS_BYTES) -> dict[str, Any]:
    """Args given as JSON text (CLI, HTTP), or InvalidArgs."""
    try:
        value = json.loads(text)
    except RecursionError:  # nested deeper than the parser goes: far past the limit
        raise InvalidArgs(_TOO_DEEP_MESSAGE) from None
    except ValueError as exc:
        raise InvalidArgs(f"args are not valid JSON: {exc}") from None
    check_args(value, limit)
    assert isinstance(value, dict)
    return value


def _choice(kind: type[E], value: str, what: str) -> E:
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(kind)
        raise ValidationError(
            f"{what} must be one of {allowed}, got {value!r}", field=what
        ) from None


def check_label(what: str, value: object) -> None:
    """A name-like field (task, tenant, queue, name, idempotency key, a key's label): a
    non-empty string of at most MAX_NAME_LENGTH characters, without surrounding blanks,
    control characters (they reach terminals and logs) or bidirectional controls (they
    reorder what is shown around them), or ValidationError naming ``what``."""
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_LENGTH:
        raise ValidationError(
            f"{what} must be a non-empty string of at most {MAX_NAME_LENGTH} characters",
            field=what,
        )
    if value.isascii() and value.isprintable() and value == value.strip():
        return  # the common case, without a walk over its characters
    if value != value.strip() or any(
        ch in BIDI_CONTROLS or unicodedata.category(ch) == "Cc" for ch in value
    ):
        raise ValidationError(
            f"{what} {value!r} has surrounding blanks, control characters or bidirectional "
            "controls",
            field=what,
        )


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    tenant: str
    name: str | None
    task: str
    args: dict[str, Any]
    schedule: Schedule
    state: JobState
    next_run_at: datetime | None
    queue: str
    priority: int
    retry: RetryPolicy
    timeout: timedelta | None
    misfire: MisfirePolicy
    misfire_grace: timedelta
    overlap: OverlapPolicy
    idempotency_key: str | None
    created_at: datetime
    updated_at: datetime
    trace_context: str | None = None
    """The W3C ``traceparent`` of the span that submitted the job (OpenTelemetry), if any."""


def run_policy(job: Job | JobSpec) -> tuple[object, ...]:
    """How a job's runs are run, beside its task, args and schedule: its queue, priority,
    retry, timeout, misfire, misfire grace and overlap, the fields a Job and its JobSpec
    share (compared and grouped as one)."""
    return (
        job.queue,
        job.priority,
        job.retry,
        job.timeout,
        job.misfire,
        job.misfire_grace,
        job.overlap,
    )


@dataclass(frozen=True, slots=True)
class Run:
    id: int
    job_id: int
    tenant: str
    task: str
    args: dict[str, Any]
    queue: str
    priority: int
    scheduled_for: datetime  # the slot this run is for (unique per job)
    run_at: datetime  # when it may next be claimed (the slot, or a retry time)
    state: RunState
    attempt: int  # 1-based: the attempt running now, or the next one to run
    max_attempts: int
    fencing_token: int  # bumped on every claim; writes must present the current one
    worker: str | None
    lease_expires_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    result: dict[str, Any] | None
    timeout: timedelta | None
    created_at: datetime


class ClaimedRun(NamedTuple):
    """A run as its claimer needs it: what a worker executes and writes the outcome with.
    ``Store.complete_and_claim`` returns these rather than whole :class:`Run` rows, so a
    busy worker decodes eleven columns a run, not twenty-one (``Store.get_run`` has the rest).
    The run is ``running`` under ``fencing_token``, held by the worker that claimed it."""

    id: int
    fencing_token: int
    job_id: int
    tenant: str
    task: str
    args: dict[str, Any]
    scheduled_for: datetime
    attempt: int
    max_attempts: int
    timeout: timedelta | None
    queue: str

    @classmethod
    def of(cls, run: Run) -> ClaimedRun:
        return cls(
            run.id,
            run.fencing_token,
            run.job_id,
            run.tenant,
            run.task,
            run.args,
            run.scheduled_for,
            run.attempt,
            run.max_attempts,
            run.timeout,
            run.queue,
        )


MAX_SLOT_SCAN = 10_000
"""Missed slots counted one by one per trigger; past this a skip is recorded as 'at least'."""
ONE_OFF_LEAD = timedelta(milliseconds=100)
"""A one-off job is triggered up to this long before its time: its run exists, queued with
``run_at`` at the slot, before the slot comes, so a worker starts it on time instead of
after the trigger's wake-up and round trips (benchmarks/README.md, "Start lag, hop by hop").
Nothing runs early: a run is claimable from its ``run_at`` by the store's clock. From then
on the job's schedule is ``completed`` (the job reads ``queued``), as after any trigger: a
pause that comes later is refused, a cancel cancels the queued run. Recurring jobs are
triggered at their slots, so that their overlap and misfire decisions see the runs as they
are then."""


@dataclass(frozen=True, slots=True)
class SlotRange:
    """Consecutive slots sharing a fate; ``count`` is a lower bound when ``more``."""

    first: datetime
    last: datetime
    count: int
    fate: str  # a tickwork.store.base.SlotFate value
    more: bool = False


@dataclass(frozen=True, slots=True)
class SlotPlan:
    run_slots: list[datetime]  # slots that get a run, ascending
    skipped: list[SlotRange]  # slots that do not
    coalesced_into: datetime | None  # the run slot that misfire 'once' folded others into
    next_run_at: datetime | None  # the first slot after now; None: the schedule is over
    cancel_unfinished: bool  # overlap 'replace': cancel the job's unfinished runs first


def plan_slots(
    schedule: Schedule,
    due: datetime,
    now: datetime,
    *,
    misfire: MisfirePolicy,
    grace: timedelta,
    overlap: OverlapPolicy,
    has_unfinished: bool,
    misfire_limit: int = DEFAULT_MISFIRE_LIMIT,
) -> SlotPlan:
    """Decide the fate of every slot from ``due`` (the job's next_run_at) up to ``now``.

    A slot no older than ``grace`` is on time and runs. Older slots have *misfired*:

    - ``skip``: they get no run (fate misfire);
    - ``once``: the latest of them gets one run, the others are coalesced into it;
    - ``all``: each gets a run, the oldest ``misfire_limit`` at most; the rest are skipped.

    Then overlap: ``forbid`` keeps only the first slot, and none at all while the job has
    an unfinished run (fate overlap); ``replace`` keeps only the last slot (the earlier ones
    are replaced) and asks for the job's unfinished runs to be cancelled.

    Example: a per-minute job, grace 60 s, down from 09:00:30 to 10:00:10, policy ``once``:
    slots 09:01 ... 09:59 misfired (59 slots): 09:59 runs, 58 are coalesced into it;
    10:00 is 10 s late, within grace, and runs too. ``next_run_at`` becomes 10:01.
    """
    late: list[datetime] = []
    on_time: list[datetime] = []
    more = False
    first_uncounted: datetime | None = None
    slot: datetime | None = due
    scanned = 0
    while slot is not None and slot <= now:
        if scanned >= MAX_SLOT_SCAN:
            more = True
            break
        (on_time if now - slot <= grace else late).append(slot)
        scanned += 1
        slot = schedule.next_after(slot)
    if more:
        # A very long outage: stop counting, jump to the first slot after now.
        first_uncounted = slot
        slot = schedule.next_after(now)

    skipped: list[SlotRange] = []
    run_slots: list[datetime] = []
    coalesced_into: datetime | None = None
    if late:
        if misfire is MisfirePolicy.SKIP:
            skipped.append(SlotRange(late[0], late[-1], len(late), "misfire", more))
        elif misfire is MisfirePolicy.ONCE:
            run_slots.append(late[-1])
            if len(late) > 1 or more:
                coalesced_into = late[-1]
                skipped.append(
                    SlotRange(
                        late[0],
                        late[-2] if len(late) > 1 else late[0],
                        len(late) - 1,
                        "coalesced",
                        more,
                    )
                )
        else:
            run_slots.extend(late[:misfire_limit])
            rest = late[misfire_limit:]
            if rest:
                skipped.append(SlotRange(rest[0], rest[-1], len(rest), "misfire", more))
            elif first_uncounted is not None:
                # Every counted slot runs; the slots past the scan do not.
                skipped.append(SlotRange(first_uncounted, first_uncounted, 1, "misfire", True))
    run_slots.extend(on_time)

    cancel_unfinished = False
    if overlap is OverlapPolicy.FORBID and run_slots:
        blocked = run_slots if has_unfinished else run_slots[1:]
        if blocked:
            skipped.append(SlotRange(blocked[0], blocked[-1], len(blocked), "overlap"))
        run_slots = [] if has_unfinished else run_slots[:1]
        if coalesced_into is not None and coalesced_into not in run_slots:
            # The run they were folded into was itself blocked: the previous run's overlap
            # is why none of them ran.
            coalesced_into = None
            skipped = [replace(r, fate="overlap") if r.fate == "coalesced" else r for r in skipped]
    elif overlap is OverlapPolicy.REPLACE and run_slots:
        if len(run_slots) > 1:
            earlier = run_slots[:-1]
            skipped.append(SlotRange(earlier[0], earlier[-1], len(earlier), "replaced"))
            if coalesced_into is not None and coalesced_into != run_slots[-1]:
                coalesced_into = None
        run_slots = run_slots[-1:]
        cancel_unfinished = has_unfinished

    return SlotPlan(run_slots, skipped, coalesced_into, slot, cancel_unfinished)
