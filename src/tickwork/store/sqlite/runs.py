"""The worker's hot path: claim (within tenants' and tasks' limits, fairly across
tenants), heartbeat and complete, each fenced by the run's token.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any

from tickwork.config import RUN_LEASE
from tickwork.errors import LeaseLost
from tickwork.job import ClaimedRun, Run, RunState
from tickwork.store import rows
from tickwork.store.base import Completion, LeaseReport, LeaseStatus
from tickwork.store.limits import (
    TASK,
    TENANT,
    Bucket,
    Key,
    claim_fairly,
    cursor,
    refill_all,
    spend,
    whole,
)
from tickwork.store.limits import Run as LimitRun
from tickwork.store.queries import for_claimer, for_queues
from tickwork.store.sqlite.core import SqliteCore
from tickwork.store.sqlite.driver import SQLITE_CODEC as C
from tickwork.store.sqlite.driver import Q


class SqliteRuns(SqliteCore):
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
        return self._complete_and_claim(
            [], worker, limit=limit, lease=lease, queues=queues, tasks=tasks, now=now
        )[1]

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
        rejected, runs = self._complete_and_claim(
            completions, worker, limit=limit, lease=lease, queues=queues, tasks=tasks, now=now
        )
        return rejected, [ClaimedRun.of(run) for run in runs]

    def _complete_and_claim(
        self,
        completions: Sequence[Completion],
        worker: str,
        *,
        limit: int,
        lease: timedelta,
        queues: Sequence[str] | None,
        tasks: Sequence[str] | None,
        now: datetime | None,
    ) -> tuple[list[int], list[Run]]:
        if (queues is not None and not queues) or (tasks is not None and not tasks):
            limit = 0
        if not completions and limit < 1:
            return [], []
        t = self._now(now)
        params: dict[str, Any] = {
            "worker": worker,
            "now": t,
            "limit": limit,
            "lease": C.duration(lease),
            "queues": C.array(queues),
            "tasks": C.array(tasks),
        }
        with self._write() as conn:  # one transaction: one commit (one fsync) for both
            rejected = self._complete_in(conn, completions, t)
            found = self._claim_in(conn, params, queues, tasks) if limit >= 1 else []
        runs = [rows.run(r, C) for r in found]
        runs.sort(key=lambda r: (-r.priority, r.run_at, r.id))
        return rejected, runs

    def _claim_in(
        self,
        conn: sqlite3.Connection,
        params: dict[str, Any],
        queues: Sequence[str] | None,
        claimable: Sequence[str] | None,
    ) -> list[sqlite3.Row]:
        """Claim under the write lock: one statement when no tenant or task has a limit, one
        tenant's runs are claimable and no run of a task outside ``claimable`` waits; else
        the limited tenants' and tasks' running runs are counted, their token buckets
        refilled, and the candidates picked within them, fairly across tenants (the write
        lock holds every other claimer off, so the counts stay true). Only runs of
        ``claimable`` (None: every task) are walked to and taken; while runs of another
        task wait, each of the claimer's tasks is read apart (claim_candidates_of_task), so
        that no other task's backlog is read (with no limit and one tenant: those reads,
        merged in claim order, and one update)."""
        limited = conn.execute(Q["limited_tenants"]).fetchall()
        tenants = {r["tenant"]: r["max_running"] for r in limited if r["max_running"]}
        limited_tasks = conn.execute(Q["limited_tasks"]).fetchall()
        tasks = {r["task"]: r["max_running"] for r in limited_tasks if r["max_running"]}
        others = claimable is not None and bool(
            conn.execute(Q["others_waiting"], {"tasks": params["tasks"]}).fetchone()["waiting"]
        )
        active: list[str] = []
        if others:
            found_tasks = conn.execute(Q["active_tasks"], {"tasks": params["tasks"]})
            active = [r["task"] for r in found_tasks]
        of_task = for_queues(Q["claim_candidates_of_task"], queues)
        claim = {k: params[k] for k in ("worker", "now", "lease")}
        if not limited and not limited_tasks:
            span = conn.execute(Q["claimable_tenants"]).fetchone()
            if span["first"] == span["last"] and not others:
                query = for_claimer(Q["claim"], queues, claimable)
                return conn.execute(query, params).fetchall()
            if span["first"] == span["last"]:
                # Runs of a task the claimer lacks wait: its own tasks' runs, each read
                # apart through their index, the first of them in claim order.
                where = {
                    "tenant": span["first"],
                    "now": params["now"],
                    "queues": params["queues"],
                    "taken": "[]",
                    "limit": params["limit"],
                }
                rows = [
                    r for task in active for r in conn.execute(of_task, {**where, "task": task})
                ]
                rows.sort(key=lambda r: (-r["priority"], r["run_at"], r["id"]))
                ids = C.array([r["id"] for r in rows[: params["limit"]]])
                return conn.execute(Q["claim_ids"], {**claim, "ids": ids}).fetchall()
        room: dict[Key, int] = {(TASK, r["task"]): params["limit"] for r in limited_tasks}
        if tenants:
            found = conn.execute(Q["running_of_tenants"], {"tenants": C.array(list(tenants))})
            running = {r["tenant"]: r["n"] for r in found}
            room.update({(TENANT, t): cap - running.get(t, 0) for t, cap in tenants.items()})
        if tasks:
            found = conn.execute(Q["running_of_tasks"], {"tasks": C.array(list(tasks))})
            running = {r["task"]: r["n"] for r in found}
            room.update({(TASK, t): cap - running.get(t, 0) for t, cap in tasks.items()})
        now = C.from_time(params["now"])

        def bucket_room(kind: str, rows: list[sqlite3.Row]) -> dict[str, Bucket]:
            """The token buckets of ``rows`` (tenants' or tasks'), refilled to now; each
            one's room no more than its whole tokens."""
            buckets = refill_all(
                [
                    (r[kind], r["rate"], r["burst"], r["tokens"], C.from_time(r["refilled_at"]))
                    for r in rows
                ],
                now,
            )
            for name, (tokens, _) in buckets.items():
                room[kind, name] = min(room.get((kind, name), params["limit"]), whole(tokens))
            return buckets

        buckets = bucket_room(TENANT, limited)
        task_buckets = bucket_room(TASK, limited_tasks)
        query = for_claimer(Q["claim_candidates"], queues, claimable)
        limited_names = [r["task"] for r in limited_tasks]

        def read(tenant: str, k: int, task: str | None) -> list[LimitRun]:
            """``tenant``'s first ``k`` claimable runs in claim order: of ``task``, or (None)
            of every task without a limit (while runs of another task wait, each of the
            claimer's tasks read apart)."""
            found = {
                "tenant": tenant,
                "now": params["now"],
                "queues": params["queues"],
                "taken": "[]",
                "limit": k,
            }
            if task is not None:
                if claimable is not None and task not in claimable:
                    return []
                rows = conn.execute(of_task, {**found, "task": task}).fetchall()
            elif not others:
                rows = conn.execute(
                    query,
                    {**found, "tasks": params["tasks"], "full_tasks": C.array(limited_names)},
                ).fetchall()
            else:
                rows = [
                    r
                    for t in active
                    if t not in limited_names
                    for r in conn.execute(of_task, {**found, "task": t})
                ]
            found_runs = [
                (r["id"], r["tenant"], r["task"], (-r["priority"], r["run_at"], r["id"]))
                for r in rows
            ]
            return sorted(found_runs, key=itemgetter(3))[:k]

        walk = conn.execute(
            for_queues(Q["walk_tenants"], queues),
            {
                "after": self._after,
                "tenants": params["limit"],
                "now": params["now"],
                "queues": params["queues"],
                "others": others,
                "active": C.array(active),
            },
        ).fetchall()
        walked = [(r["tenant"], r["weight"]) for r in walk]
        picked = claim_fairly(
            walked, room, read, limit=params["limit"], limited_tasks=limited_names
        )
        # Round-robin: the next claim walks on from the last tenant this one took a run of,
        # or past the tenants it walked and found full.
        self._after = cursor([t for t, _ in walked], picked, self._after)
        if not picked:
            return []
        ids = [run_id for run_id, _, _ in picked]
        claimed = conn.execute(Q["claim_ids"], {**claim, "ids": C.array(ids)}).fetchall()
        taken = spend(buckets, [r["tenant"] for r in claimed])
        conn.executemany(
            Q["take_tokens"],
            [{"tenant": t, "tokens": n, "at": C.time(at)} for t, (n, at) in taken.items()],
        )
        taken = spend(task_buckets, [r["task"] for r in claimed])
        conn.executemany(
            Q["take_task_tokens"],
            [{"task": t, "tokens": n, "at": C.time(at)} for t, (n, at) in taken.items()],
        )
        return claimed

    def heartbeat(
        self,
        run_id: int,
        fencing_token: int,
        *,
        lease: timedelta = RUN_LEASE,
        now: datetime | None = None,
    ) -> LeaseReport:
        t = self._now(now)
        with self._write() as conn:
            status, expires = self._beat(conn, run_id, fencing_token, t + C.duration(lease))
        if status is LeaseStatus.LOST:
            raise LeaseLost(run_id, fencing_token)
        return LeaseReport(status, C.from_time(expires))

    def heartbeat_many(
        self,
        leases: Sequence[tuple[int, int]],
        *,
        lease: timedelta = RUN_LEASE,
        now: datetime | None = None,
    ) -> dict[int, LeaseStatus]:
        if not leases:
            return {}
        t = self._now(now)
        with self._write() as conn:
            return {
                run_id: self._beat(conn, run_id, token, t + C.duration(lease))[0]
                for run_id, token in leases
            }

    def _beat(
        self, conn: sqlite3.Connection, run_id: int, token: int, expires: int
    ) -> tuple[LeaseStatus, int | None]:
        row = conn.execute(
            Q["heartbeat"], {"id": run_id, "token": token, "lease_expires_at": expires}
        ).fetchone()
        if row is not None:
            return LeaseStatus.HELD, int(row[0])
        held = conn.execute(Q["held_run_state"], {"id": run_id, "token": token}).fetchone()
        if held is not None and held["state"] == RunState.CANCELLED:
            return LeaseStatus.CANCELLED, None
        return LeaseStatus.LOST, None

    def complete(
        self,
        run_id: int,
        fencing_token: int,
        *,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Run:
        t = self._now(now)
        with self._write() as conn:
            row = conn.execute(
                Q["complete"],
                {"id": run_id, "token": fencing_token, "now": t, "result": C.json(result)},
            ).fetchone()
        if row is None:
            raise LeaseLost(run_id, fencing_token)
        return rows.run(row, C)

    def complete_many(
        self, completions: Sequence[Completion], *, now: datetime | None = None
    ) -> list[int]:
        if not completions:
            return []
        t = self._now(now)
        with self._write() as conn:
            return self._complete_in(conn, completions, t)

    @staticmethod
    def _complete_in(
        conn: sqlite3.Connection, completions: Sequence[Completion], t: int
    ) -> list[int]:
        rejected = []
        for c in completions:
            row = conn.execute(
                Q["complete_ids"],
                {"id": c.run_id, "token": c.fencing_token, "now": t, "result": C.json(c.result)},
            ).fetchone()
            if row is None:
                rejected.append(c.run_id)
        return rejected

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._write() as conn:  # BEGIN IMMEDIATE: the write lock until the block ends
            yield conn

    @contextmanager
    def complete_in_transaction(
        self,
        run_id: int,
        fencing_token: int,
        *,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Iterator[sqlite3.Connection]:
        with self.transaction() as conn:
            yield conn
            done = [Completion(run_id, fencing_token, result)]
            if self._complete_in(conn, done, self._now(now)):
                raise LeaseLost(run_id, fencing_token)  # rolls the whole block back
