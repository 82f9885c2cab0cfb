"""PostgresStore: the distributed engine. Many hosts, one PostgreSQL.

Concurrency: claim and rescue select with ``FOR UPDATE SKIP LOCKED``, so concurrent
claimers never wait on each other and never take the same row; trigger locks due job rows
the same way and holds the leader lease row ``FOR SHARE`` for its whole transaction, so a
new leader's acquire waits for an in-flight trigger of the old one to finish and no
trigger of a deposed epoch can commit after the handover. Each run is unique on
(job_id, scheduled_for): a second run for one slot is impossible whatever races.

Clock: ``now()`` of the database (the transaction's start) judges due-ness and leases;
callers never send their own time (``now`` parameters exist for tests).

Connections: a pool of autocommit connections (:mod:`.pool`: what every session is told,
and how a lost connection is found and replaced in bounded time); a single-statement
transition is one round trip; multi-statement ones use an explicit transaction. Statements
are prepared by psycopg after a few executions. Notifications use LISTEN/NOTIFY on a
dedicated connection that re-listens by itself (:mod:`.listener`). Every call reports to
:attr:`PostgresStore.health`, which logs an outage once when it begins and once when it
ends.

High availability: a multi-host URL (``postgresql://h1:5432,h2:5432/db?target_session_attrs
=read-write``) is passed to libpq as it is; after a failover every new connection finds the
new primary, and the old primary's connections are replaced as they fail.

This module holds what PostgreSQL does its own way: migrations, bulk submit, the pipelined
trigger, claim, complete and heartbeat. Every other transition is
:class:`~tickwork.store.sql.SqlStore`'s, over :class:`.driver.PgDriver`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import itemgetter
from pathlib import Path
from typing import Any, cast

from psycopg import errors as pg_errors
from psycopg.rows import DictRow, tuple_row
from psycopg.types.json import Jsonb

from tickwork import schedule as schedules
from tickwork.config import RUN_LEASE, TRIGGER_BATCH
from tickwork.errors import LeadershipLost, LeaseLost, MigrationError, ValidationError
from tickwork.job import (
    ONE_OFF_LEAD,
    ClaimedRun,
    Job,
    JobSpec,
    JobState,
    OverlapPolicy,
    Run,
    RunState,
    ScheduleState,
    run_policy,
)
from tickwork.store import rows as mapping
from tickwork.store.base import (
    CHANNEL_JOBS,
    CHANNEL_RUNS,
    LISTEN_NOTIFY,
    MULTI_HOST,
    SKIP_LOCKED,
    Completion,
    Heartbeat,
    LeaseStatus,
    Listener,
    SlotSkip,
    Submitted,
    TriggerResult,
)
from tickwork.store.driver import Tx
from tickwork.store.planning import plan_batch
from tickwork.store.postgres.borrowed import borrowed
from tickwork.store.postgres.driver import (
    PG_CODEC,
    P,
    PgDriver,
    PgTx,
    Q,
    json_loads,
    notify,
    now_in,
)
from tickwork.store.postgres.due import due_job, new_run
from tickwork.store.postgres.listener import PgListener
from tickwork.store.postgres.pool import POOL_MAX_SIZE, Conn
from tickwork.store.queries import for_claimer, migration_files
from tickwork.store.sql import SqlStore
from tickwork.store.sql.calendars import bind_calendar
from tickwork.store.sql.runs import REPLACED, past_kept

HERE = Path(__file__).parent
MIGRATIONS = migration_files(HERE / "migrations")
LATEST_VERSION = MIGRATIONS[-1][0]
SUBMIT_STATEMENT_ROWS = 5000
"""Jobs per ``submit_jobs`` statement: a bulk submit of more (``tickwork submit --file``)
takes several statements in its one transaction, so no one parameter grows unbounded."""
DEFAULT_APPLICATION_NAME = "tickwork"
"""How tickwork's sessions show in ``pg_stat_activity`` unless told who they are."""


