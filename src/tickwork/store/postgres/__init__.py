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
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple, cast

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import DictRow, tuple_row
from psycopg.types.json import Jsonb, set_json_loads

from tickwork import schedule as schedules
from tickwork.errors import (
    ApiKeyNotFound,
    InvalidTransition,
    JobNotFound,
    LeadershipLost,
    LeaseLost,
    MigrationError,
    RunNotFound,
    StoreUnavailable,
    TickworkError,
    ValidationError,
)
from tickwork.job import (
    ClaimedRun,
    Job,
    JobSpec,
    JobState,
    MisfirePolicy,
    OverlapPolicy,
    Run,
    RunState,
    read_json,
)
from tickwork.retry import RetryPolicy
from tickwork.store.base import (
    CHANNEL_JOBS,
    CHANNEL_RUNS,
    DEFAULT_LEASE,
    DEFAULT_PAGE,
    DEFAULT_PRUNE_BATCH,
    DEFAULT_RESCUE_BATCH,
    DEFAULT_TRIGGER_BATCH,
    LISTEN_NOTIFY,
    MULTI_HOST,
    NODE_FORGET_AFTER,
    SESSION_FORGET_AFTER,
    SESSION_SEEN_EVERY,
    SKIP_LOCKED,
    ApiKey,
    Completion,
    Heartbeat,
    Lease,
    LeaseStatus,
    Listener,
    Node,
    Page,
    RescueResult,
    RunStats,
    Session,
    SlotFate,
    SlotSkip,
    Store,
    Submitted,
    TriggerResult,
    page_limit,
)
from tickwork.store.health import StoreHealth
from tickwork.store.planning import paused_slots, plan_batch, same_schedule, spec_matches
from tickwork.store.postgres.listener import PgListener
from tickwork.store.postgres.pool import POOL_MAX_SIZE, Conn, Pool, connect_kwargs
from tickwork.store.queries import load_queries, migration_files

HERE = Path(__file__).parent
Q = load_queries(HERE / "queries.sql")
MIGRATIONS = migration_files(HERE / "migrations")
LATEST_VERSION = MIGRATIONS[-1][0]
DEFAULT_APPLICATION_NAME = "tickwork"
"""How tickwork's sessions show in ``pg_stat_activity`` unless told who they are."""
OUTAGE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "25006"})
"""Errors that mean "this server cannot serve us now", beside the connection exceptions
(class 08): admin or crash shutdown, not accepting connections yet, read-only (a demoted
primary)."""


