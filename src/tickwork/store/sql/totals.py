"""Cumulative totals for ``/metrics``, written once for every dialect: what the fold, the
fail path and the pruner add, and the read of them.

Why in the store, and counted there: a counter must only grow and must read the same on
every ``tickwork api`` replica. Counted by the API process from the runs table, it would
shrink with the pruner and differ between replicas; counted by each worker in memory, it
would need every worker scraped and would reset with every restart. The store counts each
run once, off the hot paths: the leader's fold adds the runs that finished (by the index
finished runs already have, once a minute), :meth:`fail` adds a failed attempt as it
happens (a retried run has no finish time to fold by), and the pruner first adds the runs
it is about to delete that no fold has read yet. Nothing deletes a total.

Every writer takes the rows it adds to in one order (sorted: totals, then histograms), so
a fold and a fail that share rows wait for each other instead of deadlocking.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tickwork.job import RunState
from tickwork.records import (
    DURATION,
    FAILED_ATTEMPT,
    HISTOGRAM_QUEUES,
    LAG,
    LIMITED_LAG,
    OTHER,
    TOTALS_SERIES,
    Histogram,
    RunTotals,
)
from tickwork.stats import DURATION_BOUNDS, LAG_BOUNDS, bound_of
from tickwork.store.driver import Row, Tx

BOUNDS = {DURATION: DURATION_BOUNDS, LAG: LAG_BOUNDS, LIMITED_LAG: LAG_BOUNDS}


@dataclass
class Tally:
    """What one transaction adds to the totals, written by :meth:`write`."""

    outcomes: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    runs: Counter[tuple[str, str, float]] = field(default_factory=Counter)
    seconds: defaultdict[tuple[str, str, float], float] = field(
        default_factory=lambda: defaultdict(float)
    )

    def observe(self, name: str, queue: str, seconds: float) -> None:
        seconds = max(0.0, seconds)  # a hair before its slot by the store's clock counts as 0
        key = (name, queue, bound_of(seconds, BOUNDS[name]))
        self.runs[key] += 1
        self.seconds[key] += seconds

    def finished(self, row: Row, from_time: Any) -> None:
        """A run that finished (a ``finished_between`` row): its outcome, the duration of
        its last attempt (one that ran and ended succeeded or dead), and the start lag of
        its first attempt, when that is the one that finished."""
        state, queue = row["state"], row["queue"]
        self.outcomes[(row["task"], queue, state)] += 1
        started: datetime | None = from_time(row["started_at"])
        if started is None:
            return  # cancelled before it ever ran
        if state in (RunState.SUCCEEDED, RunState.DEAD):
            finished: datetime = from_time(row["finished_at"])
            self.observe(DURATION, queue, (finished - started).total_seconds())
        if row["attempt"] == 1:
            self._lag(row, started, from_time)

    def failed(self, row: Row, at: datetime, from_time: Any) -> None:
        """An attempt that failed and will be retried (a ``held_run_for_fail`` row), at
        ``at``: counted, its duration, and its start lag when it was the first."""
        queue = row["queue"]
        self.outcomes[(row["task"], queue, FAILED_ATTEMPT)] += 1
        started: datetime | None = from_time(row["started_at"])
        if started is None:
            return
        self.observe(DURATION, queue, (at - started).total_seconds())
        if row["attempt"] == 1:
            self._lag(row, started, from_time)

    def _lag(self, row: Row, started: datetime, from_time: Any) -> None:
        if row["manual"]:
            return  # asked for by hand: its lag says nothing about the scheduler
        lag = (started - from_time(row["scheduled_for"])).total_seconds()
        self.observe(LIMITED_LAG if row["limited"] else LAG, row["queue"], lag)

    def write(self, tx: Tx, q: Mapping[str, str]) -> None:
        """Add it all to the totals, in one order; past the cardinality caps, a pair or a
        queue never seen before is counted as :data:`OTHER`."""
        pairs = _Names(tx, q["total_known"], q["total_pairs"], TOTALS_SERIES)
        outcomes: Counter[tuple[str, str, str]] = Counter()
        for (task, queue, outcome), n in sorted(self.outcomes.items()):
            named = pairs.name({"task": task, "queue": queue})
            outcomes[(named["task"], named["queue"], outcome)] += n
        for (task, queue, outcome), n in sorted(outcomes.items()):
            tx.count(q["add_total"], {"task": task, "queue": queue, "outcome": outcome, "runs": n})
        queues = _Names(tx, q["histogram_known"], q["histogram_queues"], HISTOGRAM_QUEUES)
        runs: Counter[tuple[str, str, float]] = Counter()
        seconds: defaultdict[tuple[str, str, float], float] = defaultdict(float)
        for (name, queue, le), n in sorted(self.runs.items()):
            key = (name, queues.name({"queue": queue})["queue"], le)
            runs[key] += n
            seconds[key] += self.seconds[(name, queue, le)]
        for (name, queue, le), n in sorted(runs.items()):
            params = {"name": name, "queue": queue, "le": le, "runs": n}
            tx.count(q["add_histogram"], {**params, "seconds": seconds[(name, queue, le)]})


class _Names:
    """Which names (a task and queue pair, or a queue) keep their own series: those the
    totals have already, and new ones while fewer than ``cap`` exist; the rest are OTHER.
    (Two writers adding new names at once may each admit one past the cap: a soft cap.)"""

    def __init__(self, tx: Tx, known: str, existing: str, cap: int) -> None:
        self._tx, self._known, self._existing, self._cap = tx, known, existing, cap
        self._count: int | None = None
        self._named: dict[tuple[str, ...], dict[str, str]] = {}

    def name(self, key: dict[str, str]) -> dict[str, str]:
        found = self._named.get(tuple(key.values()))
        if found is not None:
            return found
        if self._tx.one(self._known, key) is not None:
            found = key
        else:
            if self._count is None:
                row = self._tx.one(self._existing, {})
                self._count = int(row["n"]) if row is not None else 0
            if self._count < self._cap:
                self._count += 1
                found = key
            else:
                found = dict.fromkeys(key, OTHER)
        self._named[tuple(key.values())] = found
        return found


def read_totals(tx: Tx, q: Mapping[str, str]) -> RunTotals:
    outcomes = {
        (r["task"], r["queue"], r["outcome"]): int(r["runs"]) for r in tx.all(q["run_totals"], {})
    }
    buckets: dict[tuple[str, str], dict[float, int]] = {}
    sums: defaultdict[tuple[str, str], float] = defaultdict(float)
    for r in tx.all(q["run_histograms"], {}):
        key = (r["name"], r["queue"])
        buckets.setdefault(key, {})[float(r["le"])] = int(r["runs"])
        sums[key] += float(r["seconds"])
    histograms = {key: Histogram(b, sums[key]) for key, b in buckets.items()}
    return RunTotals(outcomes, histograms)