class PostgresStore(SqlStore):
    capabilities = frozenset({LISTEN_NOTIFY, SKIP_LOCKED, MULTI_HOST})

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = False,
        connect: bool = True,
        pool_size: int = POOL_MAX_SIZE,
        application_name: str = DEFAULT_APPLICATION_NAME,
    ) -> None:
        self.url = url
        driver = PgDriver(url, application_name, pool_size=pool_size)
        super().__init__(driver)
        self.health = driver.health
        self._pool = driver.pool
        self._handler_pool = driver.handler_pool
        # The hot paths below take connections straight from the driver, no Tx in between.
        self._conn: Callable[[], AbstractContextManager[Conn]] = driver.conn
        self._tx: Callable[[], AbstractContextManager[Conn]] = driver.tx
        self._limited = False
        """Whether the last claim found a limit or several tenants' runs: claims take the
        limited path."""
        self._others = False
        """Whether runs of a task the last claimer lacked were waiting: the next claim
        reads its own tasks apart (complete_then_claim_own) until that says none are."""
        self._after = ""
        """Fair share's cursor: the tenant this store's last limited claim reached."""
        if connect:  # fail now, not at the first call, if it cannot connect at all
            with self._conn():
                pass
        if migrate:
            self.migrate()

    def _all(self, query: str, params: dict[str, Any], *, binary: bool = False) -> list[DictRow]:
        with self._conn() as conn:
            return conn.execute(query, params, binary=binary).fetchall()

    # -- migrations -------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self._tx() as conn:
            conn.execute(P["migration_lock"])
            conn.execute(P["create_migrations_table"])
            done = {r["version"] for r in conn.execute(P["applied_versions"])}
            if done and max(done) > LATEST_VERSION:
                raise MigrationError(
                    f"the database has schema version {max(done)}; this tickwork knows up "
                    f"to {LATEST_VERSION}: upgrade tickwork"
                )
            for version, path in MIGRATIONS:
                if version in done:
                    continue
                conn.execute(cast(Any, path.read_text()))
                conn.execute(P["record_migration"], {"version": version})
                applied.append(version)
        return applied

    def schema_version(self) -> tuple[int, int]:
        with self._conn() as conn:
            present = conn.execute(P["migrations_table_exists"]).fetchone()
            if present is None or not present["present"]:
                return 0, LATEST_VERSION
            versions = [r["version"] for r in conn.execute(P["applied_versions"])]
        return (max(versions) if versions else 0), LATEST_VERSION

    # -- bulk submit -------------------------------------------------------------------------------

    def submit(
        self, spec: JobSpec, *, now: datetime | None = None, conn: object | None = None
    ) -> Submitted:
        with self._submitting(conn) as tx:
            t = now_in(tx, now)
            submitted = self._insert_one(tx, spec, t)
            if submitted.created:
                notify(tx, CHANNEL_JOBS, *([CHANNEL_RUNS] if submitted.run else []))
        return submitted

    def submit_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None, conn: object | None = None
    ) -> list[Submitted]:
        # One statement for the whole batch (submit_jobs): jobs, and the runs of those due
        # now. The records returned are built here from the specs, not read back.
        if not specs:
            return []
        if conn is not None:  # in the caller's transaction: its pace is the caller's
            with borrowed(conn, json_loads) as tx:
                t = now_in(tx, now)
                batch = _Batch.of(self._bound_batch(tx, specs), t)
                _check_names(tx, batch.specs)
                rows = self._insert_batch(tx, batch.all_params())
                done = batch.submitted(tx, rows)
                if any(r.created for r in done):
                    notify(tx, CHANNEL_JOBS, *([CHANNEL_RUNS] if any(r.run for r in done) else []))
            return done
        # Hazard: every tickwork session lets the server end a transaction that waits on its
        # client for 2 s (pool.IDLE_IN_TRANSACTION_TIMEOUT: a vanished client must not hold
        # locks), and a batch of thousands of jobs is seconds of Python on a loaded host
        # (its schedules, its JSON, a garbage collection). So that work happens outside
        # the transaction: before it, at a time read from the store's clock first, and
        # after it (the records). The transaction is one pipeline, BEGIN to COMMIT under a
        # single Sync, so the server never waits on this process in between: it arms that
        # timeout only after a Sync, which is why BEGIN and COMMIT are sent as statements
        # (psycopg's transaction() syncs after BEGIN). The price: a process stopped while it
        # sends (SIGSTOP) keeps its new rows locked until it goes on or dies, which only a
        # concurrent submit of the same name or key waits on.
        with self._conn() as c:
            t = now if now is not None else now_in(c, None)
            calendars: dict[str, Any] = {}
            batch = _Batch.of(self._bound_batch(c, specs, calendars), t)
            _check_names(c, batch.specs)  # a name taken meanwhile: the unique index says so
            params = batch.all_params()
            cursors: list[Any] = []
            try:
                with c.pipeline() as p:
                    c.execute("BEGIN")
                    if calendars and _calendars_changed(c, p, calendars):
                        # Changed since it was read: bound again, now under the locks.
                        batch = _Batch.of(self._bound_batch(c, specs), t)
                        params = batch.all_params()
                    # First after a Sync (the calendars'): a small message, read at once,
                    # so that the server no longer counts this transaction idle.
                    notify(c, CHANNEL_JOBS, *([CHANNEL_RUNS] if any(batch.slots) else []))
                    for chunk in params:
                        cursor = c.cursor(row_factory=tuple_row)
                        cursors.append(cursor.execute(Q["submit_jobs"], chunk))
                    c.execute("COMMIT")
            except pg_errors.UniqueViolation:  # a name taken by a concurrent submit
                raise ValidationError(
                    "a job name in the batch was taken meanwhile; nothing was submitted",
                    field="name",
                ) from None
            # (A batch whose every key matched a job notified for nothing: a spare wake-up.)
            rows = [row for cursor in cursors for row in cursor.fetchall()]
            return batch.submitted(c, rows)

    @staticmethod
    def _insert_batch(tx: Conn, params: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        try:
            for chunk in params:
                rows += tx.cursor(row_factory=tuple_row).execute(Q["submit_jobs"], chunk).fetchall()
        except pg_errors.UniqueViolation:  # a name taken by a concurrent submit
            raise ValidationError(
                "a job name in the batch was taken meanwhile; nothing was submitted",
                field="name",
            ) from None
        return rows

    def _submitting(self, caller: object | None) -> AbstractContextManager[Conn]:
        """The transaction a submit writes in: a pooled connection's own, or a savepoint
        in the caller's (``conn=``, :mod:`.borrowed`)."""
        return self._tx() if caller is None else borrowed(caller, json_loads)

    def _insert_job(self, tx: Tx, spec: JobSpec, t: datetime) -> Submitted:
        return self._insert_one(cast(PgTx, tx).conn, spec, t)

    @staticmethod
    def _bound(conn: Conn, spec: JobSpec) -> JobSpec:
        return bind_calendar(
            spec, lambda name: conn.execute(Q["calendar_for_share"], {"name": name}).fetchone()
        )

    @staticmethod
    def _bound_batch(
        conn: Conn, specs: Sequence[JobSpec], read: dict[str, Any] | None = None
    ) -> Sequence[JobSpec]:
        """The batch with each cron schedule's calendar bound, each calendar read once (and
        kept in ``read``, by name, when given); an unknown calendar is the fault of its
        job's index."""
        rows: dict[str, Any] = {} if read is None else read

        def lookup(name: str) -> Any:
            if name not in rows:
                rows[name] = conn.execute(Q["calendar_for_share"], {"name": name}).fetchone()
            return rows[name]

        bound = list(specs)
        for i, spec in enumerate(specs):
            try:
                bound[i] = bind_calendar(spec, lookup)
            except ValidationError as exc:
                raise exc.at(i) from None
        return bound

    def _insert_one(self, conn: Conn, spec: JobSpec, t: datetime) -> Submitted:
        spec = self._bound(conn, spec)
        resolved = spec.schedule.resolve(t)
        first = resolved.first_slot(t)
        due_once = isinstance(resolved, schedules.Once) and first <= t
        params = mapping.job_params(spec, resolved, PG_CODEC)
        params.update(
            state=ScheduleState.COMPLETED if due_once else ScheduleState.ACTIVE,
            next_run_at=None if due_once else first,
            now=t,
        )
        try:
            with conn.transaction():
                row = conn.execute(Q["insert_job"], params).fetchone()
        except pg_errors.UniqueViolation:
            raise ValidationError(
                f"tenant {spec.tenant!r} already has a job named {spec.name!r}", field="name"
            ) from None
        if row is None:  # the idempotency key matched a committed job
            existing = conn.execute(
                Q["job_by_idempotency_key"], {"tenant": spec.tenant, "key": spec.idempotency_key}
            ).fetchone()
            assert existing is not None
            return Submitted(mapping.read_job(existing, PG_CODEC), created=False)
        if due_once:
            run_row = conn.execute(
                Q["insert_runs"], {"job_ids": [row["id"]], "slots": [first], "now": t}
            ).fetchone()
            assert run_row is not None
            job = mapping.job(row, PG_CODEC, RunState.QUEUED)  # it reads as its new run
            run = new_run(job, run_row["id"], run_row["scheduled_for"], run_row["created_at"])
            return Submitted(job, created=True, run=run)
        return Submitted(_job(row), created=True)

    # -- triggering -------------------------------------------------------------------------

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
        if limit < 1 or (queues is not None and not queues) or (tasks is not None and not tasks):
            return []
        # As complete_and_claim: one statement unless a limit exists (the statement's
        # flag row says so even when it claimed nothing), or the claimer's own tasks' runs
        # read apart while runs of a task it lacks wait.
        rows: list[DictRow] = []
        lean: list[ClaimedRun] = []
        if not self._limited and not self._others:
            params = _claim_params(worker, limit, lease, queues=queues, tasks=tasks, now=now)
            rows = self._all(for_claimer(Q["claim"], queues, tasks), params)
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
        query = for_claimer(Q[name], queues, tasks)
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
    ) -> Heartbeat:
        rows = self._beat([(run_id, fencing_token)], lease, now)
        status, expires = rows[run_id]
        if status is LeaseStatus.LOST:
            raise LeaseLost(run_id, fencing_token)
        return Heartbeat(status, expires)

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

    # -- notifications ----------------------------------------------------------------------

    def listener(self, channels: Sequence[str]) -> Listener:
        return PgListener(self._pool, channels)


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