class PostgresStore(Store):
    capabilities = frozenset({LISTEN_NOTIFY, SKIP_LOCKED, MULTI_HOST})

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = False,
        pool_size: int = POOL_MAX_SIZE,
        application_name: str = DEFAULT_APPLICATION_NAME,
    ) -> None:
        self.url = url
        self.health = StoreHealth(_redact(url))
        self._pool = Pool(
            url,
            connect_kwargs(url, application_name),
            health=self.health,
            configure=_configure,
            max_size=pool_size,
        )
        with self._conn():  # fail now, not at the first call, if it cannot connect at all
            pass
        if migrate:
            self.migrate()

    # -- connections ------------------------------------------------------------------------

    @contextmanager
    def _conn(self) -> Iterator[Conn]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except (pg_errors.OperationalError, pg_errors.InterfaceError) as exc:
            if _is_outage(exc):
                self.health.failed(exc)
            raise StoreUnavailable(f"PostgreSQL: {exc}") from exc
        except pg_errors.ReadOnlySqlTransaction as exc:  # a demoted primary
            self.health.failed(exc)
            raise StoreUnavailable(f"PostgreSQL: {exc}") from exc
        except pg_errors.IdleInTransactionSessionTimeout as exc:  # this process stalled
            raise StoreUnavailable(f"PostgreSQL: {exc}") from exc
        except pg_errors.UndefinedTable as exc:
            raise MigrationError(
                f"the tickwork schema is missing ({exc.diag.message_primary}): "
                "run `tickwork db migrate`"
            ) from exc
        except StoreUnavailable:
            raise
        except TickworkError:
            self.health.answered()  # a refusal (fenced, not found ...) is an answer
            raise
        else:
            self.health.answered()

    @contextmanager
    def _tx(self) -> Iterator[Conn]:
        with self._conn() as conn, conn.transaction():
            yield conn

    def _one(self, query: str, params: dict[str, Any]) -> DictRow | None:
        with self._conn() as conn:
            return conn.execute(query, params).fetchone()

    def _all(self, query: str, params: dict[str, Any], *, binary: bool = False) -> list[DictRow]:
        with self._conn() as conn:
            return conn.execute(query, params, binary=binary).fetchall()

    def close(self) -> None:
        self._pool.close()

    def now(self) -> datetime:
        row = self._one(Q["now"], {"now": None})
        assert row is not None
        return cast(datetime, row["now"])

    # -- migrations -------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self._tx() as conn:
            conn.execute(Q["migration_lock"])
            conn.execute(Q["create_migrations_table"])
            done = {r["version"] for r in conn.execute(Q["applied_versions"])}
            if done and max(done) > LATEST_VERSION:
                raise MigrationError(
                    f"the database has schema version {max(done)}; this tickwork knows up "
                    f"to {LATEST_VERSION}: upgrade tickwork"
                )
            for version, path in MIGRATIONS:
                if version in done:
                    continue
                conn.execute(cast(Any, path.read_text()))
                conn.execute(Q["record_migration"], {"version": version})
                applied.append(version)
        return applied

    def schema_version(self) -> tuple[int, int]:
        with self._conn() as conn:
            present = conn.execute(Q["migrations_table_exists"]).fetchone()
            if present is None or not present["present"]:
                return 0, LATEST_VERSION
            versions = [r["version"] for r in conn.execute(Q["applied_versions"])]
        return (max(versions) if versions else 0), LATEST_VERSION

    # -- jobs -------------------------------------------------------------------------------

    def submit(self, spec: JobSpec, *, now: datetime | None = None) -> Submitted:
        with self._tx() as conn:
            t = _now(conn, now)
            submitted = self._insert_job(conn, spec, t)
            if submitted.created:
                _notify(conn, CHANNEL_JOBS, *([CHANNEL_RUNS] if submitted.run else []))
        return submitted

    def submit_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None
    ) -> list[Submitted]:
        results: list[Submitted | None] = [None] * len(specs)
        with self._tx() as conn:
            t = _now(conn, now)
            # Plain jobs (no key, no name) in one statement; the rest one by one, in order.
            plain = [
                i for i, spec in enumerate(specs) if not spec.idempotency_key and not spec.name
            ]
            for i, submitted in zip(
                plain, self._insert_plain(conn, [specs[i] for i in plain], t), strict=True
            ):
                results[i] = submitted
            for i, spec in enumerate(specs):
                if results[i] is None:
                    results[i] = self._insert_job(conn, spec, t)
            done = [r for r in results if r is not None]
            if any(r.created for r in done):
                _notify(conn, CHANNEL_JOBS, *([CHANNEL_RUNS] if any(r.run for r in done) else []))
        return done

    def _insert_plain(self, conn: Conn, specs: list[JobSpec], t: datetime) -> list[Submitted]:
        if not specs:
            return []
        resolved = [spec.schedule.resolve(t) for spec in specs]
        firsts = [r.first_slot(t) for r in resolved]
        due = [
            isinstance(r, schedules.Once) and f <= t for r, f in zip(resolved, firsts, strict=True)
        ]
        params = [_job_params(spec, r) for spec, r in zip(specs, resolved, strict=True)]
        columns = {
            "tenants": "tenant",
            "tasks": "task",
            "args": "args",
            "schedules": "schedule",
            "queues": "queue",
            "priorities": "priority",
            "max_attempts": "max_attempts",
            "backoff_bases": "backoff_base",
            "backoff_caps": "backoff_cap",
            "timeouts": "timeout",
            "misfires": "misfire",
            "graces": "misfire_grace",
            "overlaps": "overlap",
        }
        arrays: dict[str, Any] = {key: [p[col] for p in params] for key, col in columns.items()}
        arrays["states"] = [JobState.COMPLETED if d else JobState.ACTIVE for d in due]
        arrays["next_run_ats"] = [None if d else f for d, f in zip(due, firsts, strict=True)]
        arrays["now"] = t
        rows = sorted(conn.execute(Q["insert_jobs"], arrays).fetchall(), key=lambda r: r["id"])
        jobs = [_job(r) for r in rows]
        due_jobs = [(job, f) for job, d, f in zip(jobs, due, firsts, strict=True) if d]
        runs: dict[int, Run] = {}
        if due_jobs:
            run_rows = conn.execute(
                Q["insert_runs"],
                {
                    "job_ids": [j.id for j, _ in due_jobs],
                    "slots": [f for _, f in due_jobs],
                    "now": t,
                },
            ).fetchall()
            by_id = {j.id: j for j, _ in due_jobs}
            runs = {
                r["job_id"]: _new_run(
                    by_id[r["job_id"]], r["id"], r["scheduled_for"], r["created_at"]
                )
                for r in run_rows
            }
        return [Submitted(job, created=True, run=runs.get(job.id)) for job in jobs]

    def _insert_job(self, conn: Conn, spec: JobSpec, t: datetime) -> Submitted:
        resolved = spec.schedule.resolve(t)
        first = resolved.first_slot(t)
        due_once = isinstance(resolved, schedules.Once) and first <= t
        params = _job_params(spec, resolved)
        params.update(
            state=JobState.COMPLETED if due_once else JobState.ACTIVE,
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
            return Submitted(_job(existing), created=False)
        if due_once:
            run_row = conn.execute(
                Q["insert_runs"], {"job_ids": [row["id"]], "slots": [first], "now": t}
            ).fetchone()
            assert run_row is not None
            job = _job(row)
            run = _new_run(job, run_row["id"], run_row["scheduled_for"], run_row["created_at"])
            return Submitted(job, created=True, run=run)
        return Submitted(_job(row), created=True)

    def put_schedule(self, spec: JobSpec, *, now: datetime | None = None) -> Submitted:
        if spec.name is None:
            raise ValidationError("a schedule needs a name", field="name")
        with self._tx() as conn:
            t = _now(conn, now)
            row = conn.execute(
                Q["job_by_name_for_update"], {"tenant": spec.tenant, "name": spec.name}
            ).fetchone()
            if row is None:
                try:
                    submitted = self._insert_job(conn, spec, t)
                except ValidationError:
                    # Another node created the name since our select: take the update path
                    # on its row (the unique index decided the race; the lock orders us).
                    row = conn.execute(
                        Q["job_by_name_for_update"], {"tenant": spec.tenant, "name": spec.name}
                    ).fetchone()
                    if row is None:
                        raise
            if row is not None:
                current = _job(row)
                unchanged = same_schedule(current.schedule, spec.schedule)
                resolved = current.schedule if unchanged else spec.schedule.resolve(t)
                live = current.state in (JobState.ACTIVE, JobState.PAUSED)
                if live and spec_matches(current, spec, resolved):
                    return Submitted(current, created=False)
                params = _job_params(spec, resolved)
                params.update(
                    id=current.id,
                    now=t,
                    state=current.state if current.state is JobState.PAUSED else JobState.ACTIVE,
                    next_run_at=current.next_run_at
                    if unchanged and live
                    else resolved.first_slot(t),
                )
                updated = conn.execute(Q["update_job_spec"], params).fetchone()
                assert updated is not None
                submitted = Submitted(_job(updated), created=False)
            _notify(conn, CHANNEL_JOBS)
        return submitted

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        row = self._one(Q["get_job"], {"id": job_id, "tenant": tenant})
        if row is None:
            raise JobNotFound(job_id)
        return _job(row)

    def list_jobs(
        self,
        *,
        tenant: str | None = None,
        state: JobState | None = None,
        task: str | None = None,
        after: int | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[Job]:
        limit = page_limit(limit)
        rows = self._all(
            Q["list_jobs"],
            {"tenant": tenant, "state": state, "task": task, "after": after, "limit": limit},
        )
        jobs = [_job(r) for r in rows]
        return Page(jobs, jobs[-1].id if len(jobs) == limit else None)

    def _job_for_update(self, conn: Conn, job_id: int, tenant: str | None) -> Job:
        row = conn.execute(Q["get_job_for_update"], {"id": job_id, "tenant": tenant}).fetchone()
        if row is None:
            raise JobNotFound(job_id)
        return _job(row)

    def _set_state(
        self, conn: Conn, job_id: int, state: JobState, next_run_at: datetime | None, t: datetime
    ) -> Job:
        row = conn.execute(
            Q["set_job_state"], {"id": job_id, "state": state, "next_run_at": next_run_at, "now": t}
        ).fetchone()
        assert row is not None
        _notify(conn, CHANNEL_JOBS)
        return _job(row)

    def cancel_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        with self._tx() as conn:
            t = _now(conn, now)
            job = self._job_for_update(conn, job_id, tenant)
            if job.state is JobState.CANCELLED:
                return job
            conn.execute(
                Q["cancel_waiting_runs_of_job"],
                {"job_id": job_id, "now": t, "reason": "job cancelled"},
            )
            return self._set_state(conn, job_id, JobState.CANCELLED, None, t)

    def pause_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        with self._tx() as conn:
            t = _now(conn, now)
            job = self._job_for_update(conn, job_id, tenant)
            if job.state is JobState.PAUSED:
                return job
            if job.state is not JobState.ACTIVE:
                raise InvalidTransition("job", job_id, job.state, "pause")
            return self._set_state(conn, job_id, JobState.PAUSED, job.next_run_at, t)

    def resume_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        with self._tx() as conn:
            t = _now(conn, now)
            job = self._job_for_update(conn, job_id, tenant)
            if job.state is JobState.ACTIVE:
                return job
            if job.state is not JobState.PAUSED:
                raise InvalidTransition("job", job_id, job.state, "resume")
            next_run_at = job.next_run_at
            if not isinstance(job.schedule, schedules.Once):
                skip, next_run_at = paused_slots(job, t)
                if skip is not None:
                    conn.execute(
                        Q["insert_slot_skip"],
                        {
                            "job_id": job_id,
                            "first_slot": skip.first_slot,
                            "last_slot": skip.last_slot,
                            "count": skip.count,
                            "fate": skip.fate,
                            "more": skip.more,
                            "now": t,
                        },
                    )
            state = JobState.ACTIVE if next_run_at is not None else JobState.COMPLETED
            return self._set_state(conn, job_id, state, next_run_at, t)

    # -- triggering -------------------------------------------------------------------------

    def trigger(
        self, epoch: int, *, limit: int = DEFAULT_TRIGGER_BATCH, now: datetime | None = None
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
                Q["due_jobs"], {"now": now, "limit": limit}
            )
            p.sync()
            fence = head.fetchone()
            if fence is None or not fence["leads"]:
                raise LeadershipLost(fence["holder"] if fence else "", epoch)
            t: datetime = fence["now"]
            jobs = [_due_job(r) for r in due.fetchall()]
            watched = [j.id for j in jobs if j.overlap is not OverlapPolicy.ALLOW]
            unfinished: set[int] = set()
            if watched:
                cursor = conn.execute(Q["unfinished_jobs"], {"ids": watched})
                p.sync()
                unfinished = {r["job_id"] for r in cursor.fetchall()}
            plan = plan_batch(jobs, unfinished, t)
            cancelled: list[int] = []
            if plan.replace_job_ids:
                cursor = conn.execute(
                    Q["cancel_unfinished_runs_of_jobs"],
                    {"ids": plan.replace_job_ids, "now": t, "reason": "replaced by a newer slot"},
                )
                p.sync()
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
                _notify(conn, CHANNEL_RUNS)
            if plan.advances:
                conn.execute(Q["advance_jobs"], advance)
            next_due_cursor = conn.execute(Q["next_due_at_with_clock"], {"now": now})
            p.sync()
            runs: list[Run] = []
            if inserted is not None:
                by_id = {j.id: j for j in jobs}
                runs = [
                    _new_run(by_id[job_id], run_id, slot, created_at)
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

    def next_due_at(self) -> datetime | None:
        row = self._one(Q["next_due_at"], {})
        return cast(datetime | None, row["at"]) if row else None

    # -- runs -------------------------------------------------------------------------------

    def claim(
        self,
        worker: str,
        *,
        limit: int,
        lease: timedelta = DEFAULT_LEASE,
        queues: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> list[Run]:
        if limit < 1 or (queues is not None and not queues):
            return []
        params = {
            "worker": worker,
            "now": now,
            "limit": limit,
            "lease": lease,
            "queues": _list(queues),
        }
        return _claimed(self._all(for_queues(Q["claim"], queues), params))

    def complete_and_claim(
        self,
        completions: Sequence[Completion],
        worker: str,
        *,
        limit: int,
        lease: timedelta = DEFAULT_LEASE,
        queues: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> tuple[list[int], list[ClaimedRun]]:
        if queues is not None and not queues:
            limit = 0
        if not completions and limit < 1:
            return [], []
        params = {
            **_completion_params(completions),
            "worker": worker,
            "now": now,
            "limit": max(limit, 0),
            "lease": lease,
            "queues": _list(queues),
        }
        query = for_queues(Q["complete_then_claim"], queues)
        with self._conn() as conn:
            cur = conn.cursor(row_factory=tuple_row)
            # Prepared from the first call, not the fifth: planning it costs more than
            # running it, and a worker makes this call hundreds of times a second.
            rows = cur.execute(query, params, binary=True, prepare=True).fetchall()
        rejected: list[int] = []
        if rows[0][0] < len(completions):
            rejected = self._rejected(completions)
        make = ClaimedRun._make
        return rejected, [make(r[1:]) for r in rows if r[1] is not None]

    def _rejected(self, completions: Sequence[Completion]) -> list[int]:
        """Which of ``completions`` were not applied: their run is not succeeded under the
        completion's fencing token (a re-claim would have moved the token on)."""
        rows = self._all(Q["completed_with_tokens"], _completion_params(completions))
        applied = {r["id"] for r in rows}
        return [c.run_id for c in completions if c.run_id not in applied]

    def next_claimable_at(self, *, queues: Sequence[str] | None = None) -> datetime | None:
        if queues is not None and not queues:
            return None
        row = self._one(for_queues(Q["next_claimable_at"], queues), {"queues": _list(queues)})
        return cast(datetime | None, row["at"]) if row else None

    def heartbeat(
        self,
        run_id: int,
        fencing_token: int,
        *,
        lease: timedelta = DEFAULT_LEASE,
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
        lease: timedelta = DEFAULT_LEASE,
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
        # Only the ids come back: decoding whole rows was a third of a worker's CPU.
        done = {r["id"] for r in self._complete(completions, now, query="complete_ids")}
        return [c.run_id for c in completions if c.run_id not in done]

    def _complete(
        self, completions: Sequence[Completion], now: datetime | None, query: str = "complete"
    ) -> list[DictRow]:
        return self._all(Q[query], {**_completion_params(completions), "now": now})

    def fail(
        self,
        run_id: int,
        fencing_token: int,
        error: str,
        *,
        retry_after: timedelta | None = None,
        discard: bool = False,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Run:
        params: dict[str, Any] = {
            "id": run_id,
            "token": fencing_token,
            "error": error,
            "result": Jsonb(result) if result is not None else None,
        }
        with self._tx() as conn:
            params["now"] = _now(conn, now)
            held = conn.execute(Q["held_run_for_fail"], params).fetchone()
            if held is None:
                raise LeaseLost(run_id, fencing_token)
            policy = RetryPolicy(held["max_attempts"], held["backoff_base"], held["backoff_cap"])
            if discard or policy.exhausted(held["attempt"]):
                row = conn.execute(Q["fail_dead"], params).fetchone()
            else:
                params["wait"] = (
                    retry_after if retry_after is not None else policy.backoff(held["attempt"])
                )
                row = conn.execute(Q["fail_retry"], params).fetchone()
            assert row is not None
        return _run(row)

    def release(self, run_id: int, fencing_token: int, *, now: datetime | None = None) -> Run:
        with self._tx() as conn:
            row = conn.execute(
                Q["release"], {"id": run_id, "token": fencing_token, "now": now}
            ).fetchone()
            if row is None:
                raise LeaseLost(run_id, fencing_token)
            _notify(conn, CHANNEL_RUNS)
        return _run(row)

    def rescue(
        self, *, limit: int = DEFAULT_RESCUE_BATCH, now: datetime | None = None
    ) -> RescueResult:
        with self._tx() as conn:
            rows = conn.execute(Q["rescue"], {"now": now, "limit": limit}).fetchall()
            requeued = sorted(r["id"] for r in rows if r["state"] == RunState.QUEUED)
            if requeued:
                _notify(conn, CHANNEL_RUNS)
        return RescueResult(
            requeued=requeued, dead=sorted(r["id"] for r in rows if r["state"] == RunState.DEAD)
        )

    def get_run(self, run_id: int, *, tenant: str | None = None) -> Run:
        row = self._one(Q["get_run"], {"id": run_id, "tenant": tenant})
        if row is None:
            raise RunNotFound(run_id)
        return _run(row)

    def list_runs(
        self,
        *,
        tenant: str | None = None,
        job_id: int | None = None,
        state: RunState | None = None,
        after: int | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[Run]:
        limit = page_limit(limit)
        rows = self._all(
            Q["list_runs"],
            {"tenant": tenant, "job_id": job_id, "state": state, "after": after, "limit": limit},
        )
        runs = [_run(r) for r in rows]
        return Page(runs, runs[-1].id if len(runs) == limit else None)

    def cancel_run(
        self, run_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Run:
        return self._run_command(run_id, tenant, now, "cancel_run", "cancel")

    def retry_run(
        self, run_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Run:
        return self._run_command(run_id, tenant, now, "retry_run", "retry", CHANNEL_RUNS)

    def _run_command(
        self,
        run_id: int,
        tenant: str | None,
        now: datetime | None,
        query: str,
        action: str,
        *channels: str,
    ) -> Run:
        with self._tx() as conn:
            t = _now(conn, now)
            current = conn.execute(
                Q["get_run_for_update"], {"id": run_id, "tenant": tenant}
            ).fetchone()
            if current is None:
                raise RunNotFound(run_id)
            row = conn.execute(Q[query], {"id": run_id, "now": t}).fetchone()
            if row is None:
                raise InvalidTransition("run", run_id, current["state"], action)
            _notify(conn, *channels)
        return _run(row)

    def prune(
        self, retention: timedelta, *, limit: int = DEFAULT_PRUNE_BATCH, now: datetime | None = None
    ) -> int:
        with self._tx() as conn:
            cutoff = _now(conn, now) - retention
            deleted = conn.execute(Q["prune_runs"], {"cutoff": cutoff, "limit": limit}).rowcount
            conn.execute(Q["prune_slot_skips"], {"cutoff": cutoff})
        return deleted

    def slot_skips(
        self, job_id: int, *, tenant: str | None = None, limit: int = DEFAULT_PAGE
    ) -> list[SlotSkip]:
        rows = self._all(
            Q["slot_skips"], {"job_id": job_id, "tenant": tenant, "limit": page_limit(limit)}
        )
        if not rows:
            self.get_job(job_id, tenant=tenant)  # JobNotFound for unknown or foreign ids
        return [
            SlotSkip(
                r["job_id"],
                r["first_slot"],
                r["last_slot"],
                r["count"],
                SlotFate(r["fate"]),
                r["run_id"],
                r["more"],
                r["recorded_at"],
            )
            for r in rows
        ]

    def run_now(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Run:
        with self._tx() as conn:
            t = _now(conn, now)
            job = self._job_for_update(conn, job_id, tenant)
            if job.state is JobState.CANCELLED:
                raise InvalidTransition("job", job_id, job.state, "trigger")
            row = conn.execute(Q["run_now"], {"job_id": job_id, "now": t}).fetchone()
            if row is None:
                row = conn.execute(Q["run_at_slot"], {"job_id": job_id, "slot": t}).fetchone()
            assert row is not None
            _notify(conn, CHANNEL_RUNS)
        return _run(row)

    def runs_for_slot(
        self, job_id: int, slot: datetime, *, tenant: str | None = None
    ) -> tuple[Job, list[Run], list[SlotSkip]]:
        job = self.get_job(job_id, tenant=tenant)
        params = {"job_id": job_id, "slot": slot}
        runs = [_run(r) for r in self._all(Q["run_at_slot"], params)]
        skips = [_skip(r) for r in self._all(Q["skips_covering"], params)]
        return job, runs, skips

    def run_stats(
        self, *, tenant: str | None = None, lag_sample: int = 1000, now: datetime | None = None
    ) -> RunStats:
        with self._tx() as conn:
            t = _now(conn, now)
            counts = {state.value: 0 for state in RunState}
            for r in conn.execute(Q["run_counts"], {"tenant": tenant}):
                counts[r["state"]] = r["n"]
            backlog = conn.execute(Q["due_backlog"], {"tenant": tenant, "now": t}).fetchone()
            assert backlog is not None
            lags = conn.execute(Q["recent_lag"], {"tenant": tenant, "limit": lag_sample})
            lag_ms = [float(r["lag_ms"]) for r in lags]
        return RunStats(counts, backlog["n"], backlog["oldest"], lag_ms, t)

    # -- nodes and keys ---------------------------------------------------------------------

    def register_node(
        self,
        node_id: str,
        kind: str,
        host: str,
        pid: int,
        info: dict[str, Any] | None = None,
        *,
        now: datetime | None = None,
    ) -> None:
        with self._conn() as conn:
            conn.execute(
                Q["register_node"],
                {
                    "id": node_id,
                    "kind": kind,
                    "host": host,
                    "pid": pid,
                    "now": _now(conn, now),
                    "info": Jsonb(info or {}),
                },
            )

    def node_heartbeat(
        self,
        node_id: str,
        *,
        running: int = 0,
        info: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> None:
        with self._conn() as conn:
            conn.execute(
                Q["node_heartbeat"],
                {
                    "id": node_id,
                    "now": _now(conn, now),
                    "running": running,
                    "info": Jsonb(info) if info is not None else None,
                },
            )

    def deregister_node(self, node_id: str) -> None:
        with self._conn() as conn:
            conn.execute(Q["deregister_node"], {"id": node_id})

    def list_nodes(
        self, *, seen_within: timedelta | None = None, now: datetime | None = None
    ) -> list[Node]:
        with self._tx() as conn:
            t = _now(conn, now)
            conn.execute(Q["forget_nodes"], {"cutoff": t - NODE_FORGET_AFTER})
            since = t - seen_within if seen_within is not None else None
            rows = conn.execute(Q["list_nodes"], {"since": since}).fetchall()
        return [
            Node(
                r["id"],
                r["kind"],
                r["host"],
                r["pid"],
                r["started_at"],
                r["last_seen_at"],
                r["running"],
                r["info"],
            )
            for r in rows
        ]

    def create_api_key(
        self,
        *,
        key_hash: str,
        prefix: str,
        tenant: str,
        admin: bool,
        label: str | None = None,
        now: datetime | None = None,
    ) -> ApiKey:
        with self._tx() as conn:
            row = conn.execute(
                Q["create_api_key"],
                {
                    "key_hash": key_hash,
                    "prefix": prefix,
                    "tenant": tenant,
                    "admin": admin,
                    "label": label,
                    "now": _now(conn, now),
                },
            ).fetchone()
        assert row is not None
        return _api_key(row)

    def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        row = self._one(Q["api_key_by_hash"], {"key_hash": key_hash})
        return _api_key(row) if row is not None else None

    def list_api_keys(self) -> list[ApiKey]:
        return [_api_key(r) for r in self._all(Q["list_api_keys"], {})]

    def revoke_api_key(self, key: str, *, now: datetime | None = None) -> ApiKey:
        with self._tx() as conn:
            t = _now(conn, now)
            row = conn.execute(Q["revoke_api_key"], {"key": key, "now": t}).fetchone()
            if row is not None:
                conn.execute(Q["revoke_key_sessions"], {"key_id": row["id"], "now": t})
        if row is None:
            raise ApiKeyNotFound(key)
        return _api_key(row)

    # -- sessions ---------------------------------------------------------------------------

    def sign_in(
        self,
        *,
        key_id: int,
        token_hash: str,
        idle_timeout: timedelta,
        lifetime: timedelta,
        now: datetime | None = None,
    ) -> Session:
        with self._tx() as conn:
            t = _now(conn, now)
            conn.execute(Q["forget_sessions"], {"cutoff": t - SESSION_FORGET_AFTER})
            row = conn.execute(
                Q["sign_in"],
                {
                    "token_hash": token_hash,
                    "key_id": key_id,
                    "now": t,
                    "idle_timeout": idle_timeout,
                    "lifetime": lifetime,
                },
            ).fetchone()
        if row is None:
            raise ApiKeyNotFound(str(key_id))
        return _session(row)

    def session_by_hash(
        self, token_hash: str, *, now: datetime | None = None
    ) -> tuple[Session, ApiKey] | None:
        row = self._one(Q["session_by_hash"], {"token_hash": token_hash, "now": now})
        if row is None:
            return None
        session = _session(row)
        if row["last_seen_at"] < row["now"] - SESSION_SEEN_EVERY:
            with self._conn() as conn:
                conn.execute(Q["see_session"], {"id": session.id, "now": row["now"]})
        key = ApiKey(
            session.key_id,
            row["prefix"],
            row["tenant"],
            row["admin"],
            row["label"],
            row["key_created_at"],
            row["key_revoked_at"],
        )
        return session, key

    def sign_out(self, token_hash: str, *, now: datetime | None = None) -> bool:
        return self._one(Q["sign_out"], {"token_hash": token_hash, "now": now}) is not None

    # -- leadership -------------------------------------------------------------------------

    def acquire_leadership(
        self, node_id: str, ttl: timedelta, *, now: datetime | None = None
    ) -> Lease | None:
        try:
            with self._tx() as conn:
                conn.execute(Q["leadership_lock_timeout"])
                row = conn.execute(
                    Q["acquire_leadership"], {"node": node_id, "ttl": ttl, "now": now}
                ).fetchone()
        except StoreUnavailable as exc:
            if isinstance(exc.__cause__, pg_errors.LockNotAvailable):
                return None  # another node's renew or trigger holds the row: not free now
            raise
        return _lease(row) if row is not None else None

    def renew_leadership(
        self, node_id: str, epoch: int, ttl: timedelta, *, now: datetime | None = None
    ) -> Lease:
        row = self._one(
            Q["renew_leadership"], {"node": node_id, "epoch": epoch, "ttl": ttl, "now": now}
        )
        if row is None:
            raise LeadershipLost(node_id, epoch)
        return _lease(row)

    def resign_leadership(self, node_id: str, epoch: int) -> None:
        with self._conn() as conn:
            conn.execute(Q["resign_leadership"], {"node": node_id, "epoch": epoch})

    def leader(self, *, now: datetime | None = None) -> Lease | None:
        row = self._one(Q["leader"], {"now": now})
        return _lease(row) if row is not None else None

    # -- notifications ----------------------------------------------------------------------

    def listener(self, channels: Sequence[str]) -> Listener:
        return PgListener(self._pool, channels)


# -- row mapping ----------------------------------------------------------------------------


def _configure(conn: Conn) -> None:
    set_json_loads(_json_loads, conn)


def _is_outage(exc: psycopg.Error) -> bool:
    """Whether ``exc`` means the database does not answer (not: it refused this statement,
    as a lock or statement timeout does)."""
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in OUTAGE_SQLSTATES


def _redact(url: str) -> str:
    """``url`` without a password, for log lines."""
    head, at, tail = url.rpartition("@")
    if not at or ":" not in head.partition("://")[2]:
        return url
    scheme, _, user = head.partition("://")
    return f"{scheme}://{user.partition(':')[0]}:***@{tail}"


def _json_loads(data: bytes | str) -> Any:
    """:func:`~tickwork.job.read_json`, but the empty object (the args of most runs)
    without parsing it."""
    return {} if data == b"{}" else read_json(data)


def for_queues(query: str, queues: Sequence[str] | None) -> str:
    """``query`` for a worker that takes ``queues``; None (every queue): without its lines
    that end ``-- only-queues``, so the planner sees no queue filter at all."""
    if queues is not None:
        return query
    return "\n".join(line for line in query.splitlines() if not line.endswith("-- only-queues"))


def _list(queues: Sequence[str] | None) -> list[str] | None:
    return list(queues) if queues is not None else None


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


def _now(conn: Conn, now: datetime | None) -> datetime:
    row = conn.execute(Q["now"], {"now": now}).fetchone()
    assert row is not None
    return cast(datetime, row["now"])


def _notify(conn: Conn, *channels: str) -> None:
    for channel in channels:
        conn.execute(Q["notify"], {"channel": channel})


@lru_cache(maxsize=4096)
def _schedule_cached(items: tuple[tuple[str, Any], ...]) -> schedules.Schedule:
    return schedules.from_json(dict(items))


def _schedule(data: dict[str, Any]) -> schedules.Schedule:
    return _schedule_cached(tuple(sorted(data.items())))


def _job_params(spec: JobSpec, resolved: schedules.Schedule) -> dict[str, Any]:
    return {
        "tenant": spec.tenant,
        "name": spec.name,
        "task": spec.task,
        "args": Jsonb(spec.args),
        "schedule": Jsonb(resolved.to_json()),
        "queue": spec.queue,
        "priority": spec.priority,
        "max_attempts": spec.retry.max_attempts,
        "backoff_base": spec.retry.backoff_base,
        "backoff_cap": spec.retry.backoff_cap,
        "timeout": spec.timeout.total_seconds() if spec.timeout else None,
        "misfire": spec.misfire.value,
        "misfire_grace": spec.misfire_grace.total_seconds(),
        "overlap": spec.overlap.value,
        "idempotency_key": spec.idempotency_key,
    }


def _job(r: DictRow) -> Job:
    return Job(
        id=r["id"],
        tenant=r["tenant"],
        name=r["name"],
        task=r["task"],
        args=r["args"],
        schedule=_schedule(r["schedule"]),
        state=JobState(r["state"]),
        next_run_at=r["next_run_at"],
        queue=r["queue"],
        priority=r["priority"],
        retry=RetryPolicy(r["max_attempts"], r["backoff_base"], r["backoff_cap"]),
        timeout=timedelta(seconds=r["timeout"]) if r["timeout"] is not None else None,
        misfire=MisfirePolicy(r["misfire"]),
        misfire_grace=timedelta(seconds=r["misfire_grace"]),
        overlap=OverlapPolicy(r["overlap"]),
        idempotency_key=r["idempotency_key"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


def _run(r: DictRow) -> Run:
    return Run(
        id=r["id"],
        job_id=r["job_id"],
        tenant=r["tenant"],
        task=r["task"],
        args=r["args"],
        queue=r["queue"],
        priority=r["priority"],
        scheduled_for=r["scheduled_for"],
        run_at=r["run_at"],
        state=RunState(r["state"]),
        attempt=r["attempt"],
        max_attempts=r["max_attempts"],
        fencing_token=r["fencing_token"],
        worker=r["worker"],
        lease_expires_at=r["lease_expires_at"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        error=r["error"],
        result=r["result"],
        timeout=timedelta(seconds=r["timeout"]) if r["timeout"] is not None else None,
        created_at=r["created_at"],
    )


def _skip(r: DictRow) -> SlotSkip:
    return SlotSkip(
        r["job_id"],
        r["first_slot"],
        r["last_slot"],
        r["count"],
        SlotFate(r["fate"]),
        r["run_id"],
        r["more"],
        r["recorded_at"],
    )


def _session(r: DictRow) -> Session:
    return Session(
        r["id"],
        r["key_id"],
        r["created_at"],
        r["last_seen_at"],
        r["idle_timeout"],
        r["expires_at"],
        r["revoked_at"],
    )


def _api_key(r: DictRow) -> ApiKey:
    return ApiKey(
        r["id"], r["prefix"], r["tenant"], r["admin"], r["label"], r["created_at"], r["revoked_at"]
    )


class _DueJob(NamedTuple):
    """A due job as the trigger reads it: what planning needs and what a new run copies."""

    id: int
    next_run_at: datetime
    misfire: MisfirePolicy
    misfire_grace: timedelta
    overlap: OverlapPolicy
    schedule: schedules.Schedule
    tenant: str
    task: str
    args: dict[str, Any]
    queue: str
    priority: int
    max_attempts: int
    timeout: timedelta | None


_MISFIRE = {p.value: p for p in MisfirePolicy}
_OVERLAP = {p.value: p for p in OverlapPolicy}
"""Policy by stored text: per due job, a dict lookup is ~10x cheaper than the enum call."""


@lru_cache(maxsize=256)
def _seconds(value: float) -> timedelta:
    """A stored duration (grace, timeout): a few distinct values over thousands of jobs."""
    return timedelta(seconds=value)


def _due_job(r: tuple[Any, ...]) -> _DueJob:
    """A ``due_jobs`` row; see the query for the columns."""
    (id_, next_run_at, misfire, grace, overlap, schedule, every, anchor) = r[:8]
    tenant, task, args, queue, priority, max_attempts, timeout = r[8:]
    return _DueJob(
        id_,
        next_run_at,
        _MISFIRE.get(misfire) or MisfirePolicy(misfire),  # the call: ValueError if unknown
        _seconds(grace),
        _OVERLAP.get(overlap) or OverlapPolicy(overlap),
        _schedule(schedule)
        if schedule is not None
        else schedules.interval_from_json(every, anchor),
        tenant,
        task,
        args,
        queue,
        priority,
        max_attempts,
        _seconds(timeout) if timeout is not None else None,
    )


def _new_run(job: Job | _DueJob, run_id: int, slot: datetime, created_at: datetime) -> Run:
    """A run just inserted for ``job`` (by submit or trigger): the job supplies what the
    insert copied from it."""
    return Run(
        id=run_id,
        job_id=job.id,
        tenant=job.tenant,
        task=job.task,
        args=job.args,
        queue=job.queue,
        priority=job.priority,
        scheduled_for=slot,
        run_at=slot,
        state=RunState.QUEUED,
        attempt=1,
        max_attempts=job.max_attempts if isinstance(job, _DueJob) else job.retry.max_attempts,
        fencing_token=0,
        worker=None,
        lease_expires_at=None,
        started_at=None,
        finished_at=None,
        error=None,
        result=None,
        timeout=job.timeout,
        created_at=created_at,
    )


def _lease(r: DictRow) -> Lease:
    return Lease(r["holder"], r["epoch"], r["expires_at"])
