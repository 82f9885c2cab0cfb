"""The per-minute rollup (the dashboard's time axis), written once for every dialect: the
leader's fold of finished runs into minutes (and into the cumulative totals of ``/metrics``,
:mod:`tickwork.store.sql.totals`), and the read of them.

Why a fold and not counters on the completion path: complete and claim are the hot paths
(one statement per batch in PostgreSQL); an upsert per completion would put every worker on
the same few rows each minute. The fold reads finished runs once a minute through the
index finished runs already have. Only a failed attempt that will be retried is counted as
it happens (in :meth:`fail`), since such a run has no finish time to fold by.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tickwork.job import RunState
from tickwork.stats import lag_bucket
from tickwork.store.base import ROLLUP_KEEP, ROLLUP_SETTLE, RunMinute, RunTotals
from tickwork.store.sql.core import SqlCore
from tickwork.store.sql.totals import Tally, read_totals

MINUTE = timedelta(minutes=1)


def floor_minute(value: datetime) -> datetime:
    return value.replace(second=0, microsecond=0)


@dataclass
class _Minute:
    succeeded: int = 0
    dead: int = 0
    lag: Counter[int] = field(default_factory=Counter)
    depth: int | None = None


class MinuteRollup(SqlCore):
    def fold_minutes(self, *, now: datetime | None = None) -> int:
        time, from_time = self.codec.time, self.codec.from_time
        with self.driver.write() as tx:
            t = tx.now(now)
            mark = tx.one(self.q["rollup_mark"], {})
            assert mark is not None
            # The totals take every run since the mark; the minutes keep the last day only
            # (older ones are deleted below: after an outage they were never charted).
            start = from_time(mark["folded_to"])
            to = floor_minute(t - ROLLUP_SETTLE)
            minutes: dict[tuple[datetime, str, str], _Minute] = {}
            tally = Tally()

            def at(when: datetime, tenant: str, queue: str) -> _Minute:
                return minutes.setdefault((floor_minute(when), tenant, queue), _Minute())

            folded = 0
            keep = floor_minute(t - ROLLUP_KEEP)
            if to > start:
                folded = int((to - max(start, keep)) / MINUTE)
                span = {"start": time(start), "to": time(to)}
                for r in tx.all(self.q["finished_between"], span):
                    tally.finished(r, from_time)
                    if from_time(r["finished_at"]) < keep:
                        continue  # past the minutes' day: in the totals only
                    tenant, queue = r["tenant"], r["queue"]
                    if r["state"] == RunState.SUCCEEDED:
                        at(from_time(r["finished_at"]), tenant, queue).succeeded += 1
                    elif r["state"] == RunState.DEAD:
                        at(from_time(r["finished_at"]), tenant, queue).dead += 1
                    started = from_time(r["started_at"])
                    if started is not None and r["attempt"] == 1 and not r["manual"]:
                        lag_ms = (started - from_time(r["scheduled_for"])) / timedelta(
                            milliseconds=1
                        )
                        at(started, tenant, queue).lag[lag_bucket(lag_ms)] += 1
                tx.count(self.q["set_rollup_mark"], {"to": time(to)})
            for r in tx.all(self.q["depth_by_queue"], {"now": time(t)}):
                at(t, r["tenant"], r["queue"]).depth = int(r["n"])
            for (minute, tenant, queue), m in minutes.items():
                key = {"minute": time(minute), "tenant": tenant, "queue": queue}
                # add_minute replaces the histogram: merge the stored one in first.
                lag = Counter(m.lag)
                old = tx.one(self.q["minute_lag"], key)
                if old is not None:
                    lag.update(_histogram(self.codec.from_json(old["lag"])))
                tx.count(
                    self.q["add_minute"],
                    {
                        **key,
                        "succeeded": m.succeeded,
                        "failed": 0,
                        "dead": m.dead,
                        "lag": self.codec.json({str(k): v for k, v in sorted(lag.items())}),
                        "depth": m.depth,
                    },
                )
            tx.count(self.q["prune_minutes"], {"cutoff": time(keep)})
            tally.write(tx, self.q)  # after the minutes, as fail() adds to both
        return max(0, folded)

    def run_totals(self) -> RunTotals:
        with self.driver.read() as tx:
            return read_totals(tx, self.q)

    def run_minutes(
        self,
        since: datetime,
        *,
        tenant: str | None = None,
        queue: str | None = None,
    ) -> list[RunMinute]:
        params = {"since": self.codec.time(since), "tenant": tenant, "queue": queue}
        with self.driver.read() as tx:
            found = tx.all(self.q["run_minutes"], params)
        summed: dict[datetime, _Summed] = {}
        for r in found:
            s = summed.setdefault(self.codec.from_time(r["minute"]), _Summed())
            s.succeeded += r["succeeded"]
            s.failed += r["failed"]
            s.dead += r["dead"]
            s.depth += r["depth"]
            s.lag.update(_histogram(self.codec.from_json(r["lag"])))
        return [
            RunMinute(minute, s.succeeded, s.failed, s.dead, dict(s.lag), s.depth)
            for minute, s in sorted(summed.items())
        ]


@dataclass
class _Summed:
    succeeded: int = 0
    failed: int = 0
    dead: int = 0
    depth: int = 0
    lag: Counter[int] = field(default_factory=Counter)


def _histogram(stored: Any) -> dict[int, int]:
    """A stored histogram ({"bucket": count}, JSON keys are text) as {bucket: count}."""
    if isinstance(stored, str):
        stored = json.loads(stored)
    if not isinstance(stored, dict):
        return {}
    return {int(k): int(v) for k, v in stored.items()}
