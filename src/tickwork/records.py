"""The records the store returns and every layer above it reads: pure values, no I/O.

The Store contract (:mod:`tickwork.store.base`) speaks in these types, and so do the
client, the CLI and the HTTP API; keeping them here, beside :mod:`tickwork.job` in the
domain, lets the faces show a page, a ledger entry or a node without importing the store.
:mod:`tickwork.store.base` re-exports them, so store code names them either way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import datetime, timedelta
from enum import Enum, StrEnum
from typing import Any, Generic, NamedTuple, TypedDict, TypeVar

from tickwork.calendar import Calendar
from tickwork.errors import ValidationError
from tickwork.faults import InjectedFault
from tickwork.job import Job, Run, shown_json, shown_object
from tickwork.schedule import shown_json as shown_schedule
from tickwork.skew import Skew

DEFAULT_PAGE = 100
"""Rows in one page of a listing when the caller names no limit."""
MAX_PAGE = 1000
"""The most rows one page of a listing may hold."""
NODE_SILENT_BEATS = 3
"""A node unseen for this many of its own heartbeat intervals is *silent*: its heartbeats
stopped (it died, stalled, or lost the database)."""
NODE_SILENT_FLOOR = timedelta(seconds=5)
"""... but never sooner than this, so a busy host's late beat is not called silence."""
NODE_DEFAULT_BEAT = timedelta(seconds=3)
"""The heartbeat interval assumed for a node that did not say its own (``info["beat"]``)."""
NODE_GONE_AFTER = timedelta(minutes=1)
"""A node silent this long (and at least its silence bound) is *gone* from the cluster
view: no pause or network blip lasts so long, its ``running`` count is history, and an
operator may forget it (``tickwork cluster forget``) before the day after which its row
goes by itself."""
T = TypeVar("T")
When = TypeVar("When")


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
class Heartbeat:
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


@dataclass(frozen=True, slots=True)
class Lease:
    """The scheduler leadership: who holds it, at which epoch, until when (store clock)."""

    holder: str
    epoch: int
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Node:
    """A scheduler, worker or API process that registered itself (``tickwork cluster``)."""

    id: str
    kind: str  # scheduler | worker | api | run
    host: str
    pid: int
    started_at: datetime
    last_seen_at: datetime
    running: int  # runs the node executes now (workers)
    info: dict[str, Any]

    @property
    def clock(self) -> Skew | None:
        """How far the node's wall clock was from the store's at its last heartbeat
        (:mod:`tickwork.skew`); None for a node that sent no reading."""
        return Skew.from_info(self.info)

    def silent_after(self) -> timedelta:
        """How long unseen before this node counts as silent (see NODE_SILENT_BEATS)."""
        beat = self.info.get("beat") if isinstance(self.info, dict) else None
        interval = (
            timedelta(seconds=float(beat))
            if isinstance(beat, int | float) and beat > 0
            else NODE_DEFAULT_BEAT
        )
        return max(interval * NODE_SILENT_BEATS, NODE_SILENT_FLOOR)

    def silent(self, now: datetime) -> bool:
        """Whether this node's heartbeats stopped, by the store's clock ``now``."""
        return now - self.last_seen_at > self.silent_after()

    def gone_after(self) -> timedelta:
        """How long unseen before this node counts as gone and may be forgotten."""
        return max(self.silent_after(), NODE_GONE_AFTER)

    def gone(self, now: datetime) -> bool:
        """Whether this node has been silent past :data:`NODE_GONE_AFTER` (store clock)."""
        return now - self.last_seen_at > self.gone_after()

    def status(self, now: datetime) -> str:
        """``up``, ``silent`` (its beats stopped lately) or ``gone`` (silent past the
        bound: forgettable)."""
        return "gone" if self.gone(now) else "silent" if self.silent(now) else "up"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An HTTP API key. Only a hash of the secret is stored; ``prefix`` identifies it."""

    id: int
    prefix: str
    tenant: str
    admin: bool
    label: str | None
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class Session:
    """A dashboard sign-in with an API key. Only a hash of its token is stored.

    It is live until the first of: ``expires_at`` (a lifetime from its start, however
    busy), ``last_seen_at + idle_timeout`` (unused that long), sign-out, or the key's
    revocation (``revoked_at`` for the last two).
    """

    id: int
    key_id: int
    created_at: datetime
    last_seen_at: datetime
    idle_timeout: timedelta
    expires_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class RunStats:
    """A snapshot for dashboards and metrics (store clock)."""

    by_state: dict[str, int]  # every RunState value, 0 when none
    due_backlog: int  # queued or failed runs whose run_at has come
    oldest_due_at: datetime | None  # run_at of the oldest of those
    # start minus slot, first attempts of the most recent runs, but not of a tenant or task
    # with a limit (a limit may hold a run back on purpose: that wait is not lag)
    recent_lag_ms: list[float]
    now: datetime
    limited_due: int = 0  # of the due backlog, runs of a tenant or task that has a limit
    open_oldest_due_at: datetime | None = None  # run_at of the oldest of the others


FAILED_ATTEMPT = "failed"
"""The outcome :attr:`RunTotals.outcomes` counts attempts that failed and are retried by."""
DURATION = "duration"
"""The histogram of execution durations: each attempt's start to its end, in seconds."""
LAG = "lag"
"""The histogram of start lag (a first attempt's start minus its slot) of the runs of
tenants and tasks without limits."""
LIMITED_LAG = "limited_lag"
"""The histogram of start lag of the runs of a tenant or task with a limit: the time a
limit held them back on purpose is part of it."""
TOTALS_SERIES = 1000
"""(task, queue) pairs the totals count under their own names, at most; runs of pairs
seen later are counted under :data:`OTHER` (bounded label cardinality)."""
HISTOGRAM_QUEUES = 100
"""Queues the histograms count under their own names, at most; then :data:`OTHER`."""
OTHER = "(other)"
"""The task and queue of the runs counted past :data:`TOTALS_SERIES` or
:data:`HISTOGRAM_QUEUES`."""


