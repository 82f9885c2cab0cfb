"""Trigger: the due jobs' runs and their advance in one pipelined transaction, fenced by
the leader lease.
"""

from __future__ import annotations

from datetime import datetime

from psycopg.rows import tuple_row

from tickwork.config import TRIGGER_BATCH
from tickwork.errors import LeadershipLost
from tickwork.job import ONE_OFF_LEAD, OverlapPolicy, Run
from tickwork.store.base import CHANNEL_RUNS, SlotSkip, TriggerResult
from tickwork.store.planning import plan_batch
from tickwork.store.postgres.core import PgCore
from tickwork.store.postgres.driver import Q, notify
from tickwork.store.postgres.due import due_job, new_run
from tickwork.store.sql.runs import REPLACED, past_kept


class PgTrigger(PgCore):
    def trigger(
        self, epoch: int, *, limit: int = TRIGGER_BATCH, now: datetime | None = None
    ) -> TriggerResult:
        # Pipelined: statements whose results are not needed before the next are sent
        # together, so a typical trigger is three round trips, not nine (BEGIN + fence +
        # due jobs; runs + advance + next due; ledger + notify + COMMIT).
        # Hazard: each batch ends with a Sync (p.sync()), not the flush request a fetch
        # would send. Only after a Sync does the server count the session "idle in
        # transaction" and arm idle_in_transaction_session_timeout; without one, a leader
        # cut off between two batches left its session waiting, holding the lease row FOR
        # SHARE and the due jobs' rows, and no standby could lead until TCP gave up.
        with self._conn() as conn, conn.pipeline() as p, conn.transaction():
            head = conn.execute(Q["trigger_head"], {"epoch": epoch, "now": now})
            due = conn.cursor(row_factory=tuple_row).execute(
                Q["due_jobs"], {"now": now, "limit": limit, "lead": ONE_OFF_LEAD}
            )
            p.sync()
            fence = head.fetchone()
            if fence is None or not fence["leads"]:
                raise LeadershipLost(None, epoch, holder=fence["holder"] if fence else None)
            t: datetime = fence["now"]
            jobs = [due_job(r) for r in due.fetchall()]
            watched = [j.id for j in jobs if j.overlap is not OverlapPolicy.ALLOW]
            unfinished: set[int] = set()
            if watched:
                cursor = conn.execute(Q["unfinished_jobs"], {"ids": watched})
                p.sync()
                unfinished = {r["job_id"] for r in cursor.fetchall()}
            plan = plan_batch(jobs, unfinished, t)
            cancelled: list[int] = []
            if plan.replace_job_ids:
                replaced = {"ids": plan.replace_job_ids, "now": t, "reason": REPLACED}
                # The running runs' attempts end (cancelled) in their histories first.
                ended = conn.execute(Q["end_replaced_attempts"], replaced)
                cursor = conn.execute(Q["cancel_unfinished_runs_of_jobs"], replaced)
                p.sync()
                for trim in past_kept(ended.fetchall()):
                    conn.execute(Q["trim_attempts"], trim)
                cancelled = sorted(r["id"] for r in cursor.fetchall())
            # Every parameter first, then the batch back to back, then its Sync: the window
            # in which the server holds part of a batch and waits for the rest is a write.
            insert = {
                "job_ids": [n.job.id for n in plan.runs],
                "slots": [n.scheduled_for for n in plan.runs],
                "now": t,
            }
            advance = {
                "ids": [a.job_id for a in plan.advances],
                "next_run_ats": [a.next_run_at for a in plan.advances],
                "states": [str(a.state) for a in plan.advances],
                "now": t,
            }
            inserted = None
            if plan.runs:
                inserted = conn.cursor(row_factory=tuple_row).execute(Q["insert_runs"], insert)
                notify(conn, CHANNEL_RUNS)
            if plan.advances:
                conn.execute(Q["advance_jobs"], advance)
            next_due_cursor = conn.execute(Q["next_due_at"], {"now": now, "lead": ONE_OFF_LEAD})
            p.sync()
            runs: list[Run] = []
            if inserted is not None:
                by_id = {j.id: j for j in jobs}
                runs = [
                    new_run(by_id[job_id], run_id, slot, created_at)
                    for run_id, job_id, slot, created_at in inserted.fetchall()
                ]
                runs.sort(key=lambda r: r.id)
            next_due = next_due_cursor.fetchone()
            skipped: list[SlotSkip] = []
            if plan.skips:
                run_ids = {(r.job_id, r.scheduled_for): r.id for r in runs}
                skipped = [
                    SlotSkip(
                        s.job_id,
                        s.first_slot,
                        s.last_slot,
                        s.count,
                        s.fate,
                        run_ids.get((s.job_id, s.coalesced_into)) if s.coalesced_into else None,
                        s.more,
                        t,
                    )
                    for s in plan.skips
                ]
                conn.execute(
                    Q["insert_slot_skips"],
                    {
                        "job_ids": [s.job_id for s in skipped],
                        "first_slots": [s.first_slot for s in skipped],
                        "last_slots": [s.last_slot for s in skipped],
                        "counts": [s.count for s in skipped],
                        "fates": [str(s.fate) for s in skipped],
                        "run_ids": [s.run_id for s in skipped],
                        "mores": [s.more for s in skipped],
                        "now": t,
                    },
                )
        return TriggerResult(
            runs,
            skipped,
            cancelled,
            len(jobs),
            len(jobs) >= limit,
            next_due["at"] if next_due else None,
            next_due["now"] if next_due else t,
        )
