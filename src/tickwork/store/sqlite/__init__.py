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
submit or trigger wakes that process's listeners at once.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from tickwork import schedule as schedules
from tickwork.clock import SYSTEM_CLOCK, from_micros, to_micros
from tickwork.errors import (
    ApiKeyNotFound,
    InvalidTransition,
    JobNotFound,
    LeadershipLost,
    LeaseLost,
    MigrationError,
    RunNotFound,
    StoreUnavailable,
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
    NODE_FORGET_AFTER,
    SESSION_FORGET_AFTER,
    SESSION_SEEN_EVERY,
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
from tickwork.store.queries import load_queries, migration_files

HERE = Path(__file__).parent
Q = load_queries(HERE / "queries.sql")
MIGRATIONS = migration_files(HERE / "migrations")
LATEST_VERSION = MIGRATIONS[-1][0]
BUSY_TIMEOUT_MS = 30_000
"""A writer waits this long for the write lock before StoreUnavailable."""


def path_from_url(url: str) -> Path:
    """``sqlite:///rel.db`` -> ``rel.db``; ``sqlite:////abs.db`` -> ``/abs.db``."""
    rest = url.removeprefix("sqlite://")
    if not rest.startswith("/") or rest == "/":
        raise ValidationError(f"bad SQLite URL {url!r} (write sqlite:///PATH)", field="db")
    return Path(rest[1:])


class SqliteStore(Store):
    capabilities = frozenset()

    def __init__(self, url: str, *, migrate: bool | None = None) -> None:
        self.url = url
        self.path = path_from_url(url)
        # A file on this host has no outages to tell: a busy write lock is contention, and
        # the callers' own retries cover it.
        self.health = StoreHealth(url)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._signals = _signals_for(self.path)
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        if migrate or (migrate is None and fresh):
            self.migrate()

    # -- connections ------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreUnavailable(f"store {self.url} is closed")
            try:
                if self.path.parent != Path():
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(
                    self.path,
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=BUSY_TIMEOUT_MS / 1000,
                )
            except (sqlite3.Error, OSError) as exc:
                raise StoreUnavailable(f"cannot open {self.path}: {exc}") from exc
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _enable_wal(conn, self.path)
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding the database's write lock from its start."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"{self.path}: {exc}") from exc
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                raise StoreUnavailable(f"{self.path}: commit failed: {exc}") from exc

    def _read(self, query: str, params: dict[str, Any]) -> list[sqlite3.Row]:
        try:
            return self._conn().execute(query, params).fetchall()
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"{self.path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            with suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()

    def now(self) -> datetime:
        return SYSTEM_CLOCK.now()

    def _now(self, now: datetime | None) -> int:
        return to_micros(now if now is not None else SYSTEM_CLOCK.now())

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
                for statement in _statements(path.read_text()):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {version}")
                applied.append(version)
        return applied

    def schema_version(self) -> tuple[int, int]:
        current = self._read("PRAGMA user_version", {})[0][0]
        return int(current), LATEST_VERSION

    # -- jobs -------------------------------------------------------------------------------

    def submit(self, spec: JobSpec, *, now: datetime | None = None) -> Submitted:
        return self.submit_many([spec], now=now)[0]

    def submit_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None
    ) -> list[Submitted]:
        t = self._now(now)
        with self._write() as conn:
            submitted = [self._submit_one(conn, spec, t) for spec in specs]
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
                return Submitted(_job(row), created=False)
        if spec.name is not None:
            taken = conn.execute(
                Q["job_by_name"], {"tenant": spec.tenant, "name": spec.name}
            ).fetchone()
            if taken is not None:
                raise ValidationError(
                    f"tenant {spec.tenant!r} already has a job named {spec.name!r} "
                    f"(job {taken['id']})",
                    field="name",
                )
        return self._insert_job(conn, spec, t)

    def _insert_job(self, conn: sqlite3.Connection, spec: JobSpec, t: int) -> Submitted:
        now_dt = from_micros(t)
        resolved = spec.schedule.resolve(now_dt)
        first = resolved.first_slot(now_dt)
        due_once = isinstance(resolved, schedules.Once) and first <= now_dt
        params = _job_params(spec, resolved)
        params.update(
            state=JobState.COMPLETED if due_once else JobState.ACTIVE,
            next_run_at=None if due_once else to_micros(first),
            now=t,
        )
        job_row = conn.execute(Q["insert_job"], params).fetchone()
        run = None
        if due_once:
            run_row = conn.execute(
                Q["insert_run"],
                {"job_id": job_row["id"], "scheduled_for": to_micros(first), "now": t},
            ).fetchone()
            run = _run(run_row)
        return Submitted(_job(job_row), created=True, run=run)

    def put_schedule(self, spec: JobSpec, *, now: datetime | None = None) -> Submitted:
        if spec.name is None:
            raise ValidationError("a schedule needs a name", field="name")
        t = self._now(now)
        with self._write() as conn:
            row = conn.execute(
                Q["job_by_name"], {"tenant": spec.tenant, "name": spec.name}
            ).fetchone()
            if row is None:
                submitted = self._insert_job(conn, spec, t)
            else:
                current = _job(row)
                now_dt = from_micros(t)
                unchanged = same_schedule(current.schedule, spec.schedule)
                resolved = current.schedule if unchanged else spec.schedule.resolve(now_dt)
                if spec_matches(current, spec, resolved) and current.state in (
                    JobState.ACTIVE,
                    JobState.PAUSED,
                ):
                    return Submitted(current, created=False)
                state = current.state if current.state is JobState.PAUSED else JobState.ACTIVE
                next_run_at = (
                    current.next_run_at
                    if unchanged and current.state in (JobState.ACTIVE, JobState.PAUSED)
                    else resolved.first_slot(now_dt)
                )
                params = _job_params(spec, resolved)
                params.update(
                    id=current.id,
                    state=state,
                    now=t,
                    next_run_at=to_micros(next_run_at) if next_run_at else None,
                )
                submitted = Submitted(
                    _job(conn.execute(Q["update_job_spec"], params).fetchone()), created=False
                )
        self._signals.notify(CHANNEL_JOBS)
        return submitted

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        rows = self._read(Q["get_job"], {"id": job_id, "tenant": tenant})
        if not rows:
            raise JobNotFound(job_id)
        return _job(rows[0])

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
        rows = self._read(
            Q["list_jobs"],
            {"tenant": tenant, "state": state, "task": task, "after": after, "limit": limit},
        )
        jobs = [_job(r) for r in rows]
        return Page(jobs, jobs[-1].id if len(jobs) == limit else None)

    def cancel_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        t = self._now(now)
        with self._write() as conn:
            job = self._job_for_update(conn, job_id, tenant)
            if job.state is JobState.CANCELLED:
                return job
            row = conn.execute(
                Q["set_job_state"],
                {"id": job_id, "state": JobState.CANCELLED, "next_run_at": None, "now": t},
            ).fetchone()
            conn.execute(
                Q["cancel_waiting_runs_of_job"],
                {"job_id": job_id, "now": t, "reason": "job cancelled"},
            )
        self._signals.notify(CHANNEL_JOBS)
        return _job(row)

    def pause_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        t = self._now(now)
        with self._write() as conn:
            job = self._job_for_update(conn, job_id, tenant)
            if job.state is JobState.PAUSED:
                return job
            if job.state is not JobState.ACTIVE:
                raise InvalidTransition("job", job_id, job.state, "pause")
            row = conn.execute(
                Q["set_job_state"],
                {
                    "id": job_id,
                    "state": JobState.PAUSED,
                    "now": t,
                    "next_run_at": _us(job.next_run_at),
                },
            ).fetchone()
        self._signals.notify(CHANNEL_JOBS)
        return _job(row)

    def resume_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        t = self._now(now)
        with self._write() as conn:
            job = self._job_for_update(conn, job_id, tenant)
            if job.state is JobState.ACTIVE:
                return job
            if job.state is not JobState.PAUSED:
                raise InvalidTransition("job", job_id, job.state, "resume")
            next_run_at = job.next_run_at
            if not isinstance(job.schedule, schedules.Once):
                skip, next_run_at = paused_slots(job, from_micros(t))
                if skip is not None:
                    conn.execute(
                        Q["insert_slot_skip"],
                        {
                            "job_id": job_id,
                            "first_slot": to_micros(skip.first_slot),
                            "last_slot": to_micros(skip.last_slot),
                            "count": skip.count,
                            "fate": skip.fate,
                            "run_id": None,
                            "more": skip.more,
                            "now": t,
                        },
                    )
            state = JobState.ACTIVE if next_run_at is not None else JobState.COMPLETED
            row = conn.execute(
                Q["set_job_state"],
                {"id": job_id, "state": state, "now": t, "next_run_at": _us(next_run_at)},
            ).fetchone()
        self._signals.notify(CHANNEL_JOBS)
        return _job(row)

    def _job_for_update(self, conn: sqlite3.Connection, job_id: int, tenant: str | None) -> Job:
        row = conn.execute(Q["get_job"], {"id": job_id, "tenant": tenant}).fetchone()
        if row is None:
            raise JobNotFound(job_id)
        return _job(row)

    # -- triggering -------------------------------------------------------------------------

    def trigger(
        self, epoch: int, *, limit: int = DEFAULT_TRIGGER_BATCH, now: datetime | None = None
    ) -> TriggerResult:
        t = self._now(now)
        now_dt = from_micros(t)
        with self._write() as conn:
            if (
                conn.execute(Q["leader_epoch_for_update"], {"epoch": epoch, "now": t}).fetchone()
                is None
            ):
                raise LeadershipLost(self._holder(conn), epoch)
            jobs = [_job(r) for r in conn.execute(Q["due_jobs"], {"now": t, "limit": limit})]
            watched = [j.id for j in jobs if j.overlap is not OverlapPolicy.ALLOW]
            unfinished: set[int] = set()
            if watched:
                query = Q["unfinished_jobs"].format(ids=",".join("?" * len(watched)))
                unfinished = {r[0] for r in conn.execute(query, watched)}
            plan = plan_batch(jobs, unfinished, now_dt)
            cancelled: list[int] = []
            for job_id in plan.replace_job_ids:
                cancelled.extend(
                    r[0]
                    for r in conn.execute(
                        Q["cancel_unfinished_runs_of_job"],
                        {"job_id": job_id, "now": t, "reason": "replaced by a newer slot"},
                    )
                )
            runs: list[Run] = []
            run_ids: dict[tuple[int, int], int] = {}
            for new in plan.runs:
                slot = to_micros(new.scheduled_for)
                row = conn.execute(
                    Q["insert_run"], {"job_id": new.job.id, "scheduled_for": slot, "now": t}
                ).fetchone()
                if row is not None:
                    runs.append(_run(row))
                    run_ids[(new.job.id, slot)] = row["id"]
            conn.executemany(
                Q["advance_job"],
                [
                    {"id": a.job_id, "next_run_at": _us(a.next_run_at), "state": a.state, "now": t}
                    for a in plan.advances
                ],
            )
            skipped = []
            for s in plan.skips:
                run_id = (
                    run_ids.get((s.job_id, to_micros(s.coalesced_into)))
                    if s.coalesced_into
                    else None
                )
                conn.execute(
                    Q["insert_slot_skip"],
                    {
                        "job_id": s.job_id,
                        "first_slot": to_micros(s.first_slot),
                        "last_slot": to_micros(s.last_slot),
                        "count": s.count,
                        "fate": s.fate,
                        "run_id": run_id,
                        "more": s.more,
                        "now": t,
                    },
                )
                skipped.append(
                    SlotSkip(
                        s.job_id, s.first_slot, s.last_slot, s.count, s.fate, run_id, s.more, now_dt
                    )
                )
            next_due = conn.execute(Q["next_due_at"]).fetchone()["at"]
        if runs:
            self._signals.notify(CHANNEL_RUNS)
        return TriggerResult(
            runs,
            skipped,
            cancelled,
            len(jobs),
            len(jobs) >= limit,
            _dt(next_due),
            now if now is not None else SYSTEM_CLOCK.now(),
        )

    def _holder(self, conn: sqlite3.Connection) -> str:
        row = conn.execute("SELECT holder FROM tickwork_leases WHERE name = 'scheduler'").fetchone()
        return str(row[0]) if row else ""

    def next_due_at(self) -> datetime | None:
        return _dt(self._read(Q["next_due_at"], {})[0]["at"])

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
        return self._complete_and_claim(
            [], worker, limit=limit, lease=lease, queues=queues, now=now
        )[1]

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
        rejected, runs = self._complete_and_claim(
            completions, worker, limit=limit, lease=lease, queues=queues, now=now
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
        now: datetime | None,
    ) -> tuple[list[int], list[Run]]:
        if queues is not None and not queues:
            limit = 0
        if not completions and limit < 1:
            return [], []
        t = self._now(now)
        params: dict[str, Any] = {
            "worker": worker,
            "now": t,
            "limit": limit,
            "lease_expires_at": t + _td_us(lease),
        }
        if queues is None:
            query = Q["claim"]
        else:
            query = Q["claim_queues"].format(queues=",".join(f":q{i}" for i in range(len(queues))))
            params.update({f"q{i}": q for i, q in enumerate(queues)})
        with self._write() as conn:  # one transaction: one commit (one fsync) for both
            rejected = self._complete_in(conn, completions, t)
            rows = conn.execute(query, params).fetchall() if limit >= 1 else []
        runs = [_run(r) for r in rows]
        runs.sort(key=lambda r: (-r.priority, r.run_at, r.id))
        return rejected, runs

    def next_claimable_at(self, *, queues: Sequence[str] | None = None) -> datetime | None:
        if queues is None:
            return _dt(self._read(Q["next_claimable_at"], {})[0]["at"])
        if not queues:
            return None
        query = Q["next_claimable_at_queues"].format(
            queues=",".join(f":q{i}" for i in range(len(queues)))
        )
        return _dt(self._read(query, {f"q{i}": q for i, q in enumerate(queues)})[0]["at"])

    def heartbeat(
        self,
        run_id: int,
        fencing_token: int,
        *,
        lease: timedelta = DEFAULT_LEASE,
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
        lease: timedelta = DEFAULT_LEASE,
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
                {"id": run_id, "token": fencing_token, "now": t, "result": _json(result)},
            ).fetchone()
        if row is None:
            raise LeaseLost(run_id, fencing_token)
        return _run(row)

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
                Q["complete"],
                {"id": c.run_id, "token": c.fencing_token, "now": t, "result": _json(c.result)},
            ).fetchone()
            if row is None:
                rejected.append(c.run_id)
        return rejected

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
        t = self._now(now)
        params: dict[str, Any] = {
            "id": run_id,
            "token": fencing_token,
            "now": t,
            "error": error,
            "result": _json(result),
        }
        with self._write() as conn:
            held = conn.execute(Q["held_run_for_fail"], params).fetchone()
            if held is None:
                raise LeaseLost(run_id, fencing_token)
            policy = RetryPolicy(held["max_attempts"], held["backoff_base"], held["backoff_cap"])
            if discard or policy.exhausted(held["attempt"]):
                row = conn.execute(Q["fail_dead"], params).fetchone()
            else:
                wait = retry_after if retry_after is not None else policy.backoff(held["attempt"])
                params["run_at"] = t + _td_us(wait)
                row = conn.execute(Q["fail_retry"], params).fetchone()
        return _run(row)

    def release(self, run_id: int, fencing_token: int, *, now: datetime | None = None) -> Run:
        t = self._now(now)
        with self._write() as conn:
            row = conn.execute(
                Q["release"], {"id": run_id, "token": fencing_token, "now": t}
            ).fetchone()
        if row is None:
            raise LeaseLost(run_id, fencing_token)
        self._signals.notify(CHANNEL_RUNS)
        return _run(row)

    def rescue(
        self, *, limit: int = DEFAULT_RESCUE_BATCH, now: datetime | None = None
    ) -> RescueResult:
        t = self._now(now)
        with self._write() as conn:
            rows = conn.execute(Q["rescue"], {"now": t, "limit": limit}).fetchall()
        result = RescueResult(
            requeued=sorted(r["id"] for r in rows if r["state"] == RunState.QUEUED),
            dead=sorted(r["id"] for r in rows if r["state"] == RunState.DEAD),
        )
        if result.requeued:
            self._signals.notify(CHANNEL_RUNS)
        return result

    def get_run(self, run_id: int, *, tenant: str | None = None) -> Run:
        rows = self._read(Q["get_run"], {"id": run_id, "tenant": tenant})
        if not rows:
            raise RunNotFound(run_id)
        return _run(rows[0])

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
        rows = self._read(
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
        run = self._run_command(run_id, tenant, now, "retry_run", "retry")
        self._signals.notify(CHANNEL_RUNS)
        return run

    def _run_command(
        self, run_id: int, tenant: str | None, now: datetime | None, query: str, action: str
    ) -> Run:
        t = self._now(now)
        with self._write() as conn:
            current = conn.execute(Q["get_run"], {"id": run_id, "tenant": tenant}).fetchone()
            if current is None:
                raise RunNotFound(run_id)
            row = conn.execute(Q[query], {"id": run_id, "now": t}).fetchone()
            if row is None:
                raise InvalidTransition("run", run_id, current["state"], action)
        return _run(row)

    def prune(
        self, retention: timedelta, *, limit: int = DEFAULT_PRUNE_BATCH, now: datetime | None = None
    ) -> int:
        cutoff = self._now(now) - _td_us(retention)
        with self._write() as conn:
            deleted = conn.execute(Q["prune_runs"], {"cutoff": cutoff, "limit": limit}).rowcount
            conn.execute(Q["prune_slot_skips"], {"cutoff": cutoff})
        return int(deleted)

    def slot_skips(
        self, job_id: int, *, tenant: str | None = None, limit: int = DEFAULT_PAGE
    ) -> list[SlotSkip]:
        rows = self._read(
            Q["slot_skips"], {"job_id": job_id, "tenant": tenant, "limit": page_limit(limit)}
        )
        if not rows:
            self.get_job(job_id, tenant=tenant)  # JobNotFound for unknown or foreign ids
        return [
            SlotSkip(
                r["job_id"],
                from_micros(r["first_slot"]),
                from_micros(r["last_slot"]),
                r["count"],
                SlotFate(r["fate"]),
                r["run_id"],
                bool(r["more"]),
                from_micros(r["recorded_at"]),
            )
            for r in rows
        ]

    def run_now(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Run:
        t = self._now(now)
        with self._write() as conn:
            job = self._job_for_update(conn, job_id, tenant)
            if job.state is JobState.CANCELLED:
                raise InvalidTransition("job", job_id, job.state, "trigger")
            row = conn.execute(Q["run_now"], {"job_id": job_id, "now": t}).fetchone()
            if row is None:
                row = conn.execute(Q["run_at_slot"], {"job_id": job_id, "slot": t}).fetchone()
        self._signals.notify(CHANNEL_RUNS)
        return _run(row)

    def runs_for_slot(
        self, job_id: int, slot: datetime, *, tenant: str | None = None
    ) -> tuple[Job, list[Run], list[SlotSkip]]:
        job = self.get_job(job_id, tenant=tenant)
        params = {"job_id": job_id, "slot": to_micros(slot)}
        runs = [_run(r) for r in self._read(Q["run_at_slot"], params)]
        skips = [_skip(r) for r in self._read(Q["skips_covering"], params)]
        return job, runs, skips

    def run_stats(
        self, *, tenant: str | None = None, lag_sample: int = 1000, now: datetime | None = None
    ) -> RunStats:
        t = self._now(now)
        counts = {state.value: 0 for state in RunState}
        for r in self._read(Q["run_counts"], {"tenant": tenant}):
            counts[r["state"]] = r["n"]
        backlog = self._read(Q["due_backlog"], {"tenant": tenant, "now": t})[0]
        lags = self._read(Q["recent_lag"], {"tenant": tenant, "limit": lag_sample})
        return RunStats(
            counts,
            backlog["n"],
            _dt(backlog["oldest"]),
            [r["lag"] / 1000.0 for r in lags],
            from_micros(t),
        )

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
        with self._write() as conn:
            conn.execute(
                Q["register_node"],
                {
                    "id": node_id,
                    "kind": kind,
                    "host": host,
                    "pid": pid,
                    "now": self._now(now),
                    "info": json.dumps(info or {}),
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
        with self._write() as conn:
            conn.execute(
                Q["node_heartbeat"],
                {"id": node_id, "now": self._now(now), "running": running, "info": _json(info)},
            )

    def deregister_node(self, node_id: str) -> None:
        with self._write() as conn:
            conn.execute(Q["deregister_node"], {"id": node_id})

    def list_nodes(
        self, *, seen_within: timedelta | None = None, now: datetime | None = None
    ) -> list[Node]:
        t = self._now(now)
        with self._write() as conn:
            conn.execute(Q["forget_nodes"], {"cutoff": t - _td_us(NODE_FORGET_AFTER)})
        since = t - _td_us(seen_within) if seen_within is not None else None
        return [
            Node(
                r["id"],
                r["kind"],
                r["host"],
                r["pid"],
                from_micros(r["started_at"]),
                from_micros(r["last_seen_at"]),
                r["running"],
                json.loads(r["info"]),
            )
            for r in self._read(Q["list_nodes"], {"since": since})
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
        with self._write() as conn:
            row = conn.execute(
                Q["create_api_key"],
                {
                    "key_hash": key_hash,
                    "prefix": prefix,
                    "tenant": tenant,
                    "admin": admin,
                    "label": label,
                    "now": self._now(now),
                },
            ).fetchone()
        return _api_key(row)

    def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        rows = self._read(Q["api_key_by_hash"], {"key_hash": key_hash})
        return _api_key(rows[0]) if rows else None

    def list_api_keys(self) -> list[ApiKey]:
        return [_api_key(r) for r in self._read(Q["list_api_keys"], {})]

    def revoke_api_key(self, key: str, *, now: datetime | None = None) -> ApiKey:
        t = self._now(now)
        with self._write() as conn:
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
        t = self._now(now)
        with self._write() as conn:
            conn.execute(Q["forget_sessions"], {"cutoff": t - _td_us(SESSION_FORGET_AFTER)})
            row = conn.execute(
                Q["sign_in"],
                {
                    "token_hash": token_hash,
                    "key_id": key_id,
                    "now": t,
                    "idle_timeout": _td_us(idle_timeout),
                    "expires_at": t + _td_us(lifetime),
                },
            ).fetchone()
        if row is None:
            raise ApiKeyNotFound(str(key_id))
        return _session(row)

    def session_by_hash(
        self, token_hash: str, *, now: datetime | None = None
    ) -> tuple[Session, ApiKey] | None:
        t = self._now(now)
        rows = self._read(Q["session_by_hash"], {"token_hash": token_hash, "now": t})
        if not rows:
            return None
        row = rows[0]
        session = _session(row)
        if row["last_seen_at"] < t - _td_us(SESSION_SEEN_EVERY):
            with self._write() as conn:
                conn.execute(Q["see_session"], {"id": session.id, "now": t})
        key = ApiKey(
            session.key_id,
            row["prefix"],
            row["tenant"],
            bool(row["admin"]),
            row["label"],
            from_micros(row["key_created_at"]),
            _dt(row["key_revoked_at"]),
        )
        return session, key

    def sign_out(self, token_hash: str, *, now: datetime | None = None) -> bool:
        with self._write() as conn:
            row = conn.execute(
                Q["sign_out"], {"token_hash": token_hash, "now": self._now(now)}
            ).fetchone()
        return row is not None

    # -- leadership -------------------------------------------------------------------------

    def acquire_leadership(
        self, node_id: str, ttl: timedelta, *, now: datetime | None = None
    ) -> Lease | None:
        t = self._now(now)
        with self._write() as conn:
            row = conn.execute(
                Q["acquire_leadership"], {"node": node_id, "now": t, "expires_at": t + _td_us(ttl)}
            ).fetchone()
        return _lease(row) if row is not None else None

    def renew_leadership(
        self, node_id: str, epoch: int, ttl: timedelta, *, now: datetime | None = None
    ) -> Lease:
        t = self._now(now)
        with self._write() as conn:
            row = conn.execute(
                Q["renew_leadership"],
                {"node": node_id, "epoch": epoch, "now": t, "expires_at": t + _td_us(ttl)},
            ).fetchone()
        if row is None:
            raise LeadershipLost(node_id, epoch)
        return _lease(row)

    def resign_leadership(self, node_id: str, epoch: int) -> None:
        with self._write() as conn:
            conn.execute(
                Q["resign_leadership"], {"node": node_id, "epoch": epoch, "now": self._now(None)}
            )

    def leader(self, *, now: datetime | None = None) -> Lease | None:
        rows = self._read(Q["leader"], {"now": self._now(now)})
        return _lease(rows[0]) if rows else None

    # -- notifications ----------------------------------------------------------------------

    def listener(self, channels: Sequence[str]) -> Listener:
        return _SignalListener(self._signals, channels)


class _Signals:
    """In-process wake-ups for one database file, shared by every store on it."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.counts: dict[str, int] = {}

    def notify(self, *channels: str) -> None:
        with self.cond:
            for channel in channels:
                self.counts[channel] = self.counts.get(channel, 0) + 1
            self.cond.notify_all()


_SIGNALS: dict[str, _Signals] = {}
_SIGNALS_LOCK = threading.Lock()


def _signals_for(path: Path) -> _Signals:
    key = str(path.resolve())
    with _SIGNALS_LOCK:
        return _SIGNALS.setdefault(key, _Signals())


class _SignalListener(Listener):
    def __init__(self, signals: _Signals, channels: Sequence[str]) -> None:
        self.signals = signals
        self.channels = tuple(channels)
        with signals.cond:
            self.seen = self._total()

    def _total(self) -> int:
        return sum(self.signals.counts.get(c, 0) for c in self.channels)

    def wait(self, timeout: float) -> bool:
        with self.signals.cond:
            self.signals.cond.wait_for(lambda: self._total() != self.seen, max(timeout, 0))
            total = self._total()
            arrived = total != self.seen
            self.seen = total
            return arrived

    def close(self) -> None:
        pass


# -- row mapping ----------------------------------------------------------------------------


WAL_RETRY_SECONDS = 0.01


def _enable_wal(conn: sqlite3.Connection, path: Path) -> None:
    """Switch to WAL, waiting out other processes doing the same on a new file.

    Hazard: the journal-mode change needs an exclusive lock and SQLite answers "database is
    locked" at once instead of calling the busy handler, so processes opening a fresh file
    together (several nodes starting at once) must retry here.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise StoreUnavailable(f"cannot open {path} in WAL mode: {exc}") from exc
            time.sleep(WAL_RETRY_SECONDS)


def _statements(script: str) -> list[str]:
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise MigrationError(f"incomplete SQL statement in migration: {buffer.strip()[:80]}")
    return statements


@lru_cache(maxsize=4096)
def _schedule(text: str) -> schedules.Schedule:
    return schedules.from_json(json.loads(text))


def _job_params(spec: JobSpec, resolved: schedules.Schedule) -> dict[str, Any]:
    return {
        "tenant": spec.tenant,
        "name": spec.name,
        "task": spec.task,
        "args": spec.args_json,
        "schedule": json.dumps(resolved.to_json(), sort_keys=True),
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


def _job(r: sqlite3.Row) -> Job:
    return Job(
        id=r["id"],
        tenant=r["tenant"],
        name=r["name"],
        task=r["task"],
        args=read_json(r["args"]),
        schedule=_schedule(r["schedule"]),
        state=JobState(r["state"]),
        next_run_at=_dt(r["next_run_at"]),
        queue=r["queue"],
        priority=r["priority"],
        retry=RetryPolicy(r["max_attempts"], r["backoff_base"], r["backoff_cap"]),
        timeout=timedelta(seconds=r["timeout"]) if r["timeout"] is not None else None,
        misfire=MisfirePolicy(r["misfire"]),
        misfire_grace=timedelta(seconds=r["misfire_grace"]),
        overlap=OverlapPolicy(r["overlap"]),
        idempotency_key=r["idempotency_key"],
        created_at=from_micros(r["created_at"]),
        updated_at=from_micros(r["updated_at"]),
    )


def _run(r: sqlite3.Row) -> Run:
    return Run(
        id=r["id"],
        job_id=r["job_id"],
        tenant=r["tenant"],
        task=r["task"],
        args=read_json(r["args"]),
        queue=r["queue"],
        priority=r["priority"],
        scheduled_for=from_micros(r["scheduled_for"]),
        run_at=from_micros(r["run_at"]),
        state=RunState(r["state"]),
        attempt=r["attempt"],
        max_attempts=r["max_attempts"],
        fencing_token=r["fencing_token"],
        worker=r["worker"],
        lease_expires_at=_dt(r["lease_expires_at"]),
        started_at=_dt(r["started_at"]),
        finished_at=_dt(r["finished_at"]),
        error=r["error"],
        result=read_json(r["result"]) if r["result"] is not None else None,
        timeout=timedelta(seconds=r["timeout"]) if r["timeout"] is not None else None,
        created_at=from_micros(r["created_at"]),
    )


def _skip(r: sqlite3.Row) -> SlotSkip:
    return SlotSkip(
        r["job_id"],
        from_micros(r["first_slot"]),
        from_micros(r["last_slot"]),
        r["count"],
        SlotFate(r["fate"]),
        r["run_id"],
        bool(r["more"]),
        from_micros(r["recorded_at"]),
    )


def _api_key(r: sqlite3.Row) -> ApiKey:
    return ApiKey(
        r["id"],
        r["prefix"],
        r["tenant"],
        bool(r["admin"]),
        r["label"],
        from_micros(r["created_at"]),
        _dt(r["revoked_at"]),
    )


def _session(r: sqlite3.Row) -> Session:
    return Session(
        r["id"],
        r["key_id"],
        from_micros(r["created_at"]),
        from_micros(r["last_seen_at"]),
        timedelta(microseconds=r["idle_timeout"]),
        from_micros(r["expires_at"]),
        _dt(r["revoked_at"]),
    )


def _lease(r: sqlite3.Row) -> Lease:
    return Lease(r["holder"], r["epoch"], from_micros(r["expires_at"]))


def _dt(us: int | None) -> datetime | None:
    return from_micros(us) if us is not None else None


def _us(dt: datetime | None) -> int | None:
    return to_micros(dt) if dt is not None else None


def _td_us(td: timedelta) -> int:
    return td // timedelta(microseconds=1)


def _json(value: dict[str, Any] | None) -> str | None:
    return json.dumps(value, separators=(",", ":")) if value is not None else None
