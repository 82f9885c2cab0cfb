"""The Store contract: the one interface over durable state.

Every state transition of a job or a run is one atomic call here. Two implementations
(:mod:`tickwork.store.sqlite`, :mod:`tickwork.store.postgres`) pass one conformance suite
(``tests/store/``); nothing above this layer knows which one it talks to, except through
:attr:`Store.capabilities`.

Rules every method follows
--------------------------

- **One clock.** Every ``now`` parameter defaults to ``None``, meaning *the store's clock*
  (``now()`` in PostgreSQL; the host clock for SQLite, which is one host by construction).
  Only tests pass ``now``; a node never passes its local time, so a node whose clock is
  wrong cannot make a job due early or a lease expire early. Durations (``lease``, ``ttl``,
  ``delay``) are added to the store's clock inside the store.
- **Atomic.** A call either applies all of its effect or none; a rejected call (typed error)
  changed nothing.
- **Tenancy.** Read and command methods take ``tenant``: ``None`` means any tenant (an admin);
  a row of another tenant is reported exactly like a missing row (``NotFound``), so ids do
  not leak across tenants.
- **Fencing.** ``heartbeat``, ``complete``, ``fail`` and ``release`` name a run *and* the
  fencing token its claim returned. The write applies only while the run is ``running``
  with that token; otherwise it raises :class:`~tickwork.errors.LeaseLost` and applies
  nothing. A lease that has expired but has not been rescued (nobody else holds the run) is
  still honoured: the lease is lost when it is *taken over* (rescued, re-claimed, cancelled),
  which is the moment a second execution can begin.
- **Attempts are kept.** Every attempt of a run that ends other than by success leaves a
  record in the run's history (:meth:`Store.run_attempts`), written by the transition that
  ended it (``fail``, ``rescue``, ``release``, ``cancel_run``, a ``trigger`` whose overlap
  ``replace`` cancels a running run), in its transaction and fenced as it is: a transition
  refused (LeaseLost, InvalidTransition) records nothing, and a zombie's late ``fail`` never
  adds an attempt. The record holds the attempt's number, its claim's worker, start and
  fencing token, when and why it ended (:class:`~tickwork.records.AttemptEnd`), its error
  and traceback. The hot paths write nothing for it: the attempt that runs now, or the one
  that succeeded, is read from the run's own fields (worker, ``started_at``,
  ``finished_at``, token, state), so ``claim``, ``complete`` and ``complete_and_claim``
  are as they were. Bounded: a run keeps its last ATTEMPTS_KEPT ended attempts (the oldest
  dropped, and counted), each error cut to ATTEMPT_ERROR_LIMIT and traceback to
  ATTEMPT_TRACEBACK_LIMIT bytes (:func:`~tickwork.records.cut`: head and end, a marker
  between); ``prune`` deletes a run's history with it, in one transaction. An attempt a
  fault was injected into (``mark_injected`` since its claim) ends ``injected_fault``
  whichever transition ended it, except an operator's cancel.
- **Times** returned are aware UTC datetimes.
- **Reads cannot fail on a row's JSON.** Args and results are decoded with
  :func:`tickwork.job.read_json`: one nested past what Python decodes (no tickwork path
  writes one; SQL by hand can) reads as a placeholder rather than failing every listing
  that meets it.

The run state machine is drawn in ``docs/job-lifecycle.md``.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import date, datetime, timedelta
from typing import Any, Unpack

from tickwork.calendar import Calendar
from tickwork.config import RUN_LEASE, TRIGGER_BATCH
from tickwork.job import ClaimedRun, Job, JobSpec, JobState, Run, RunState
from tickwork.records import (
    DEFAULT_BULK,
    DEFAULT_PAGE,
    KEEP,
    MAX_BULK,
    MAX_PAGE,
    NODE_DEFAULT_BEAT,
    NODE_GONE_AFTER,
    NODE_SILENT_BEATS,
    NODE_SILENT_FLOOR,
    ROLLUP_KEEP,
    ApiKey,
    AttemptEnd,
    AttemptRecord,
    CalendarChange,
    CalendarRecord,
    Completion,
    FaultMark,
    InjectedRun,
    Keep,
    LeaderTerm,
    Lease,
    LeaseReport,
    LeaseStatus,
    NodeRecord,
    Page,
    QueueStatus,
    RescueResult,
    RunAttempts,
    RunFilter,
    RunMinute,
    RunStats,
    RunTotals,
    Session,
    SlotFate,
    SlotSkip,
    Submitted,
    TaskBacklog,
    TaskLimits,
    TaskStatus,
    TenantLimits,
    TenantStatus,
    TriggerResult,
    bulk_limit,
    page_limit,
)
from tickwork.store.health import StoreHealth

# The records (tickwork.records) are re-exported: store code names them from here.
# fmt: off
__all__ = [
    "CHANNEL_JOBS",
    "CHANNEL_RUNS",
    "DEFAULT_BULK",
    "DEFAULT_PAGE",
    "DEFAULT_PRUNE_BATCH",
    "DEFAULT_RESCUE_BATCH",
    "KEEP",
    "KEEP_LEADER_TERMS",
    "LISTEN_NOTIFY",
    "MAX_BULK",
    "MAX_PAGE",
    "MULTI_HOST",
    "NODE_DEFAULT_BEAT",
    "NODE_FORGET_AFTER",
    "NODE_GONE_AFTER",
    "NODE_SILENT_BEATS",
    "NODE_SILENT_FLOOR",
    "ROLLUP_KEEP",
    "ROLLUP_SETTLE",
    "SESSION_FORGET_AFTER",
    "SESSION_SEEN_EVERY",
    "SKIP_LOCKED",
    "ApiKey",
    "AttemptEnd",
    "AttemptRecord",
    "CalendarChange",
    "CalendarRecord",
    "Completion",
    "FaultMark",
    "InjectedRun",
    "Keep",
    "LeaderTerm",
    "Lease",
    "LeaseReport",
    "LeaseStatus",
    "Listener",
    "NodeRecord",
    "Page",
    "QueueStatus",
    "RescueResult",
    "RunAttempts",
    "RunFilter",
    "RunMinute",
    "RunStats",
    "RunTotals",
    "Session",
    "SlotFate",
    "SlotSkip",
    "Store",
    "Submitted",
    "TaskBacklog",
    "TaskLimits",
    "TaskStatus",
    "TenantLimits",
    "TenantStatus",
    "TriggerResult",
    "bulk_limit",
    "page_limit",
]
# fmt: on

DEFAULT_RESCUE_BATCH = 1000
DEFAULT_PRUNE_BATCH = 10_000
KEEP_LEADER_TERMS = 10
"""Leadership terms :meth:`Store.prune` keeps whatever their age: the latest this many."""
NODE_FORGET_AFTER = timedelta(days=1)
"""A node row unseen for this long is deleted (a crashed node never deregisters)."""
SESSION_SEEN_EVERY = timedelta(minutes=1)
"""A session's ``last_seen_at`` is written at most this often: a dashboard page polls every
few seconds, and a write per poll would buy nothing (the idle timeout is hours)."""
ROLLUP_SETTLE = timedelta(seconds=10)
"""The fold leaves the last seconds unread: a completion stamped just before the fold but
committed just after it still lands in its minute."""
SESSION_FORGET_AFTER = timedelta(days=1)
"""A session row is deleted this long after it ended (signed out, revoked or expired)."""

# Capabilities a store may declare (named differences, never isinstance checks).
LISTEN_NOTIFY = "listen_notify"  # notifications wake sleepers across processes and hosts
SKIP_LOCKED = "skip_locked"  # concurrent claimers never wait on each other's rows
MULTI_HOST = "multi_host"  # processes on several hosts may share the store

# Notification channels.
CHANNEL_JOBS = "tickwork_jobs"  # a job was submitted or changed: the trigger loop re-plans
CHANNEL_RUNS = "tickwork_runs"  # runs became claimable: idle workers claim


class Store(abc.ABC):
    """Durable jobs, runs, leases. Thread-safe: one instance serves a whole process."""

    url: str
    capabilities: frozenset[str] = frozenset()
    health: StoreHealth
    """Whether the store answers, as this process has seen it: outages logged once each,
    counted for ``/metrics`` (:mod:`tickwork.store.health`)."""

    # -- lifecycle -------------------------------------------------------------------------

    @abc.abstractmethod
    def migrate(self) -> list[int]:
        """Apply pending schema migrations, in order; return the versions applied.

        Concurrent callers (several processes starting at once) serialise on a lock; each
        migration is applied exactly once. Raises MigrationError when the database holds a
        newer schema than this code knows.
        """

    @abc.abstractmethod
    def schema_version(self) -> tuple[int, int]:
        """(applied version, latest version this code knows)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections. Idempotent."""

    @abc.abstractmethod
    def now(self) -> datetime:
        """The store's clock."""

    # -- jobs ------------------------------------------------------------------------------

    @abc.abstractmethod
    def submit(
        self, spec: JobSpec, *, now: datetime | None = None, conn: object | None = None
    ) -> Submitted:
        """Create a job; durable when this returns (with ``conn``: when the caller commits).

        The schedule is resolved against the store's clock (a delay becomes an instant; an
        interval without anchor is anchored now) and ``next_run_at`` set to its first slot.
        If that slot is already due (a one-off job at or before now), its run is created
        ``queued`` in the same transaction and the job's schedule is ``completed`` (every
        slot triggered: the job reads ``queued``, as its run), so an immediate job never
        waits for a scheduler.

        Idempotency: when ``spec.idempotency_key`` is set and the tenant already has a job
        with that key, that job is returned with ``created=False`` and nothing is written,
        even under concurrent submits with the same key (a unique index decides).
        A ``spec.name`` is unique per tenant: submitting a second job with a taken name
        raises ValidationError (use :meth:`put_schedule` to update it).
        Notifies CHANNEL_JOBS (and CHANNEL_RUNS when a run was created).

        ``conn``: the caller's own open transaction to write in (the outbox pattern): a
        psycopg 3 connection, or a SQLAlchemy Connection or Session, on this store's
        PostgreSQL (:mod:`tickwork.store.postgres.borrowed`). The job and its run exist
        only if the caller commits; a rollback leaves neither; the notification is
        delivered at the commit. A store that cannot (SQLite) raises ValidationError.
        """

    @abc.abstractmethod
    def submit_many(
        self, specs: Sequence[JobSpec], *, now: datetime | None = None, conn: object | None = None
    ) -> list[Submitted]:
        """:meth:`submit` for many jobs in one transaction, in order: all are written or,
        when one is refused (a taken name, also one taken twice within the call), none;
        the ValidationError's ``index`` is then the position of the spec at fault.
        Idempotency keys behave as in submit (also between specs of one call: the first
        with a key creates the job, the later ones return it with ``created=False``).
        One-off jobs due now get their queued run in the same transaction, as in submit.
        Notifies as submit does, once for the call. ``conn`` as in submit."""

    @abc.abstractmethod
    def put_schedule(self, spec: JobSpec, *, now: datetime | None = None) -> Submitted:
        """Create the job named ``spec.name`` in ``spec.tenant``, or update it in place.

        Used to sync schedules declared in code at start: calling it again with the same
        spec changes nothing (``created=False``). An update to the schedule recomputes
        ``next_run_at`` from now; other fields apply to runs triggered from then on. A
        cancelled job of that name is revived as active. Requires ``spec.name``.
        """

    @abc.abstractmethod
    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        """The job, or JobNotFound. Its ``state`` is derived as :meth:`JobState.of
        <tickwork.job.JobState.of>` says: from its schedule state and, for a one-off job,
        its latest run (by slot)."""

    @abc.abstractmethod
    def list_jobs(
        self,
        *,
        tenant: str | None = None,
        state: JobState | None = None,
        task: str | None = None,
        after: int | None = None,
        limit: int = DEFAULT_PAGE,
        search: str | None = None,
        recurring: bool | None = None,
    ) -> Page[Job]:
        """Jobs, newest first (descending id), ``limit`` at most, ids below ``after``;
        ``state``: only jobs in that (derived) state, as :meth:`get_job` would say it;
        ``search``: only jobs whose name or task contains it (case-insensitive text, no
        wildcards); ``recurring``: True for cron and interval jobs only, False for one-off
        jobs only."""

    @abc.abstractmethod
    def cancel_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        """Schedule active|paused|completed -> cancelled; its queued and failed runs ->
        cancelled.

        A running run is left to finish (cancel it with :meth:`cancel_run` to stop it).
        Cancelling a cancelled job returns it unchanged. JobNotFound for unknown ids.
        """

    @abc.abstractmethod
    def pause_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        """active -> paused: no slot is triggered until resume. Runs already queued run.

        Pausing a paused job returns it unchanged; a cancelled job, or a one-off job whose
        slot was triggered (its schedule completed), raises
        InvalidTransition.
        """

    @abc.abstractmethod
    def resume_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Job:
        """paused -> active. For a recurring job, slots that fell while paused are recorded
        (fate ``paused``) and not run, and ``next_run_at`` becomes the first slot after now.
        A one-off job keeps its slot: if its time fell while paused it is due at once and
        the trigger runs it late under its misfire policy (dropping the only slot of a job
        would lose the job).

        Resuming an active job returns it unchanged; a cancelled job, or one whose schedule
        completed, raises
        InvalidTransition.
        """

    # -- triggering (leader only) -----------------------------------------------------------

    @abc.abstractmethod
    def trigger(
        self, epoch: int, *, limit: int = TRIGGER_BATCH, now: datetime | None = None
    ) -> TriggerResult:
        """Turn due slots into queued runs and advance each job, in one transaction.

        Eligible: active jobs with ``next_run_at <= now``, and one-off jobs with
        ``next_run_at <= now + ONE_OFF_LEAD`` (:data:`~tickwork.job.ONE_OFF_LEAD`: their
        runs exist before their time, claimable from it), earliest first, ``limit`` at most
        (rows another trigger holds are skipped, not waited on). For each, the due slots are
        planned by :func:`tickwork.job.plan_slots` (misfire and overlap policies); runs are
        inserted ``queued`` with ``run_at = scheduled_for``; ``next_run_at`` moves to the
        first slot after now (a job with no slot left: its schedule ``completed``); skipped
        slots go to the slot ledger; overlap ``replace`` cancels the job's unfinished runs (a
        running one's attempt record ends ``cancelled``).

        Fencing: the call applies only while ``epoch`` is the current, unexpired leader
        epoch by the store's clock; otherwise it raises LeadershipLost and triggers nothing.
        A run is unique on (job, scheduled_for): even two callers that both believe they
        lead cannot create a second run for one slot.
        Notifies CHANNEL_RUNS when runs were created.
        """

    @abc.abstractmethod
    def next_due_at(self) -> datetime | None:
        """When the trigger next has work (its loop sleeps until then): the earliest active
        job's ``next_run_at``, less :data:`~tickwork.job.ONE_OFF_LEAD` for a one-off job,
        which is triggered that much ahead of its time."""

    # -- runs ------------------------------------------------------------------------------

    @abc.abstractmethod
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
        """Take up to ``limit`` claimable runs, exclusively.

        Eligible: state queued or failed, ``run_at <= now``, queue in ``queues`` (None: any),
        task in ``tasks`` (None: any; empty: none). A worker passes the tasks it runs, so it
        is never handed a run it would have to refuse: a run of any other task is not
        eligible for it (it stays queued, spends no attempt, keeps its fencing token) and
        waits for a claimer that has its task. Every rule below applies among the
        eligible runs only: the batch fills from them, however many runs of other tasks
        come first in claim order; limits count every running run of a tenant or task,
        whoever claimed it; fair share walks only the tenants with eligible runs. A claim
        locks (and spends the tokens of) no limited task outside ``tasks``. The cost of a
        claim does not grow with the number of runs of other tasks: they are stepped over
        through the index on (task, tenant, claim order) (docs/tenant-limits.md).
        Order: priority descending, then run_at, then id, while one tenant's runs are
        eligible. Fair share, when several tenants' are: the tenants are walked round-robin
        from where this store object's last claim stopped (a batch's worth at most), each
        one's runs taken in the order above, interleaved by ``rank / weight`` (weights 1
        and 3: A B B B A B B B); a tenant with fewer runs leaves the rest of the batch to the
        others (docs/tenant-limits.md). Transition: -> running, with
        ``worker``, ``lease_expires_at = now + lease``, ``started_at = now`` and a new
        fencing token (the previous one + 1). Under concurrency every run is returned to
        exactly one caller (PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite: BEGIN IMMEDIATE).

        Tenant and task limits: a run of a tenant (or task) with ``max_running`` N is
        eligible only while fewer than N of its runs are in state running (a dead
        worker's run counts until it is rescued), counting the runs this call claims; the
        limit holds exactly across every concurrent claimer and batch. One at its limit
        is skipped, and the call claims other runs in its place. A tenant's ``rate`` is a
        token bucket kept with its limits (tokens, refilled at ``rate`` a second up to
        :attr:`TenantLimits.bucket`, by the store's clock): a claim starts no more of its
        runs than whole tokens, and spends one per run, exactly across every claimer.
        Limits are read in the claim's own transaction, so a change applies from the next
        claim.
        """

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
        """:meth:`complete_many` then :meth:`claim`, as one transaction where the store can
        (one round trip and one commit per batch for a busy worker). Returns the run ids
        whose completion was rejected (fenced out) and the runs claimed, in claim order and
        lean (:class:`~tickwork.job.ClaimedRun`: what a worker needs, no more); ``limit`` 0
        (or an empty ``queues`` or ``tasks``) only completes. Each half keeps its own
        contract, fencing and the tasks filter included."""
        rejected = self.complete_many(completions, now=now) if completions else []
        claimed = self.claim(worker, limit=limit, lease=lease, queues=queues, tasks=tasks, now=now)
        return rejected, [ClaimedRun.of(run) for run in claimed]

    @abc.abstractmethod
    def next_claimable_at(
        self, *, queues: Sequence[str] | None = None, tasks: Sequence[str] | None = None
    ) -> datetime | None:
        """The earliest ``run_at`` of a queued or failed run in ``queues`` of one of
        ``tasks`` (None: any), or None: when a worker with those queues and tasks may next
        claim (it sleeps until then). A run it cannot take never wakes it."""

    @abc.abstractmethod
    def heartbeat(
        self,
        run_id: int,
        fencing_token: int,
        *,
        lease: timedelta = RUN_LEASE,
        now: datetime | None = None,
    ) -> LeaseReport:
        """Extend the lease to now + ``lease``, or say why not.

        HELD: extended. CANCELLED: the run was cancelled while held (stop, report nothing).
        Raises LeaseLost when the token is stale or the run is no longer running.
        """

    @abc.abstractmethod
    def heartbeat_many(
        self,
        leases: Sequence[tuple[int, int]],
        *,
        lease: timedelta = RUN_LEASE,
        now: datetime | None = None,
    ) -> dict[int, LeaseStatus]:
        """:meth:`heartbeat` for (run_id, token) pairs in one statement; LOST instead of raising."""

    @abc.abstractmethod
    def complete(
        self,
        run_id: int,
        fencing_token: int,
        *,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Run:
        """running -> succeeded, with ``result`` and ``finished_at``. Fenced (LeaseLost)."""

    @abc.abstractmethod
    def complete_many(
        self, completions: Sequence[Completion], *, now: datetime | None = None
    ) -> list[int]:
        """:meth:`complete` for many runs in one statement; returns the run ids it rejected
        (fenced out), having applied the others."""

    @abc.abstractmethod
    def transaction(self) -> AbstractContextManager[Any]:
        """A transaction on the store's own database for the caller's own SQL: it commits
        when the block ends and rolls back when the block raises (the exception
        propagates). Yields the connection as :meth:`complete_in_transaction` does, without
        completing anything: what the testing kit's ``perform`` gives a handler's
        ``ctx.transaction()``, where there is no run to complete."""

    @abc.abstractmethod
    def complete_in_transaction(
        self,
        run_id: int,
        fencing_token: int,
        *,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> AbstractContextManager[Any]:
        """A transaction on the store's own database that completes the run when it
        commits: what a handler writes through the connection it yields and the run's
        running -> succeeded (with ``result``, ``finished_at`` = ``now``, by default the
        database's time when the completion is written at the end of the block) commit
        together, or neither does.

        Yields the dialect's connection, inside the transaction: a psycopg connection
        (rows as dicts) on PostgreSQL, the ``sqlite3`` connection (``BEGIN IMMEDIATE``:
        it holds the database's write lock until the block ends) on SQLite. The caller
        must not commit or roll back on it.

        Fencing: at the end of the block, before the commit, the completion is written
        with ``fencing_token``; when the run is no longer running with that token (its
        lease was taken over) the whole transaction is rolled back and LeaseLost raised:
        the caller's writes never land. A block that raises rolls back and completes
        nothing; its exception propagates. The completion's row lock is taken only at
        the end, so the run's heartbeats are not held up meanwhile.
        """

    @abc.abstractmethod
    def fail(
        self,
        run_id: int,
        fencing_token: int,
        error: str,
        *,
        traceback: str | None = None,
        ended: AttemptEnd = AttemptEnd.FAILED,
        retry_after: timedelta | None = None,
        discard: bool = False,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Run:
        """An attempt failed. Fenced (LeaseLost).

        Attempts left (and not ``discard``): running -> failed, ``attempt + 1``,
        ``run_at = now + retry_after`` (default: the job's backoff with full jitter).
        Last attempt, or ``discard``: running -> dead, ``finished_at = now``.
        No notification: a retry is due later, and waiting workers sleep until
        :meth:`next_claimable_at`.

        The attempt's record (:meth:`run_attempts`) gets ``error`` (the exception line, or
        why the worker failed it), ``traceback`` and ``ended``: ``failed`` (the handler
        raised, or the worker refused the run), ``timed_out`` (its timeout passed) or
        ``injected_fault`` (a worker's ``--inject-faults``; a mark on the attempt says so
        too); any other value raises ValidationError. The run's ``error`` is ``error`` and
        the end of ``traceback`` (:func:`~tickwork.records.run_error`). A NUL or a lone
        surrogate in either (which no store can hold) is written as U+FFFD.
        """

    @abc.abstractmethod
    def release(self, run_id: int, fencing_token: int, *, now: datetime | None = None) -> Run:
        """running -> queued without spending an attempt (a worker stopping gracefully).
        ``run_at = now``. Fenced (LeaseLost). The attempt's record ends ``released``.
        Notifies CHANNEL_RUNS."""

    @abc.abstractmethod
    def rescue(
        self, *, limit: int = DEFAULT_RESCUE_BATCH, now: datetime | None = None
    ) -> RescueResult:
        """Runs whose lease expired (running, ``lease_expires_at < now``): -> queued with
        ``attempt + 1`` and ``run_at = now``, or -> dead when that was the last attempt.

        Each one's attempt record ends ``lease_lost`` at now, with the worker that lost it,
        its start and token ("lease expired: worker W stopped heartbeating").
        The holder's token stays invalid afterwards: the next claim issues a new one, and
        until then the run is not running. Concurrent rescuers never rescue a run twice.
        Notifies CHANNEL_RUNS when runs were requeued.
        """

    @abc.abstractmethod
    def get_run(self, run_id: int, *, tenant: str | None = None) -> Run:
        """The run, or RunNotFound."""

    @abc.abstractmethod
    def run_attempts(self, run_id: int, *, tenant: str | None = None) -> RunAttempts:
        """The run and its attempts, oldest first, or RunNotFound: the records of those that
        ended other than by success (the last ATTEMPTS_KEPT of them; ``dropped`` says how
        many older ones were), then, read from the run itself, the attempt that runs now
        (no end yet) or the one that succeeded (ended ``succeeded`` at ``finished_at``).
        One snapshot: the run and its records agree."""

    @abc.abstractmethod
    def list_runs(
        self,
        *,
        tenant: str | None = None,
        job_id: int | None = None,
        state: RunState | None = None,
        after: int | None = None,
        limit: int = DEFAULT_PAGE,
        task: str | None = None,
        queue: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        error: str | None = None,
    ) -> Page[Run]:
        """Runs, newest first (descending id), ``limit`` at most, ids below ``after``;
        each filter given must match (``since <= scheduled_for < until``; ``error``: the
        run's error contains this text, compared in lower case, ASCII letters at least)."""

    @abc.abstractmethod
    def retry_runs(
        self,
        *,
        max_count: int,
        now: datetime | None = None,
        **where: Unpack[RunFilter[datetime]],
    ) -> list[int]:
        """Every dead run matching the filters (as :meth:`list_runs`) -> queued now, as
        :meth:`retry_run` does each; returns their ids, ascending.

        All or nothing: when more than ``max_count`` runs match, ValidationError and
        nothing changes. Notifies CHANNEL_RUNS when runs were requeued."""

    @abc.abstractmethod
    def cancel_runs(
        self,
        *,
        max_count: int,
        now: datetime | None = None,
        **where: Unpack[RunFilter[datetime]],
    ) -> list[int]:
        """Every waiting run (queued, or failed and waiting to retry) matching the filters
        -> cancelled; returns their ids, ascending. A running run is left alone (cancel it
        with :meth:`cancel_run`). All or nothing, as :meth:`retry_runs`."""

    @abc.abstractmethod
    def cancel_run(
        self, run_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Run:
        """queued|failed|running -> cancelled. A running run's holder learns it at its next
        heartbeat and stops; its attempt's record ends ``cancelled``. Finished runs raise
        InvalidTransition."""

    @abc.abstractmethod
    def retry_run(
        self, run_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Run:
        """dead|failed -> queued now, with a fresh allowance of attempts (attempt 1 of
        max_attempts). Other states raise InvalidTransition. Notifies CHANNEL_RUNS."""

    @abc.abstractmethod
    def prune(
        self, retention: timedelta, *, limit: int = DEFAULT_PRUNE_BATCH, now: datetime | None = None
    ) -> int:
        """Delete up to ``limit`` finished runs (succeeded, dead, cancelled) whose
        ``finished_at`` is older than now - ``retention``, with their attempts' records,
        ledger entries as old, and leadership terms that ended before then (the latest
        KEEP_LEADER_TERMS kept). Returns how many runs were deleted.

        Runs finished since the fold's mark (no fold has read them) are first added to
        the totals (:meth:`run_totals`) and the mark moved past them, in the same
        transaction, under the mark's lock: the totals never miss a pruned run and never
        count one twice. Such runs get no rollup minute."""

    @abc.abstractmethod
    def slot_skips(
        self, job_id: int, *, tenant: str | None = None, limit: int = DEFAULT_PAGE
    ) -> list[SlotSkip]:
        """The job's slot ledger entries, newest first."""

    @abc.abstractmethod
    def trigger_job(
        self, job_id: int, *, tenant: str | None = None, now: datetime | None = None
    ) -> Run:
        """One extra run of the job, queued for now (``tickwork trigger``): the slot is the
        store's now, so it cannot collide with a scheduled slot except at that exact
        microsecond (then the existing run is returned). The job's schedule is untouched.
        A cancelled job raises InvalidTransition. Notifies CHANNEL_RUNS."""

    @abc.abstractmethod
    def runs_for_slot(
        self, job_id: int, slot: datetime, *, tenant: str | None = None
    ) -> tuple[Job, list[Run], list[SlotSkip]]:
        """What the store knows about one slot of a job (``explain``): the job, the run
        whose ``scheduled_for`` is ``slot`` (if any), and ledger entries whose range covers
        ``slot``. JobNotFound for unknown or foreign ids."""

    @abc.abstractmethod
    def run_stats(
        self, *, tenant: str | None = None, lag_sample: int = 1000, now: datetime | None = None
    ) -> RunStats:
        """Counts by state, the due backlog and recent start lag (see RunStats)."""

    # -- calendars -------------------------------------------------------------------------

    @abc.abstractmethod
    def create_calendar(self, calendar: Calendar, *, now: datetime | None = None) -> CalendarRecord:
        """Store a new calendar. ValidationError naming it when the name is taken; nothing
        is written then."""

    @abc.abstractmethod
    def update_calendar(
        self,
        name: str,
        *,
        country: str | Keep | None = KEEP,
        subdiv: str | Keep | None = KEEP,
        weekend: frozenset[int] | Keep = KEEP,
        add: Collection[date] = (),
        remove: Collection[date] = (),
        now: datetime | None = None,
    ) -> CalendarChange:
        """Change the calendar ``name`` and, in the same transaction, re-plan every active
        or paused job whose schedule uses it.

        The change: a ``country``, ``subdiv`` or ``weekend`` given replaces the stored one
        (None clears it), one not given (:data:`KEEP`) stays, except that a new ``country``
        clears the stored ``subdiv`` unless one is given too (a region is its country's);
        dates in ``add`` become days off and dates in ``remove`` business days, each undoing
        the other for its dates. The calendar's row is read, changed and written in one
        transaction that holds it, so two concurrent edits are both kept.

        The re-plan: each job's copy of the calendar is replaced and its ``next_run_at``
        becomes the new schedule's first slot after now (a slot already due stays due).

        CalendarNotFound when there is none; InvalidCalendar when the change leaves no
        calendar (a date both added and removed, a region its country lacks);
        CalendarStrandsJobs, naming them, when the new calendar would leave any of those
        jobs with no slot to come (or none its search finds within its budget,
        :mod:`tickwork.search`): nothing is written then."""

    @abc.abstractmethod
    def get_calendar(self, name: str) -> CalendarRecord:
        """The calendar ``name``; CalendarNotFound when there is none."""

    @abc.abstractmethod
    def list_calendars(self) -> list[CalendarRecord]:
        """Every calendar, by name."""

    @abc.abstractmethod
    def calendar_jobs(self, name: str) -> list[int]:
        """The ids of the active and paused jobs whose schedule uses calendar ``name``."""

    @abc.abstractmethod
    def delete_calendar(self, name: str) -> None:
        """Delete the calendar ``name``. CalendarInUse (naming the jobs) while an active or
        paused job uses it, CalendarNotFound when there is none; nothing is deleted then.
        Cancelled jobs and jobs with no slot left keep their copy and need no calendar."""

    # -- fault injection (tickwork.faults) -------------------------------------------------

    @abc.abstractmethod
    def set_fault_injection(self, allowed: bool, *, now: datetime | None = None) -> None:
        """Opt this database in to workers that inject faults (``allowed``), or out.
        Idempotent."""

    @abc.abstractmethod
    def fault_injection_allowed(self) -> bool:
        """Whether this database opted in to fault injection (never, unless told)."""

    @abc.abstractmethod
    def mark_injected(
        self, marks: Sequence[FaultMark], worker: str, *, now: datetime | None = None
    ) -> list[int]:
        """Mark each fault on its run, with the run's current attempt, ``worker`` and now,
        in one statement. Fenced: only a run still running under the mark's token is
        marked (a fault of an attempt already taken over changes nothing). Returns the
        ids of the runs marked."""

    @abc.abstractmethod
    def injected_runs(
        self, *, tenant: str | None = None, after: int | None = None, limit: int = DEFAULT_PAGE
    ) -> Page[InjectedRun]:
        """Runs that executed more than once because of injected faults, newest first,
        with their marks: a fault marked on an earlier attempt than the run's current
        one, and the run claimed again after the fault (so its handler ran again, or
        runs now)."""

    @abc.abstractmethod
    def queue_stats(
        self, *, tenant: str | None = None, now: datetime | None = None
    ) -> list[QueueStatus]:
        """Every queue that has runs queued, failed or running, by name: its due backlog,
        running count and oldest due run (``workers`` is left empty: nodes are not runs)."""

    @abc.abstractmethod
    def due_tasks(
        self, *, tenant: str | None = None, now: datetime | None = None
    ) -> list[TaskBacklog]:
        """Every queue and task with due runs (queued or failed, ``run_at <= now``), by
        queue then task: how many, and the oldest ``run_at``; only ``tenant``'s if given.
        The queues view sets them against the live workers' tasks (runs no live worker
        can run: :class:`~tickwork.records.Unserved`). A read of the due runs, as
        :meth:`queue_stats`."""

    # -- the per-minute rollup (the dashboard's time axis) --------------------------------

    @abc.abstractmethod
    def fold_minutes(self, *, now: datetime | None = None) -> int:
        """Fold what happened since the last fold into the per-minute rollup and the
        totals; leader-only, about once a minute. Returns how many minutes of the last
        ROLLUP_KEEP it folded.

        Reads the runs that finished (succeeded, dead, cancelled) from the last fold up to
        a few seconds ago (ROLLUP_SETTLE: a completion committed late still lands), through
        the finished index, and adds them up per minute, tenant and queue: counts by
        outcome at the minute they finished, and the start lag of first attempts that
        were not asked for by hand (``manual``: a trigger or retry) at the minute they
        started. Adds every one of them to the totals (:meth:`run_totals`: by task, queue
        and outcome; the duration of its last attempt; its first attempt's start lag),
        those finished before ROLLUP_KEEP too (after a long outage). Samples each queue's
        due backlog into the current minute. Deletes minutes older than ROLLUP_KEEP.
        Failed attempts that will be retried are counted by :meth:`fail` itself, as they
        happen (a failed run has no finish time to fold).

        Exactly once under concurrency: the fold reads and moves a mark under a lock in
        one transaction, so two folders (a deposed leader and the new one) never count
        one run twice. The hot paths (claim, complete) write nothing for the rollup.
        """

    @abc.abstractmethod
    def run_totals(self) -> RunTotals:
        """Totals since the store was made (see RunTotals): runs finished by task, queue
        and outcome as the fold counted them, attempts failed as :meth:`fail` counted
        them, and per queue the histograms of execution duration and start lag. Never
        lower than at an earlier call: nothing deletes them, and :meth:`prune` first
        counts the runs it deletes that no fold has read. Runs, and pairs of task and
        queue, past the cardinality caps count as OTHER."""

    @abc.abstractmethod
    def run_minutes(
        self,
        since: datetime,
        *,
        tenant: str | None = None,
        queue: str | None = None,
    ) -> list[RunMinute]:
        """The rollup's minutes from ``since`` on, oldest first, summed over tenants and
        queues (only ``tenant``'s, ``queue``'s if given). Quiet minutes have no entry."""

    # -- tenants ---------------------------------------------------------------------------

    @abc.abstractmethod
    def set_tenant_limits(
        self,
        tenant: str,
        *,
        max_running: int | Keep | None = KEEP,
        rate: float | Keep | None = KEEP,
        burst: int | Keep | None = KEEP,
        weight: float | Keep | None = KEEP,
        now: datetime | None = None,
    ) -> TenantLimits:
        """Change ``tenant``'s limits and return them all: a limit given as None is cleared
        (``weight``: back to 1), one not given (:data:`KEEP`) stays. A tenant left with no
        limit and weight 1 has no row. One transaction; the next claim of every worker obeys
        it (claims read limits in their transaction). ValidationError naming the field for
        an invalid value or a burst without a rate, and nothing is written."""

    @abc.abstractmethod
    def tenant_limits(self, tenant: str) -> TenantLimits:
        """``tenant``'s limits; a tenant never set has none (every field unset)."""

    @abc.abstractmethod
    def list_tenants(
        self, *, tenant: str | None = None, now: datetime | None = None
    ) -> list[TenantStatus]:
        """Every tenant that has limits set or runs running or queued-and-due, by name, with
        its counts now; only ``tenant`` if given (an unknown tenant: its empty status)."""

    @abc.abstractmethod
    def register_task_limits(
        self, limits: Mapping[str, TaskLimits], *, now: datetime | None = None
    ) -> None:
        """Record each task's limits as its code declares them (a worker at start:
        ``@app.task(max_running=1, rate="10/s", burst=20)``); a task's unlimited record
        clears its row. One transaction; the claim enforces them as tenants' (a run is taken
        only if its tenant and its task both have room, and a rate-limited task has a token
        bucket in its row, refilled and spent under the row's lock). Writing a task's
        limits again keeps its bucket's tokens, whether or not its rate changed: only
        unsetting the rate forgets them (a rate set again starts with a full bucket).
        ValidationError for a bad value or a burst without a rate, and nothing is written."""

    @abc.abstractmethod
    def task_limits(self) -> dict[str, TaskLimits]:
        """Every task that has a limit set, by task name."""

    @abc.abstractmethod
    def task_status(self, task: str, *, now: datetime | None = None) -> TaskStatus:
        """``task``'s limits and how many runs its rate lets start at ``now`` (its bucket
        refilled as the claim refills it); a task without limits: its empty status."""

    # -- nodes and keys --------------------------------------------------------------------

    @abc.abstractmethod
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
        """Insert or refresh a node row (idempotent)."""

    @abc.abstractmethod
    def node_heartbeat(
        self,
        node_id: str,
        *,
        running: int = 0,
        info: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> None:
        """Mark the node seen now (and how many runs it executes)."""

    @abc.abstractmethod
    def deregister_node(self, node_id: str) -> None:
        """Remove the node row (a clean stop). Idempotent."""

    @abc.abstractmethod
    def forget_node(self, node_id: str, *, now: datetime | None = None) -> NodeRecord:
        """Remove a gone node's row (an operator's ``tickwork cluster forget``) and return
        it as it was. Gone: unseen for :meth:`NodeRecord.gone_after` by the store's clock
        (``now``). NodeNotFound when there is no such row; NodeAlive, and nothing changes,
        when it is not gone, including when it beats between the read and the delete
        (the delete is conditional on the last beat it read)."""

    @abc.abstractmethod
    def list_nodes(
        self, *, seen_within: timedelta | None = None, now: datetime | None = None
    ) -> list[NodeRecord]:
        """Nodes, most recently seen first; only those seen within ``seen_within`` if given.
        Rows of nodes unseen for a day are deleted as a side effect."""

    @abc.abstractmethod
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
        """Store a new key's hash. The secret itself never reaches the store."""

    @abc.abstractmethod
    def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        """The unrevoked key with this hash, or None."""

    @abc.abstractmethod
    def list_api_keys(self) -> list[ApiKey]:
        """Every key, revoked ones included, newest first. No key is ever deleted, so this
        also says whether a key was ever created (the HTTP API is open only until one is)."""

    @abc.abstractmethod
    def revoke_api_key(self, key: str, *, now: datetime | None = None) -> ApiKey:
        """Revoke by id (as text) or prefix; NotFound when no key matches. Idempotent.
        The key's sessions end in the same transaction (their ``revoked_at`` is set)."""

    # -- sessions (the dashboard's sign-in) -----------------------------------------------

    @abc.abstractmethod
    def sign_in(
        self,
        *,
        key_id: int,
        token_hash: str,
        idle_timeout: timedelta,
        lifetime: timedelta,
        now: datetime | None = None,
    ) -> Session:
        """Start a session for key ``key_id``, stored by the hash of its token (the token
        itself never reaches the store): ``last_seen_at = created_at = now``,
        ``expires_at = now + lifetime``.

        Raises ApiKeyNotFound, writing nothing, when the key is revoked or missing; the
        check and the insert are one statement, so a key revoked concurrently never gets
        a session that outlives it. As a side effect, deletes the rows of sessions that
        ended more than SESSION_FORGET_AFTER ago.
        """

    @abc.abstractmethod
    def session_by_hash(
        self, token_hash: str, *, now: datetime | None = None
    ) -> tuple[Session, ApiKey] | None:
        """The live session with this token hash and its key, or None: no such session,
        signed out, its key revoked, idle since ``last_seen_at + idle_timeout <= now``, or
        past ``expires_at``.

        A live session is marked seen (``last_seen_at = now``) when it was last marked
        more than SESSION_SEEN_EVERY ago, so its idle time may be counted from up to that
        much before its last use. The returned session is as read, before the mark.
        """

    @abc.abstractmethod
    def sign_out(self, token_hash: str, *, now: datetime | None = None) -> bool:
        """End the session with this token hash (``revoked_at = now``). True when this
        call set ``revoked_at``; False when no session has the hash or it was signed out or
        revoked before. Idempotent."""

    # -- leadership ------------------------------------------------------------------------

    @abc.abstractmethod
    def acquire_leadership(
        self, node_id: str, ttl: timedelta, *, now: datetime | None = None
    ) -> Lease | None:
        """Take the leader lease if it is free or expired (store clock), else None.

        The epoch increases by one on every change of holder, and also when a holder takes
        back a lease that had expired (another node may have led in between). A holder that
        still holds an unexpired lease gets it renewed at the same epoch. Atomic under
        concurrency: of several nodes racing for a free lease, exactly one wins.

        At a new epoch, in the same transaction, a term starts (:meth:`leader_terms`) and
        the previous one ends at the expiry of the lease it held. Renewals write no term.
        """

    @abc.abstractmethod
    def renew_leadership(
        self, node_id: str, epoch: int, ttl: timedelta, *, now: datetime | None = None
    ) -> Lease:
        """Extend an unexpired lease held by ``node_id`` at ``epoch`` to now + ``ttl``.
        Raises LeadershipLost when it expired or changed hands."""

    @abc.abstractmethod
    def resign_leadership(self, node_id: str, epoch: int) -> None:
        """Give the lease up at once if ``node_id`` holds it at ``epoch``; else nothing."""

    @abc.abstractmethod
    def leader(self, *, now: datetime | None = None) -> Lease | None:
        """The current unexpired lease, or None."""

    @abc.abstractmethod
    def leader_terms(
        self, *, since: datetime, until: datetime, now: datetime | None = None
    ) -> list[LeaderTerm]:
        """The leadership terms around [``since``, ``until``], by epoch: the last one that
        started at or before ``since`` and every one that started after it, up to
        ``until``. A term's ``ended_at`` is the expiry of the lease it held (its last
        renewal plus the TTL, or when it was resigned); None for the latest while its lease
        is unexpired at ``now``, and for one whose next epoch left no term (taken by a node
        of a version before terms). Between one term's end and the next one's start no node
        led. Terms older than the retention are pruned (:meth:`prune`)."""

    # -- notifications ---------------------------------------------------------------------

    @abc.abstractmethod
    def listener(self, channels: Sequence[str]) -> Listener:
        """A listener for ``channels``. Without LISTEN_NOTIFY it only sleeps (callers poll)."""


class Listener(abc.ABC):
    """Notifications on some channels, for a sleeper to wake up early.

    A listener outlives its connection: when the connection is lost it reconnects and
    listens again by itself, with capped, jittered backoff. Notifications sent while it
    was not listening are lost, so :meth:`wait` then returns True ("look for yourself"),
    and :attr:`listening` is False until it listens again: a caller polls meanwhile
    instead of trusting notifications.
    """

    @abc.abstractmethod
    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True when a notification arrived (the queue is
        drained), or when notifications may have been missed (the connection was lost, or
        it listens again after a loss). Never raises for a lost connection."""

    @property
    def listening(self) -> bool:
        """Whether notifications are being heard now (False while reconnecting)."""
        return True

    @abc.abstractmethod
    def close(self) -> None:
        """Idempotent."""