def _job(r: DictRow) -> Job:
    return mapping.job(r, PG_CODEC)


def _run(r: DictRow) -> Run:
    return mapping.run(r, PG_CODEC)


def _calendars_changed(conn: Conn, pipeline: Any, read: dict[str, Any]) -> bool:
    """Whether a calendar of ``read`` (rows by name, read before the transaction) is not
    as it was, now that the transaction holds it (FOR SHARE: its update or delete waits
    for this submit, and this submit for them)."""
    cursors = {name: conn.execute(Q["calendar_for_share"], {"name": name}) for name in sorted(read)}
    pipeline.sync()
    for name, cursor in cursors.items():
        now, before = cursor.fetchone(), read[name]
        if (now is None) != (before is None):
            return True
        if now is not None and before is not None and now["definition"] != before["definition"]:
            return True
    return False


def _check_names(conn: Conn, specs: Sequence[JobSpec]) -> None:
    """ValidationError, naming the first job at fault, when a name repeats within the batch
    or is taken in its tenant (names are unique per tenant)."""
    first: dict[tuple[str, str], int] = {}
    for i, spec in enumerate(specs):
        if spec.name is None:
            continue
        key = (spec.tenant, spec.name)
        if key in first:
            raise ValidationError(
                f"job {first[key]} of the batch has the name {spec.name!r} too", field="name"
            ).at(i)
        first[key] = i
    if not first:
        return
    taken = conn.execute(
        Q["jobs_by_names"],
        {"tenants": [k[0] for k in first], "names": [k[1] for k in first]},
    ).fetchall()
    if taken:
        i = min(first[(r["tenant"], r["name"])] for r in taken)
        spec = specs[i]
        raise ValidationError(
            f"tenant {spec.tenant!r} already has a job named {spec.name!r}", field="name"
        ).at(i)


