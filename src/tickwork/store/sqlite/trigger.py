"""Trigger: the due jobs' runs and their advance in one write transaction, fenced by the
leader lease.
"""

from __future__ import annotations

from datetime import datetime

from tickwork.clock import from_micros, to_micros
from tickwork.config import TRIGGER_BATCH
from tickwork.errors import LeadershipLost
from tickwork.job import ONE_OFF_LEAD, OverlapPolicy, Run
from tickwork.store import rows
from tickwork.store.base import CHANNEL_RUNS, SlotSkip, TriggerResult
from tickwork.store.planning import plan_batch
from tickwork.store.sql.runs import REPLACED, past_kept
from tickwork.store.sqlite.core import SqliteCore
from tickwork.store.sqlite.driver import SQLITE_CODEC as C
from tickwork.store.sqlite.driver import Q


class SqliteTrigger(SqliteCore):
    def trigger(
        self, epoch: int, *, limit: int = TRIGGER_BATCH, now: datetime | None = None
    ) -> TriggerResult:
        t = self._now(now)
        now_dt = from_micros(t)
        with self._write() as conn:
            head = conn.execute(Q["trigger_head"], {"epoch": epoch, "now": t}).fetchone()
            if head is None or not head["leads"]:
                raise LeadershipLost(None, epoch, holder=head["holder"] if head else None)
            due = {"now": t, "limit": limit, "lead": C.duration(ONE_OFF_LEAD)}
            jobs = [rows.job(r, C) for r in conn.execute(Q["due_jobs"], due)]
            watched = [j.id for j in jobs if j.overlap is not OverlapPolicy.ALLOW]
            unfinished: set[int] = set()
            if watched:
                found = conn.execute(Q["unfinished_jobs"], {"ids": C.array(watched)})
                unfinished = {r[0] for r in found}
            plan = plan_batch(jobs, unfinished, now_dt)
            cancelled: list[int] = []
            if plan.replace_job_ids:
                replaced = {
                    "ids": C.array(plan.replace_job_ids),
                    "now": t,
                    "reason": REPLACED,
                }
                # The running runs' attempts end (cancelled) in their histories first.
                ended = conn.execute(Q["end_replaced_attempts"], replaced).fetchall()
                conn.executemany(Q["trim_attempts"], past_kept(ended))
                cancelled = sorted(
                    r[0] for r in conn.execute(Q["cancel_unfinished_runs_of_jobs"], replaced)
                )
            runs: list[Run] = []
            run_ids: dict[tuple[int, int], int] = {}
            for new in plan.runs:
                slot = to_micros(new.scheduled_for)
                row = conn.execute(
                    Q["insert_runs"], {"job_id": new.job.id, "scheduled_for": slot, "now": t}
                ).fetchone()
                if row is not None:
                    runs.append(rows.run(row, C))
                    run_ids[(new.job.id, slot)] = row["id"]
            conn.executemany(
                Q["advance_jobs"],
                [
                    {"id": a.job_id, "next_run_at": _us(a.next_run_at), "state": a.state, "now": t}
                    for a in plan.advances
                ],
            )
            skipped = [
                SlotSkip(
                    s.job_id,
                    s.first_slot,
                    s.last_slot,
                    s.count,
                    s.fate,
                    run_ids.get((s.job_id, to_micros(s.coalesced_into)))
                    if s.coalesced_into
                    else None,
                    s.more,
                    now_dt,
                )
                for s in plan.skips
            ]
            conn.executemany(
                Q["insert_slot_skips"],
                [
                    {
                        "job_id": s.job_id,
                        "first_slot": to_micros(s.first_slot),
                        "last_slot": to_micros(s.last_slot),
                        "count": s.count,
                        "fate": s.fate,
                        "run_id": s.run_id,
                        "more": s.more,
                        "now": t,
                    }
                    for s in skipped
                ],
            )
            next_due = conn.execute(
                Q["next_due_at"],
                {"now": self.sqlite.at(now), "lead": C.duration(ONE_OFF_LEAD)},
            ).fetchone()
        if runs:
            self._signals.notify(CHANNEL_RUNS)
        return TriggerResult(
            runs,
            skipped,
            cancelled,
            len(jobs),
            len(jobs) >= limit,
            _dt(next_due["at"]),
            from_micros(next_due["now"]),
        )


def _dt(us: int | None) -> datetime | None:
    return from_micros(us) if us is not None else None


def _us(dt: datetime | None) -> int | None:
    return to_micros(dt) if dt is not None else None
