"""What the dashboard and ``/metrics`` read: run stats, totals and histograms, the
per-minute rollup, and queues and their backlogs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta


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
