"""The worker's hot path: claim (with complete_and_claim's three paths), heartbeat and
complete, each fenced by the run's token.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any

from psycopg.rows import DictRow, tuple_row
from psycopg.types.json import Jsonb

from tickwork.config import RUN_LEASE
from tickwork.errors import LeaseLost
from tickwork.job import ClaimedRun, Run
from tickwork.store import rows as mapping
from tickwork.store.base import Completion, LeaseReport, LeaseStatus
from tickwork.store.postgres.core import PgCore
from tickwork.store.postgres.driver import PG_CODEC, Q
from tickwork.store.postgres.pool import Conn
from tickwork.store.queries import for_claimer


class PgRuns(PgCore):
    def claim(
        self,
        worker: str,
        *,
        limit: int,
        lease: timedelta = RUN_LEASE,
        queues: Sequence[str] | None = None,
        tasks: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> list[Run]:
        if limit < 1 or (queues is not None and not queues) or (tasks is not None and not tasks):
            return []
        # As complete_and_claim: one statement unless a limit exists (the statement's
        # flag row says so even when it claimed nothing), or the claimer's own tasks' runs
        # read apart while runs of a task it lacks wait.
        rows: list[DictRow] = []
        lean: list[ClaimedRun] = []
        if not self._limited and not self._others:
            params = _claim_params(worker, limit, lease, queues=queues, tasks=tasks, now=now)
            rows = self._all(for_claimer(Q["claim"], queues, None), params)
            self._limited, self._others = rows[0]["limited"], bool(rows[0]["others"])
            rows = [r for r in rows if r["id"] is not None]
            if len(rows) == limit or not (self._limited or self._others):
                return _claimed(rows)
        if not self._limited:
            _, lean = self._complete_then_claim(
                [],
                worker,
                limit=limit - len(rows),
                lease=lease,
                queues=queues,
                tasks=tasks,
                now=now,
                own=True,
            )
        if self._limited and len(rows) + len(lean) < limit:
            lean += self._claim_limited(
                [],
                worker,
                limit=limit - len(rows) - len(lean),
                lease=lease,
                queues=queues,
                tasks=tasks,
                now=now,
            )[1]
        if lean:  # the other paths come back lean: the whole rows for Run
            rows += self._all(Q["runs_by_ids"], {"ids": [run.id for run in lean]})
        return _claimed(rows)

    def complete_and_claim(
        self,
        completions: Sequence[Completion],
        worker: str,
        *,
        limit: int,
        lease: timedelta = RUN_LEASE,
        queues: Sequence[str] | None = None,
        tasks: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> tuple[list[int], list[ClaimedRun]]:
        # Three paths. With no tenant or task limited, one statement completes and claims
        # (complete_then_claim); while runs of a task the claimer lacks wait, another
        # statement does, reading each of its own tasks apart (complete_then_claim_own);
        # once a limit exists, those claim nothing and say so, and calls take the limited
        # path (a transaction that holds the limited tenants' and tasks' rows and counts
        # their running runs) until it finds none it could hold. Each statement says which
        # path the next call should take.
        if (queues is not None and not queues) or (tasks is not None and not tasks):
            limit = 0
        if not completions and limit < 1:
            return [], []
        if self._limited and limit >= 1:
            return self._complete_and_claim_limited(
                completions,
                worker,
                limit=limit,
                lease=lease,
                queues=queues,
                tasks=tasks,
                now=now,
            )
        own = self._others
        rejected, claimed = self._complete_then_claim(
            completions,
            worker,
            limit=limit,
            lease=lease,
            queues=queues,
            tasks=tasks,
            now=now,
            own=own,
        )
        if limit < 1 or len(claimed) == limit:
            return rejected, claimed
        if self._others and not own and not self._limited:
            claimed += self._complete_then_claim(
                [],
                worker,
                limit=limit - len(claimed),
                lease=lease,
                queues=queues,
                tasks=tasks,
                now=now,
                own=True,
            )[1]
        if self._limited and len(claimed) < limit:
            claimed += self._complete_and_claim_limited(
                [],
                worker,
                limit=limit - len(claimed),
                lease=lease,
                queues=queues,
                tasks=tasks,
                now=now,
            )[1]
        return rejected, claimed

    def _complete_then_claim(
        self,
        completions: Sequence[Completion],
        worker: str,
        *,
        limit: int,
        lease: timedelta,
        queues: Sequence[str] | None,
        tasks: Sequence[str] | None,
        now: datetime | None,
        own: bool,
    ) -> tuple[list[int], list[ClaimedRun]]:
        """Complete, then claim in one statement: through the claim index, or (``own``)
        each of the claimer's tasks apart. Notes which path the next call should take."""
        params = {
            **_completion_params(completions),
            **_claim_params(worker, max(limit, 0), lease, queues=queues, tasks=tasks, now=now),
        }
        name = "complete_then_claim_own" if own else "complete_then_claim"
        query = for_claimer(Q[name], queues, tasks if own else None)
        with self._conn() as conn:
            cur = conn.cursor(row_factory=tuple_row)
            # Prepared from the first call, not the fifth: planning it costs more than
            # running it, and a worker makes this call hundreds of times a second.
            rows = cur.execute(query, params, binary=True, prepare=True).fetchall()
        rejected: list[int] = []
        if rows[0][0] < len(completions):
            rejected = self._rejected(completions)
        make = ClaimedRun._make
        claimed = [make(r[3:]) for r in rows if r[3] is not None]
        self._limited, self._others = rows[0][1], bool(rows[0][2])
        return rejected, claimed

    def _complete_and_claim_limited(
        self,
        completions: Sequence[Completion],
        worker: str,
        *,
        limit: int,
        lease: timedelta,
        queues: Sequence[str] | None,
        tasks: Sequence[str] | None,
        now: datetime | None,
    ) -> tuple[list[int], list[ClaimedRun]]:
        done, claimed = self._claim_limited(
            completions, worker, limit=limit, lease=lease, queues=queues, tasks=tasks, now=now
        )
        rejected = [c.run_id for c in completions if c.run_id not in done]
        return rejected, claimed

    def _claim_limited(
        self,
        completions: Sequence[Completion],
        worker: str,
        *,
        limit: int,
        lease: timedelta,
        queues: Sequence[str] | None,
        tasks: Sequence[str] | None,
        now: datetime | None,
    ) -> tuple[set[int], list[ClaimedRun]]:
        """Complete, then claim within tenants' and tasks' limits and fairly across
        tenants, in one transaction and one round trip. hold_limits walks the tenants with
        runs and locks the rows of the limited ones it walked and of the limited tasks
        (SKIP LOCKED: one another claimer holds is left out of this claim); claim_limited,
        a later statement whose snapshot sees what every earlier holder committed, counts
        their running runs, refills their token buckets, picks, claims and spends the
        tokens: so no two claimers ever count one tenant or task at once, and every limit
        holds exactly. Only runs of ``tasks`` (None: any) are walked to and claimed.
        Returns the ids completed and the runs claimed, in claim order."""
        with self._conn() as conn, conn.pipeline():
            with conn.transaction():
                completed = None
                if completions:
                    params = {**_completion_params(completions), "now": now}
                    completed = conn.execute(Q["complete_ids"], params, binary=True)
                claimed = None
                if limit >= 1:
                    params = {
                        **_claim_params(worker, limit, lease, queues=queues, tasks=tasks, now=now),
                        "after": self._after,
                    }
                    hold = for_claimer(Q["hold_limits"], queues, tasks)
                    conn.execute(hold, params, prepare=True)
                    query = for_claimer(Q["claim_limited"], queues, tasks)
                    cur = conn.cursor(row_factory=tuple_row)
                    claimed = cur.execute(query, params, binary=True, prepare=True)
            done = {r["id"] for r in completed} if completed is not None else set()
            if claimed is None:
                return done, []
            rows = claimed.fetchall()
        # Each row: tenants walked, the last of them, whether a limit exists, the claimed
        # run's tenant's place in the walk, then the ClaimedRun (NULLs with none claimed).
        tenants, last_walked, limited = rows[0][:3]
        # The limited path again while a limit exists or tenants share; else one statement.
        self._limited = limited or tenants > 1
        make = ClaimedRun._make
        runs = [make(r[4:]) for r in rows if r[4] is not None]
        # Round-robin: the next claim walks on from the last tenant this one claimed for,
        # or past every tenant it walked when it found them all full.
        if runs:
            self._after = max((r for r in rows if r[4] is not None), key=itemgetter(3))[7]
        elif last_walked is not None:
            self._after = last_walked
        return done, runs

    def _rejected(self, completions: Sequence[Completion]) -> list[int]:
        """Which of ``completions`` were not applied: their run is not succeeded under the
        completion's fencing token (a re-claim would have moved the token on)."""
        rows = self._all(Q["completed_with_tokens"], _completion_params(completions))
        applied = {r["id"] for r in rows}
        return [c.run_id for c in completions if c.run_id not in applied]

    def heartbeat(
        self,
        run_id: int,
        fencing_token: int,
        *,
        lease: timedelta = RUN_LEASE,
        now: datetime | None = None,
    ) -> LeaseReport:
        rows = self._beat([(run_id, fencing_token)], lease, now)
        status, expires = rows[run_id]
        if status is LeaseStatus.LOST:
            raise LeaseLost(run_id, fencing_token)
        return LeaseReport(status, expires)

    def heartbeat_many(
        self,
        leases: Sequence[tuple[int, int]],
        *,
        lease: timedelta = RUN_LEASE,
        now: datetime | None = None,
    ) -> dict[int, LeaseStatus]:
        if not leases:
            return {}
        return {run_id: status for run_id, (status, _) in self._beat(leases, lease, now).items()}

    def _beat(
        self, leases: Sequence[tuple[int, int]], lease: timedelta, now: datetime | None
    ) -> dict[int, tuple[LeaseStatus, datetime | None]]:
        rows = self._all(
            Q["heartbeat"],
            {
                "ids": [r for r, _ in leases],
                "tokens": [t for _, t in leases],
                "lease": lease,
                "now": now,
            },
        )
        return {r["id"]: (LeaseStatus(r["status"]), r["lease_expires_at"]) for r in rows}

    def complete(
        self,
        run_id: int,
        fencing_token: int,
        *,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Run:
        rows = self._complete([Completion(run_id, fencing_token, result)], now)
        if not rows:
            raise LeaseLost(run_id, fencing_token)
        return _run(rows[0])

    def complete_many(
        self, completions: Sequence[Completion], *, now: datetime | None = None
    ) -> list[int]:
        if not completions:
            return []
        # Only the ids come back: decoding whole rows cost a worker more than the rest of
        # the call (benchmarks/README.md, "Figures behind the store's comments").
        done = {r["id"] for r in self._complete(completions, now, query="complete_ids")}
        return [c.run_id for c in completions if c.run_id not in done]

    def _complete(
        self, completions: Sequence[Completion], now: datetime | None, query: str = "complete"
    ) -> list[DictRow]:
        return self._all(Q[query], {**_completion_params(completions), "now": now})

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        # The caller's own errors reach it as psycopg raised them (not translated: they
        # are its SQL's).
        with self._handler_pool.connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def complete_in_transaction(
        self,
        run_id: int,
        fencing_token: int,
        *,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Iterator[Conn]:
        # Only the completion below is tickwork's: the handler's errors are its SQL's.
        params = {**_completion_params([Completion(run_id, fencing_token, result)]), "now": now}
        with self.transaction() as conn:
            yield conn
            if not conn.execute(Q["complete_ids"], params).fetchall():
                raise LeaseLost(run_id, fencing_token)  # rolls the whole block back


def _list(queues: Sequence[str] | None) -> list[str] | None:
    return list(queues) if queues is not None else None


def _claim_params(
    worker: str,
    limit: int,
    lease: timedelta,
    *,
    queues: Sequence[str] | None,
    tasks: Sequence[str] | None,
    now: datetime | None,
) -> dict[str, Any]:
    return {
        "worker": worker,
        "now": now,
        "limit": limit,
        "lease": lease,
        "queues": _list(queues),
        "tasks": _list(tasks),
    }


def _completion_params(completions: Sequence[Completion]) -> dict[str, Any]:
    return {
        "ids": [c.run_id for c in completions],
        "tokens": [c.fencing_token for c in completions],
        "results": [Jsonb(c.result) if c.result is not None else None for c in completions],
    }


def _claimed(rows: list[DictRow]) -> list[Run]:
    """Claimed rows as runs, in claim order (UPDATE ... RETURNING does not keep it)."""
    runs = [_run(r) for r in rows]
    runs.sort(key=lambda r: (-r.priority, r.run_at, r.id))
    return runs


def _run(r: DictRow) -> Run:
    return mapping.run(r, PG_CODEC)
