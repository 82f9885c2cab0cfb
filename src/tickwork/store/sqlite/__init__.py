"""SqliteStore: the embedded default. One file, WAL, many processes on one host.

Concurrency: every write transaction starts with ``BEGIN IMMEDIATE``, which takes the
database's single write lock up front, so two claimers (threads or processes) serialise
instead of both reading the same queued rows: a claim's select-and-update is atomic.
Readers never block (WAL). ``busy_timeout`` makes a writer wait for the lock rather than
fail. ``synchronous=FULL`` makes a commit durable against power loss before it returns.

Clock: the host's clock, read in the calling process (SQLite is one host by construction;
every process on it reads the same clock). Times are stored as integer microseconds.

Notifications: there is no cross-process LISTEN/NOTIFY, so the ``listen_notify``
capability is absent and sleepers poll; within one process (``tickwork run``) a
submit or trigger wakes that process's listeners at once (:mod:`.signals`).

This module holds what SQLite does its own way: migrations, bulk submit, trigger, claim,
complete and heartbeat. Every other transition is :class:`~tickwork.store.sql.SqlStore`'s,
over :class:`.driver.SqliteDriver`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

from tickwork import schedule as schedules
from tickwork.clock import from_micros, to_micros
from tickwork.config import RUN_LEASE, TRIGGER_BATCH
from tickwork.errors import (
    LeadershipLost,
    LeaseLost,
    MigrationError,
    StoreMissing,
    ValidationError,
)
from tickwork.job import (
    ONE_OFF_LEAD,
    ClaimedRun,
    JobSpec,
    OverlapPolicy,
    Run,
    RunState,
    ScheduleState,
)
from tickwork.store import rows
from tickwork.store.base import (
    CHANNEL_JOBS,
    CHANNEL_RUNS,
    Completion,
    Heartbeat,
    LeaseStatus,
    Listener,
    SlotSkip,
    Submitted,
    TriggerResult,
)
from tickwork.store.driver import Tx
from tickwork.store.health import StoreHealth
from tickwork.store.limits import (
    TASK,
    TENANT,
    Bucket,
    FairRow,
    Key,
    fair_order,
    names,
    pick_within_limits,
    refill_all,
    share,
    spend,
    whole,
)
from tickwork.store.planning import plan_batch
from tickwork.store.queries import for_claimer, for_queues, migration_files
from tickwork.store.sql import SqlStore
from tickwork.store.sql.calendars import bind_calendar
from tickwork.store.sql.runs import REPLACED, past_kept
from tickwork.store.sqlite.driver import (
    SQLITE_CODEC,
    Q,
    SqliteDriver,
    SqliteTx,
    path_from_url,
    statements,
)
from tickwork.store.sqlite.signals import SignalListener

HERE = Path(__file__).parent
MIGRATIONS = migration_files(HERE / "migrations")
LATEST_VERSION = MIGRATIONS[-1][0]
C = SQLITE_CODEC


def _holds_a_database(path: Path) -> bool:
    """Whether ``path`` is a file with something in it (SQLite takes an empty file for a new
    database, and its first write would make it one)."""
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


class SqliteStore(SqlStore):
    capabilities = frozenset()

    def __init__(self, url: str, *, migrate: bool | None = None, create: bool = True) -> None:
        """``create``: see :func:`tickwork.store.open_store`; False opens an existing file
        only (StoreMissing, and nothing made, for a missing or empty one)."""
        self.url = url
        self.path = path_from_url(url)
        if not create and not _holds_a_database(self.path):
            raise StoreMissing(str(self.path.resolve()), url)
        self.sqlite = SqliteDriver(url, self.path, create=create)
        super().__init__(self.sqlite)
        # A file on this host has no outages to tell: a busy write lock is contention, and
        # the callers' own retries cover it.
        self.health = StoreHealth(url)
        self._signals = self.sqlite.signals
        self._write = self.sqlite.transaction
        self._after = ""
        """Fair share's cursor: the tenant this store's last limited claim reached."""
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        if migrate or (migrate is None and fresh):
            self.migrate()

    def _now(self, now: datetime | None) -> int:
        return cast(int, self.sqlite.at(now))

    # -- migrations -------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self._write() as conn:
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            if current > LATEST_VERSION:
                raise MigrationError(
                    f"{self.path} has schema version {current}; this tickwork knows up to "
                    f"{LATEST_VERSION}: upgrade tickwork"
                )
            for version, path in MIGRATIONS:
                if version <= current:
                    continue
                for statement in statements(path.read_text()):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {version}")
                applied.append(version)
        return applied

    def schema_version(self) -> tuple[int, int]:
        with self.sqlite.read() as tx:
            current = tx.all("PRAGMA user_version", {})[0][0]
        return int(current), LATEST_VERSION

    # -- bulk submit ------------------------------------------------------------------------

    def submit(
        self, spec: JobSpec, *, now: datetime | None = None, conn: object | None = None
    ) -> Submitted:
        return self._submit([spec], now, conn, batch=False)[0]

    def submit_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None, conn: object | None = None
    ) -> list[Submitted]:
        return self._submit(specs, now, conn, batch=True)

    def _submit(
        self, specs: Sequence[JobSpec], now: datetime | None, conn: object | None, *, batch: bool
    ) -> list[Submitted]:
        if conn is not None:
            raise ValidationError(
                "conn= writes in a caller's PostgreSQL transaction; this store is SQLite "
                f"({self.path})",
                field="conn",
            )
        t = self._now(now)
        submitted: list[Submitted] = []
        with self._write() as tx:
            for i, spec in enumerate(specs):
                try:
                    submitted.append(self._submit_one(tx, spec, t))
                except ValidationError as exc:
                    raise exc.at(i) if batch else exc from None
        channels = [CHANNEL_JOBS] if any(s.created for s in submitted) else []
        if any(s.run for s in submitted):
            channels.append(CHANNEL_RUNS)
        self._signals.notify(*channels)
        return submitted

    def _submit_one(self, conn: sqlite3.Connection, spec: JobSpec, t: int) -> Submitted:
        if spec.idempotency_key is not None:
            row = conn.execute(
                Q["job_by_idempotency_key"],
                {"tenant": spec.tenant, "key": spec.idempotency_key},
            ).fetchone()
            if row is not None:
                return Submitted(rows.read_job(row, C), created=False)
        if spec.name is not None:
            taken = conn.execute(
                Q["job_by_name_for_update"], {"tenant": spec.tenant, "name": spec.name}
            ).fetchone()
            if taken is not None:
                raise ValidationError(
                    f"tenant {spec.tenant!r} already has a job named {spec.name!r} "
                    f"(job {taken['id']})",
                    field="name",
                )
        return self._insert_one(conn, spec, t)

    def _insert_job(self, tx: Tx, spec: JobSpec, t: datetime) -> Submitted:
        return self._insert_one(cast(SqliteTx, tx).conn, spec, to_micros(t))

    def _insert_one(self, conn: sqlite3.Connection, spec: JobSpec, t: int) -> Submitted:
        spec = bind_calendar(
            spec, lambda name: conn.execute(Q["calendar_for_share"], {"name": name}).fetchone()
        )
        now_dt = from_micros(t)
        resolved = spec.schedule.resolve(now_dt)
        first = resolved.first_slot(now_dt)
        due_once = isinstance(resolved, schedules.Once) and first <= now_dt
        params = rows.job_params(spec, resolved, C)
        params.update(
            state=ScheduleState.COMPLETED if due_once else ScheduleState.ACTIVE,
            next_run_at=None if due_once else to_micros(first),
            now=t,
        )
        job_row = conn.execute(Q["insert_job"], params).fetchone()
        run = None
        if due_once:
            run_row = conn.execute(
                Q["insert_runs"],
                {"job_id": job_row["id"], "scheduled_for": to_micros(first), "now": t},
            ).fetchone()
            run = rows.run(run_row, C)
        # A job due now reads as the run just queued with it.
        latest = RunState.QUEUED if due_once else None
        return Submitted(rows.job(job_row, C, latest), created=True, run=run)

    # -- triggering -------------------------------------------------------------------------

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

    # -- runs -------------------------------------------------------------------------------

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
            "lease": _td_us(lease),
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
        room: dict[Key, int] = {}
        if tenants:
            found = conn.execute(Q["running_of_tenants"], {"tenants": C.array(list(tenants))})
            running = {r["tenant"]: r["n"] for r in found}
            room.update({(TENANT, t): cap - running.get(t, 0) for t, cap in tenants.items()})
        if tasks:
            found = conn.execute(Q["running_of_tasks"], {"tasks": C.array(list(tasks))})
            running = {r["task"]: r["n"] for r in found}
            room.update({(TASK, t): cap - running.get(t, 0) for t, cap in tasks.items()})
        now = from_micros(params["now"])

        def bucket_room(kind: str, rows: list[sqlite3.Row]) -> dict[str, Bucket]:
            """The token buckets of ``rows`` (tenants' or tasks'), refilled to now; each
            one's room no more than its whole tokens."""
            buckets = refill_all(
                [
                    (r[kind], r["rate"], r["burst"], r["tokens"], _dt(r["refilled_at"]))
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
        walked: dict[str, int] = {}

        def tenants_runs(tenant: str, taken: list[int], full: list[Key], k: int) -> list[Any]:
            """``tenant``'s first ``k`` claimable runs in claim order, none of a full task."""
            found = {
                "tenant": tenant,
                "now": params["now"],
                "queues": params["queues"],
                "taken": C.array(taken),
                "limit": k,
            }
            if not others:
                full_tasks = C.array(names(full, TASK))
                return conn.execute(
                    query, {**found, "tasks": params["tasks"], "full_tasks": full_tasks}
                ).fetchall()
            skip = set(names(full, TASK))
            rows = [
                r
                for task in active
                if task not in skip
                for r in conn.execute(of_task, {**found, "task": task})
            ]
            rows.sort(key=lambda r: (-r["priority"], r["run_at"], r["id"]))
            return rows[:k]

        def candidates(taken: list[int], full: list[Key], want: int) -> list[tuple[int, str, str]]:
            skip = set(names(full, TENANT))
            walk = conn.execute(
                for_queues(Q["walk_tenants"], queues),
                {
                    "after": self._after,
                    "tenants": want + len(skip),
                    "now": params["now"],
                    "queues": params["queues"],
                    "others": others,
                    "active": C.array(active),
                },
            ).fetchall()
            walked.update((r["tenant"], r["n"]) for r in walk)
            walk = [r for r in walk if r["tenant"] not in skip]
            weights = sum(r["weight"] for r in walk)
            walk_full = len(walk) >= want
            rows: list[FairRow] = []
            for w in walk:
                k = share(want, w["weight"], weights, walk_full=walk_full)
                rows += [
                    (r["id"], r["tenant"], r["task"], w["n"], rank, w["weight"])
                    for rank, r in enumerate(tenants_runs(w["tenant"], taken, full, k))
                ]
            return fair_order(rows, want)

        ids = pick_within_limits(candidates, room, params["limit"])
        if not ids:
            if walked:  # the next claim walks on past the tenants this one found full
                self._after = max(walked, key=walked.__getitem__)
            return []
        claimed = conn.execute(Q["claim_ids"], {**claim, "ids": C.array(ids)}).fetchall()
        # Round-robin: the next claim walks on from the last tenant this one reached.
        self._after = max({r["tenant"] for r in claimed}, key=walked.__getitem__)
        taken = spend(buckets, [r["tenant"] for r in claimed])
        conn.executemany(
            Q["take_tokens"],
            [{"tenant": t, "tokens": n, "at": to_micros(at)} for t, (n, at) in taken.items()],
        )
        taken = spend(task_buckets, [r["task"] for r in claimed])
        conn.executemany(
            Q["take_task_tokens"],
            [{"task": t, "tokens": n, "at": to_micros(at)} for t, (n, at) in taken.items()],
        )
        return claimed

    def heartbeat(
        self,
        run_id: int,
        fencing_token: int,
        *,
        lease: timedelta = RUN_LEASE,
        now: datetime | None = None,
    ) -> Heartbeat:
        t = self._now(now)
        with self._write() as conn:
            status, expires = self._beat(conn, run_id, fencing_token, t + _td_us(lease))
        if status is LeaseStatus.LOST:
            raise LeaseLost(run_id, fencing_token)
        return Heartbeat(status, _dt(expires))

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
                run_id: self._beat(conn, run_id, token, t + _td_us(lease))[0]
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

    # -- notifications ----------------------------------------------------------------------

    def listener(self, channels: Sequence[str]) -> Listener:
        return SignalListener(self._signals, channels)


def _dt(us: int | None) -> datetime | None:
    return from_micros(us) if us is not None else None


def _us(dt: datetime | None) -> int | None:
    return to_micros(dt) if dt is not None else None


def _td_us(td: timedelta) -> int:
    return td // timedelta(microseconds=1)