def _template(
    ix: int, spec: JobSpec, schedule: schedules.Schedule, first: datetime, slot: datetime | None
) -> dict[str, Any]:
    """The ``submit_jobs`` template ``ix``: the columns jobs like ``spec`` share."""
    retry = spec.retry
    shape: dict[str, Any] = {
        "ix": ix,
        "tenant": spec.tenant,
        "task": spec.task,
        "schedule": schedule.to_json(),
        "state": (ScheduleState.ACTIVE if slot is None else ScheduleState.COMPLETED).value,
        "queue": spec.queue,
        "priority": spec.priority,
        "max_attempts": retry.max_attempts,
        "backoff_base": retry.backoff_base,
        "backoff_cap": retry.backoff_cap,
        "misfire": spec.misfire.value,
        "misfire_grace": spec.misfire_grace.total_seconds(),
        "overlap": spec.overlap.value,
    }
    if slot is None:
        shape["next_run_at"] = first.isoformat()
    else:
        shape["slot"] = slot.isoformat()
    if spec.timeout is not None:
        shape["timeout"] = spec.timeout.total_seconds()
    return shape


@dataclass(frozen=True, slots=True)
class _Batch:
    """A bulk submit's specs and what the store derives from them at ``t``."""

    specs: Sequence[JobSpec]
    t: datetime
    resolved: list[schedules.Schedule]
    firsts: list[datetime]
    slots: list[datetime | None]  # the run's slot, for a one-off job due now

    @classmethod
    def of(cls, specs: Sequence[JobSpec], t: datetime) -> _Batch:
        resolved = [spec.schedule.resolve(t) for spec in specs]
        firsts = []
        for i, r in enumerate(resolved):
            try:
                firsts.append(r.first_slot(t))
            except ValidationError as exc:  # a rule that never fires: its job's fault
                raise exc.at(i) from None
        slots = [
            f if f <= t and isinstance(r, schedules.Once) else None
            for r, f in zip(resolved, firsts, strict=True)
        ]
        return cls(specs, t, resolved, firsts, slots)

    def all_params(self) -> list[dict[str, Any]]:
        """``submit_jobs``'s parameters for the whole batch, a statement each
        ``SUBMIT_STATEMENT_ROWS`` jobs."""
        return [
            self.params(start, SUBMIT_STATEMENT_ROWS)
            for start in range(0, len(self.specs), SUBMIT_STATEMENT_ROWS)
        ]

    def params(self, start: int, count: int) -> dict[str, Any]:
        """``submit_jobs``'s parameters for ``count`` specs from ``start``: what the jobs
        share (tenant, task, schedule, policies) as a few *templates*, and per job its
        template and what is its own (args, name, keys), each a JSON array of objects
        without the null members. A fan-out of one task is one template: the server reads
        at most five fields a job instead of nineteen, and this side builds one small object."""
        templates: dict[tuple[Any, ...], int] = {}
        shapes: list[dict[str, Any]] = []
        rows: list[dict[str, Any]] = []
        end = start + count
        for spec, schedule, first, slot in zip(
            self.specs[start:end],
            self.resolved[start:end],
            self.firsts[start:end],
            self.slots[start:end],
            strict=True,
        ):
            key = (spec.tenant, spec.task, schedule, first, slot is None, *run_policy(spec))
            ix = templates.get(key)
            if ix is None:
                ix = templates[key] = len(shapes)
                shapes.append(_template(ix, spec, schedule, first, slot))
            row: dict[str, Any] = {"tpl": ix}
            if spec.args:
                row["args"] = spec.args
            if spec.name is not None:
                row["name"] = spec.name
            if spec.idempotency_key is not None:
                row["idempotency_key"] = spec.idempotency_key
            if spec.trace_context is not None:
                row["trace_context"] = spec.trace_context
            rows.append(row)
        return {
            "templates": json.dumps(shapes, separators=(",", ":")),
            "jobs": json.dumps(rows, separators=(",", ":")),
            "now": self.t,
        }

    def submitted(self, conn: Conn, rows: list[tuple[Any, ...]]) -> list[Submitted]:
        """The records of the ``submit_jobs`` answer: a new job built from its spec; one
        whose idempotency key matched is the batch's earlier job with that key, else read."""
        out: list[Submitted | None] = []
        by_key: dict[tuple[str, str], Job] = {}
        missing: list[int] = []
        for i, (job_id, created, run_id) in enumerate(rows):
            spec, slot = self.specs[i], self.slots[i]
            key = spec.idempotency_key
            if not created:
                assert key is not None
                earlier = by_key.get((spec.tenant, key))
                out.append(Submitted(earlier, created=False) if earlier else None)
                if earlier is None:
                    missing.append(i)
                continue
            job = self.job(i, job_id)
            if key is not None:
                by_key[(spec.tenant, key)] = job
            run = new_run(job, run_id, slot, self.t) if slot is not None else None
            out.append(Submitted(job, created=True, run=run))
        if missing:
            keyed = [self.specs[i] for i in missing]
            found = conn.execute(
                Q["jobs_by_idempotency_keys"],
                {"tenants": [s.tenant for s in keyed], "keys": [s.idempotency_key for s in keyed]},
            ).fetchall()
            existing = {
                (r["tenant"], r["idempotency_key"]): mapping.read_job(r, PG_CODEC) for r in found
            }
            for i, spec in zip(missing, keyed, strict=True):
                out[i] = Submitted(existing[(spec.tenant, cast(str, spec.idempotency_key))], False)
        return [s for s in out if s is not None]

    def job(self, i: int, job_id: int) -> Job:
        """The row ``submit_jobs`` wrote for spec ``i``, as :func:`_job` would read it."""
        spec, slot, t = self.specs[i], self.slots[i], self.t
        return Job(
            id=job_id,
            tenant=spec.tenant,
            name=spec.name,
            task=spec.task,
            # As stored: JSON turns a tuple into a list, a number key into text.
            args=json.loads(json.dumps(spec.args)) if spec.args else {},
            schedule=self.resolved[i],
            # As :func:`~tickwork.store.rows.job` reads it: a job due now, as its new run.
            state=JobState.of(
                ScheduleState.ACTIVE if slot is None else ScheduleState.COMPLETED,
                isinstance(self.resolved[i], schedules.Once),
                None if slot is None else RunState.QUEUED,
            ),
            next_run_at=self.firsts[i] if slot is None else None,
            queue=spec.queue,
            priority=spec.priority,
            retry=spec.retry,
            timeout=spec.timeout,
            misfire=spec.misfire,
            misfire_grace=spec.misfire_grace,
            overlap=spec.overlap,
            idempotency_key=spec.idempotency_key,
            created_at=t,
            updated_at=t,
            trace_context=spec.trace_context,
        )