@dataclass(frozen=True, slots=True)
class Histogram:
    """A cumulative histogram: ``buckets`` maps each upper bound (seconds; ``inf`` last) to
    the observations above the bound below it and up to it (not cumulative: sum them up to
    a bound for Prometheus's ``le``), ``total`` is their sum in seconds."""

    buckets: dict[float, int]
    total: float

    @property
    def count(self) -> int:
        return sum(self.buckets.values())


@dataclass(frozen=True, slots=True)
class RunTotals:
    """Totals since the store was made, kept by the store (never pruned, never lower than
    at an earlier read): the figures of ``/metrics``' counters and histograms.

    ``outcomes``: ``(task, queue, outcome) -> count``, where outcome is ``succeeded``,
    ``dead`` or ``cancelled`` (runs that finished so, counted when the leader folds them,
    a minute or so after) or ``failed`` (attempts that failed and are retried, counted as
    they fail). ``histograms``: ``(name, queue) -> Histogram`` for :data:`DURATION`,
    :data:`LAG` and :data:`LIMITED_LAG`."""

    outcomes: dict[tuple[str, str, str], int]
    histograms: dict[tuple[str, str], Histogram]


ROLLUP_KEEP = timedelta(hours=25)
"""How long the per-minute rollup keeps a minute: the dashboard's longest chart (24 h) and
an hour to spare."""
MAX_BULK = 10_000
"""The most runs one bulk retry or cancel may change; a filter matching more is refused
whole (narrow it, or raise ``max_count`` up to this)."""
DEFAULT_BULK = 1000
"""The bulk operations' ``max_count`` when the caller names none."""


class RunFilter(TypedDict, Generic[When], total=False):
    """The filters of a bulk retry or cancel, as keywords; each one given must match
    (``since <= scheduled_for < until``). ``When`` is ``datetime`` in the store, and
    datetime or ISO-8601 text (:data:`tickwork.inputs.Instant`) in the client."""

    tenant: str | None
    job_id: int | None
    task: str | None
    queue: str | None
    since: When | None
    until: When | None
    error: str | None  # the run's error holds this text, in any case


@dataclass(frozen=True, slots=True)
class RunMinute:
    """One minute of the rollup (store clock), summed over the tenants and queues asked
    for. Minutes with nothing in them have no row."""

    minute: datetime  # the minute's start
    succeeded: int  # runs that finished in the minute, by outcome
    failed: int  # attempts that failed and are to be retried
    dead: int
    lag: dict[int, int]  # start lag histogram (tickwork.stats.lag_bucket) of runs started
    depth: int  # due runs waiting when the leader sampled the minute


@dataclass(frozen=True, slots=True)
class TaskBacklog:
    """A queue's due runs of one task (queued or failed, their ``run_at`` come)."""

    queue: str
    task: str
    due: int
    oldest_due_at: datetime | None


@dataclass(frozen=True, slots=True)
class Unserved:
    """Due runs that no live worker can run now, of one task in one queue: none that
    takes the queue has the task (or, for ``shell``, runs shell commands). They wait,
    queued, spending no attempt, until such a worker starts; ``reason`` says which it
    lacks, e.g. "no live worker has task send_mail"."""

    queue: str
    task: str
    due: int
    oldest_due_at: datetime | None
    reason: str


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """A queue now: what is due in it and who consumes it."""

    queue: str
    due: int  # queued or failed runs whose run_at has come
    running: int
    oldest_due_at: datetime | None
    workers: list[str] = field(default_factory=list)  # live workers that claim from it
    unserved: list[Unserved] = field(default_factory=list)
    """Of the due runs, those of tasks no live worker of the queue has, by task."""


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing: ``for run in client.dead_runs()`` walks its ``items`` (this
    page only: pass ``next_cursor`` as ``after`` for the next), ``len(page)`` counts them."""

    items: list[T]
    next_cursor: int | None  # pass as `after` for the next page; None: this was the last

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def page_of(items: list[T], limit: int, cursor: Callable[[T], int]) -> Page[T]:
    """A page of up to ``limit`` from ``items``, read with one row more than ``limit``:
    that row, when it came, says there is a next page (so a listing that ends exactly at a
    page's end gives no cursor to an empty page)."""
    if len(items) <= limit:
        return Page(items, None)
    del items[limit:]
    return Page(items, cursor(items[-1]))


def page_limit(limit: int) -> int:
    """``limit`` for a listing, or ValidationError outside 1..MAX_PAGE."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValidationError(f"limit must be between 1 and {MAX_PAGE}, got {limit}", field="limit")
    return limit


def bulk_limit(max_count: int) -> int:
    """``max_count`` for a bulk command, or ValidationError outside 1..MAX_BULK."""
    if isinstance(max_count, bool) or not isinstance(max_count, int):
        raise ValidationError(
            f"max_count must be a whole number, got {max_count!r}", field="max_count"
        )
    if not 1 <= max_count <= MAX_BULK:
        raise ValidationError(
            f"max_count must be between 1 and {MAX_BULK}, got {max_count}", field="max_count"
        )
    return max_count


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A new session (:meth:`Client.sign_in`): the token for the browser's cookie, shown
    this once and stored only hashed, the session and the key it signed in with."""

    token: str
    session: Session
    key: ApiKey


@dataclass(frozen=True, slots=True)
class Cluster:
    """Who leads and which nodes are alive (``tickwork cluster``), by the store's clock."""

    leader: Lease | None  # None: no scheduler holds an unexpired leader lease
    nodes: list[Node]  # most recently seen first
    now: datetime


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """A tenant's limits, enforced when workers claim; ``None`` is no limit.

    ``max_running``: runs of the tenant in state running at once, counted across every
    worker; a run whose worker died counts until its lease expires and it is rescued.
    ``rate``: runs started per second across every worker, a token bucket holding up to
    ``burst`` starts (``burst`` is set only with a rate; unset, it is one second's worth,
    :attr:`bucket`). ``weight``: the tenant's share when tenants with due runs compete for
    claims (default 1).
    """

    tenant: str
    max_running: int | None = None
    rate: float | None = None
    burst: int | None = None
    weight: float = 1.0

    @property
    def bucket(self) -> int | None:
        """The token bucket's size (:func:`bucket_size`); None without a rate."""
        return bucket_size(self.rate, self.burst)

    @property
    def unlimited(self) -> bool:
        """No limit set and the default weight: a tenant the store need not keep a row for."""
        return (
            self.max_running is None
            and self.rate is None
            and self.burst is None
            and self.weight == DEFAULT_WEIGHT
        )


RATE_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
"""Seconds per unit of a rate's text: ``20/s``, ``30/m``, ``100/h``."""


def format_rate(per_second: float) -> str:
    """A rate as people write it: per second from 1 a second up (``20/s``, ``1.5/s``);
    below that per minute or per hour if that is a whole number (``30/m`` for 0.5,
    ``100/h``), else per second (``0.0125/s``). :func:`parse_rate` reads each back."""
    if per_second < 1:
        for unit in ("m", "h"):
            count = per_second * RATE_UNITS[unit]
            if count >= 1 and math.isclose(count, round(count), rel_tol=1e-9):
                return f"{round(count)}/{unit}"
    return f"{per_second:.10g}/s"


def bucket_size(rate: float | None, burst: int | None) -> int | None:
    """A token bucket's size, a tenant's or a task's: ``burst``, or one second's worth of
    ``rate`` (at least 1); None without a rate."""
    if rate is None:
        return None
    return burst if burst is not None else max(1, math.ceil(rate))


@dataclass(frozen=True, slots=True)
class TaskLimits:
    """A task's limits, declared in code (``@app.task(max_running=1, rate="10/s")``) and
    enforced when workers claim, whoever owns the runs; ``None`` is no limit.

    ``max_running``: runs of the task in state running at once, across every worker.
    ``rate``: runs of the task started per second across every worker, a token bucket of
    ``burst`` starts (unset: one second's worth, :attr:`bucket`), as a tenant's rate.
    """

    max_running: int | None = None
    rate: float | None = None
    burst: int | None = None

    @property
    def unlimited(self) -> bool:
        """No limit set: a task the store keeps no row for."""
        return self.max_running is None and self.rate is None and self.burst is None


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """A task now: its limits, and how many of its runs its rate lets start."""

    task: str
    limits: TaskLimits
    starts: int | None = None
    """How many runs its rate lets start now (whole tokens in its bucket); None: no rate."""

    @property
    def rate_held(self) -> bool:
        """No run of this task can start now: its rate's bucket is empty."""
        return self.starts == 0


class Keep(Enum):
    """The type of :data:`KEEP`."""

    KEEP = "KEEP"


KEEP = Keep.KEEP
"""For a limit in :meth:`~tickwork.store.base.Store.set_tenant_limits`: leave it as it is."""


@dataclass(frozen=True, slots=True)
class TenantStatus:
    """A tenant now: its limits, its runs in state running, and its queued-and-due runs
    (queued or failed-awaiting-retry with ``run_at`` passed)."""

    limits: TenantLimits
    running: int
    due: int
    starts: int | None = None
    """How many runs its rate lets start now (whole tokens in its bucket); None: no rate."""

    @property
    def tenant(self) -> str:
        return self.limits.tenant

    @property
    def at_limit(self) -> bool:
        """No run of this tenant can be claimed now: it is at its ``max_running``."""
        cap = self.limits.max_running
        return cap is not None and self.running >= cap

    @property
    def rate_held(self) -> bool:
        """No run of this tenant can start now: its rate's bucket is empty."""
        return self.starts == 0

    @property
    def held(self) -> int:
        """Queued-and-due runs its ``max_running`` or its rate keeps from starting now:
        those beyond the room it has left."""
        cap = self.limits.max_running
        rooms = [] if cap is None else [max(0, cap - self.running)]
        rooms += [] if self.starts is None else [self.starts]
        return max(0, self.due - min(rooms)) if rooms else 0


MAX_RUNNING_CEILING = 1_000_000
"""The largest ``max_running`` accepted: far above any cluster's concurrency, and well
inside every store's integer column."""


def check_max_running(value: int | None) -> int | None:
    """``value`` if it is a valid ``max_running`` (a whole number from 1 to
    MAX_RUNNING_CEILING, or None for no limit); ValidationError otherwise."""
    return _check_count("max_running", value)


RATE_FLOOR = 0.00001
RATE_CEILING = 1_000_000.0
"""The range of ``rate``, in runs per second: from about one run a day to a million a
second. The claim refills a bucket by ``rate * elapsed`` with elapsed down to a
microsecond: from RATE_FLOOR that is 1e-11 at least, far from a double's underflow (which
PostgreSQL raises as an error), and at RATE_CEILING a year's refill is still exact."""
WEIGHT_FLOOR = 0.001
WEIGHT_CEILING = 1_000.0
"""The range of ``weight``. Weights are relative, so the range bounds the ratio of two
tenants' shares (a million); the claim divides by it (``rank / weight``, a batch's worth
of ranks at most), which from WEIGHT_FLOOR stays far inside a double (a weight of 1e-310
overflowed it, and PostgreSQL's claim failed)."""
DEFAULT_WEIGHT = 1.0


def check_rate(value: float | None) -> float | None:
    """``value`` if it is a valid ``rate`` (runs per second from RATE_FLOOR to RATE_CEILING,
    or None for no limit); ValidationError otherwise."""
    return _check_range("rate", value, RATE_FLOOR, RATE_CEILING)


def check_weight(value: float | None) -> float:
    """``value`` if it is a valid ``weight`` (from WEIGHT_FLOOR to WEIGHT_CEILING); None is
    the default weight. ValidationError otherwise."""
    checked = _check_range("weight", value, WEIGHT_FLOOR, WEIGHT_CEILING)
    return DEFAULT_WEIGHT if checked is None else checked


def check_burst(value: int | None) -> int | None:
    """``value`` if it is a valid ``burst`` (a whole number from 1 to MAX_RUNNING_CEILING, or
    None for one second's worth of the rate); ValidationError otherwise."""
    return _check_count("burst", value)


def check_tenant_limits(limits: TenantLimits) -> TenantLimits:
    """``limits`` if every field is valid and they agree (a burst needs a rate);
    ValidationError naming the field otherwise."""
    check_max_running(limits.max_running)
    check_rate(limits.rate)
    check_burst(limits.burst)
    check_weight(limits.weight)
    if limits.burst is not None and limits.rate is None:
        raise ValidationError("burst needs a rate: set a rate too, or unset burst", field="burst")
    return limits


def check_task_limits(limits: TaskLimits) -> TaskLimits:
    """``limits`` if every field is valid and they agree (a burst needs a rate);
    ValidationError naming the field otherwise."""
    check_max_running(limits.max_running)
    check_rate(limits.rate)
    check_burst(limits.burst)
    if limits.burst is not None and limits.rate is None:
        raise ValidationError("burst needs a rate: set a rate too, or unset burst", field="burst")
    return limits


def _check_count(field: str, value: int | None) -> int | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_RUNNING_CEILING
    ):
        raise ValidationError(
            f"{field} must be a whole number from 1 to {MAX_RUNNING_CEILING}, not {value!r}",
            field=field,
        )
    return value


def plain(number: float) -> str:
    """A range's end as people write it: 0.00001, 1000000 (not 1e-05, 1e+06)."""
    return format(number, "f").rstrip("0").rstrip(".")


def _check_range(field: str, value: float | None, floor: float, ceiling: float) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not floor <= value <= ceiling
    ):
        raise ValidationError(
            f"{field} must be a number from {plain(floor)} to {plain(ceiling)}, not {value!r}",
            field=field,
        )
    return float(value)


JsonValue = (
    Job
    | Run
    | Node
    | ApiKey
    | SlotSkip
    | Lease
    | RunStats
    | Cluster
    | TenantLimits
    | TenantStatus
    | CalendarRecord
    | InjectedRun
    | QueueStatus
    | AttemptRecord
    | RunAttempts
    | Unserved
)


def to_json(value: JsonValue) -> dict[str, Any]:
    """A record as a JSON-ready dict: times in ISO-8601 UTC, durations in seconds.

    Jobs, runs, nodes, API keys (their prefix, never a secret or hash: the record holds
    neither), ledger entries, leases, run stats and the cluster view.

    It cannot fail on what a row holds, and its output is what every JSON encoder can write:
    the JSON a record carries (args, a result, a node's info) is passed through
    :func:`~tickwork.job.shown_json`, so a row stored before the limits on args, or a
    handler's odd result, is shown cut short rather than breaking a listing (args and a
    result that are not objects are wrapped, ``{"value": ...}``).
    """
    if isinstance(value, Job):
        raw = _fields(value)
        raw["schedule"] = shown_schedule(value.schedule)
        raw["args"] = shown_object(value.args)
    elif isinstance(value, Run):
        raw = _fields(value)
        raw["args"] = shown_object(value.args)
        raw["result"] = shown_object(value.result) if value.result is not None else None
    elif isinstance(value, Cluster):
        raw = {
            "leader": to_json(value.leader) if value.leader else None,
            "nodes": [{**to_json(node), "silent": node.silent(value.now)} for node in value.nodes],
            "now": value.now,
        }
    elif isinstance(value, CalendarRecord):
        raw = {
            **value.calendar.to_json(),
            "created_at": value.created_at,
            "updated_at": value.updated_at,
        }
    elif isinstance(value, RunAttempts):
        return {
            "run_id": value.run_id,
            "attempts": [to_json(a) for a in value.attempts],
            "dropped": value.dropped,
        }
    elif isinstance(value, InjectedRun):  # the run, with its marks
        return {**to_json(value.run), "injected": [_jsonable(f) for f in value.faults]}
    elif isinstance(value, TenantStatus):
        raw = {
            **_fields(value.limits),
            "running": value.running,
            "due": value.due,
            "held": value.held,
            "at_limit": value.at_limit,
        }
    elif isinstance(value, QueueStatus):
        raw = {**_fields(value), "unserved": [to_json(u) for u in value.unserved]}
    elif is_dataclass(value):
        raw = _fields(value)
    else:
        raise TypeError(f"cannot encode {type(value).__name__}")
    return {k: _jsonable(v) for k, v in raw.items()}


def _fields(record: Any) -> dict[str, Any]:
    """A record's fields, one level deep (``dataclasses.asdict`` would copy every nested
    value by recursion, and overflow on args nested a few hundred deep)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.value
    if is_dataclass(value) and not isinstance(value, type):  # a policy inside a record
        return {k: _jsonable(v) for k, v in _fields(value).items()}
    if isinstance(value, dict | list | tuple | str | float):
        return shown_json(value)
    return value
