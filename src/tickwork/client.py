"""The one API that apps, the CLI and the HTTP API call to submit and inspect work.

It checks loose user input through :mod:`tickwork.inputs` (a task name, JSON args, ``--in
10s``, ``cron=...``, ids, page sizes) and hands the validated :class:`~tickwork.job.JobSpec`
or value to the store, so every interface validates the same way and says the same thing
about bad input. Every check happens before the store is called: bad input raises a
:class:`~tickwork.errors.ValidationError` and writes nothing. What it returns are the
records of :mod:`tickwork.records`; :func:`tickwork.records.to_json` writes any of them as
JSON.

Operators' commands live here too (cancel, pause, resume, trigger, retry, the dead-letter
list, the slot ledger, ``explain``, the cluster view; calendars, tenants, API keys and
sessions in :mod:`tickwork.admin`), so the CLI and the HTTP API act through the same
calls. Every read and command takes ``tenant``: ``None`` is an admin (every tenant); an id
of another tenant raises the same NotFound as a missing one.

No SQL here and no concrete store: the store comes from :func:`tickwork.store.open_store`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Unpack

from tickwork.admin import Administration
from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.config import resolve_db_url
from tickwork.cron import Fire
from tickwork.errors import (
    NeverFires,
    NotFound,
    ValidationError,
)
from tickwork.explain import Explanation, explain, latest_slot, parse_slot, terms_until
from tickwork.inputs import (
    Instant,
    check_id,
    check_page,
    instant,
    job_specs,
    job_state,
    make_spec,
    resolve_task,
    run_filter,
    run_state,
)
from tickwork.job import (
    Job,
    JobSpec,
    JobState,
    Run,
    RunState,
    check_label,
)
from tickwork.presence import LiveWorkers, Presence, WorkerWatch
from tickwork.records import (
    DEFAULT_BULK,
    DEFAULT_PAGE,
    KEEP,
    ROLLUP_KEEP,
    Cluster,
    Keep,
    Lease,
    NodeRecord,
    Page,
    QueueStatus,
    RunAttempts,
    RunFilter,
    RunMinute,
    RunStats,
    RunTotals,
    SlotSkip,
    Submitted,
    Unserved,
    bulk_limit,
)
from tickwork.schedule import (
    Cron,
    Once,
)
from tickwork.store import Store, open_store
from tickwork.tasks.registry import Registry
from tickwork.tasks.task import Task
from tickwork.tracing import traced

MAX_FIRE_TIMES = 1000


def with_warnings(submitted: Submitted, workers: WorkerWatch | None = None) -> Submitted:
    """``submitted`` with what its schedule should warn about: each DST change of the next
    year that touches its slots (judged from the store's time of the write); with
    ``workers``, also that no live worker would claim its runs (:func:`unserved_warning`)."""
    found: list[str] = []
    schedule = submitted.job.schedule
    if isinstance(schedule, Cron):
        found += schedule.dst_warnings(submitted.job.updated_at)
    if workers is not None and (warning := unserved_warning(submitted, workers)) is not None:
        found.append(warning)
    return replace(submitted, warnings=(*submitted.warnings, *found)) if found else submitted


WARN_WITHIN = timedelta(hours=24)
"""A submit warns that no live worker has the job's task only when its first run is due
within this long: a job for next month may well meet the worker a deployment brings first
(and then waits visibly: ``tickwork queues``, ``explain``, ``tickwork_unserved_runs``)."""


def unserved_warning(submitted: Submitted, workers: WorkerWatch) -> str | None:
    """A warning when no live worker would claim the job's runs (its task, its queue) and
    its first run is due within WARN_WITHIN; None otherwise, or when the workers cannot be
    read (a warning is never worth failing a submit for)."""
    job = submitted.job
    first = submitted.run.run_at if submitted.run is not None else job.next_run_at
    if first is None or first - job.updated_at > WARN_WITHIN:
        return None
    live = workers.live()
    reason = live.unserved(job.task, job.queue) if live is not None else None
    if reason is None:
        return None
    return f"{reason}: the job's runs wait, queued, until one does"


def upcoming(schedule: Cron | Any, after: datetime, n: int) -> list[Fire]:
    """The next ``n`` slots of a recurring schedule after ``after`` that run, with the
    skipped slots met on the way (at most ``n`` of those too) and each slot's note.

    A cron rule's slots are searched within one search budget (:mod:`tickwork.search`):
    the list ends early where it runs out. A rule with a calendar and no slot to come
    raises NeverFires, naming it and why (``tickwork next``: exit 2)."""
    found: list[Fire] = []
    running = skipped = 0
    if isinstance(schedule, Cron):
        for fire in schedule.fires(after, days_off=n):
            if fire.skipped:
                skipped += 1
                if skipped <= n:
                    found.append(fire)
                continue
            found.append(fire)
            running += 1
            if running >= n:
                break
        if running == 0 and schedule.calendar is not None:
            schedule.first_slot(after)  # NeverFires, naming the rule and why
        return found
    slot: datetime | None = after
    while slot is not None and len(found) < n:
        slot = schedule.next_after(slot)
        if slot is not None:
            found.append(Fire(slot))
    return found


def _consumes(node: NodeRecord, queue: str) -> bool:
    """Whether a live worker claims from ``queue`` (no queues named: every queue)."""
    queues = node.info.get("queues")
    return not queues or queue in queues


class Client(Administration):
    """Submit and inspect jobs and runs on one store, checking tasks against ``registry``."""

    def __init__(
        self,
        store: Store,
        registry: Registry | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        workers: WorkerWatch | Keep | None = KEEP,
    ) -> None:
        """``clock``: what "now" is for submits and commands. The system clock (the default)
        leaves it to the store's clock; a :class:`~tickwork.testing.FakeClock` makes a
        submit ``delay=`` count from the time a test set. ``workers``: the view of the
        live workers that :meth:`submit` warns from (by default one of this client's own;
        an App shares one across the clients it makes; None: no such warning)."""
        self.store = store
        self.registry = registry if registry is not None else Registry()
        self.clock = clock
        self.workers = WorkerWatch(store) if isinstance(workers, Keep) else workers

    @classmethod
    def open(
        cls,
        db_url: str | None = None,
        registry: Registry | None = None,
        *,
        migrate: bool | None = None,
        create: bool = False,
        connect: bool = True,
    ) -> Client:
        """A client on the store at ``db_url``, else ``TICKWORK_DB``, else ``./tickwork.db``.

        ``create``: False (the default) opens a store that exists: a SQLite file that does
        not raises :class:`~tickwork.errors.StoreMissing` and nothing is created, so a
        command typed in the wrong directory says so instead of answering from a new, empty
        database. True makes it (``tickwork api``, ``tickwork db migrate``; an
        :class:`~tickwork.App` always may). ``migrate`` and ``connect``: as
        :func:`tickwork.store.open_store` (``migrate=None``: a new SQLite file is migrated,
        PostgreSQL is left to ``tickwork db migrate``)."""
        store = open_store(resolve_db_url(db_url), migrate=migrate, create=create, connect=connect)
        return cls(store, registry)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(
        self, task: str | Task[..., Any], *, conn: object | None = None, **options: Any
    ) -> Submitted:
        """Validate (see :func:`~tickwork.inputs.make_spec` for the options) and submit a
        job; with ``conn``, inside the caller's open transaction (see :meth:`submit_spec`)."""
        return self.submit_spec(make_spec(self.registry, task, **options), conn=conn)

    def submit_spec(self, spec: JobSpec, *, conn: object | None = None) -> Submitted:
        """Submit a job already validated by :func:`~tickwork.inputs.make_spec` (the CLI
        validates before it opens a database, so bad input never creates a file).

        ``conn``: write it in the caller's open transaction on the store's PostgreSQL (a
        psycopg 3 connection, a SQLAlchemy Connection or Session), so the job exists only
        if that transaction commits (see :meth:`tickwork.store.base.Store.submit`).

        Its ``warnings`` say, besides what its schedule meets (DST changes), when no live
        worker would claim its runs (none has its task, or none takes its queue) and the
        first is due within a day (:data:`WARN_WITHIN`): "no live worker has task
        send_mail: the job's runs wait, queued, until one does". The job is written all
        the same; its runs wait, spending no attempt."""
        submitted = self.store.submit(traced(spec), now=self.clock.store_now(), conn=conn)
        return with_warnings(submitted, self.workers)

    def submit_many(self, jobs: Iterable[Any], *, conn: object | None = None) -> list[Submitted]:
        """Validate and submit many jobs in one transaction: all are written, or none.

        Each job is a mapping of ``task`` and :meth:`submit`'s options, e.g.
        ``{"task": "send", "args": {"to": "a@example.com"}, "delay": "10m"}``. Every job
        is checked before the store is called; a bad one raises ValidationError with
        ``.index`` (0-based) and ``.field`` set, and nothing is written. The result has
        one Submitted per job, in order; a job whose ``idempotency_key`` the tenant
        already used (before, or earlier in this batch) is the existing job, with
        ``created`` False. ``conn``: in the caller's open transaction, as :meth:`submit_spec`."""
        return self.submit_specs(self.specs(jobs), conn=conn)

    def specs(self, jobs: Iterable[Any]) -> list[JobSpec]:
        """The validated specs of a batch (ValidationError with ``.index``, as submit_many)."""
        return job_specs(self.registry, jobs)

    def submit_specs(self, specs: list[JobSpec], *, conn: object | None = None) -> list[Submitted]:
        """Submit jobs already validated by :meth:`specs`, in one transaction (the caller's,
        with ``conn``)."""
        return self.store.submit_many(
            [traced(spec) for spec in specs], now=self.clock.store_now(), conn=conn
        )

    def schedule(
        self, task: str | Task[..., Any], *, name: str | None = None, **options: Any
    ) -> Submitted:
        """Create or update the recurring job ``name`` (default: the task's name).

        Declaring the same schedule again changes nothing, so schedules written in code
        can be synced at every start without duplicates.
        """
        if options.get("cron") is None and options.get("every") is None:
            raise ValidationError("a schedule needs cron=... or every=...", field="schedule")
        resolved = resolve_task(self.registry, task)
        spec = make_spec(self.registry, resolved, name=name or resolved.name, **options)
        return with_warnings(self.store.put_schedule(traced(spec), now=self.clock.store_now()))

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        return self.store.get_job(check_id(job_id, "job"), tenant=tenant)

    def get_run(self, run_id: int, *, tenant: str | None = None) -> Run:
        return self.store.get_run(check_id(run_id, "run"), tenant=tenant)

    def run_attempts(self, run_id: int, *, tenant: str | None = None) -> RunAttempts:
        """The run and its attempts, oldest first (one read): each one's worker, start,
        end, fencing token, why it ended (succeeded, failed, timed out, lease lost,
        released, cancelled, an injected fault) and its error and traceback; RunNotFound
        for an unknown id."""
        return self.store.run_attempts(check_id(run_id, "run"), tenant=tenant)

    def list_jobs(
        self,
        *,
        tenant: str | None = None,
        state: JobState | str | None = None,
        task: str | None = None,
        after: int | None = None,
        limit: int = DEFAULT_PAGE,
        search: str | None = None,
        recurring: bool | None = None,
    ) -> Page[Job]:
        """One page of jobs, newest first; pass ``next_cursor`` as ``after`` for the next.
        ``search``: only jobs whose name or task contains this text (any case);
        ``recurring``: True for cron and interval jobs only, False for one-off jobs only."""
        wanted = job_state(state)
        check_page(after, limit)
        if search:
            check_label("search", search)
        return self.store.list_jobs(
            tenant=tenant,
            state=wanted,
            task=task,
            after=after,
            limit=limit,
            search=search or None,
            recurring=recurring,
        )

    def list_runs(
        self,
        *,
        job_id: int | None = None,
        state: RunState | str | None = None,
        tenant: str | None = None,
        after: int | None = None,
        limit: int = DEFAULT_PAGE,
        task: str | None = None,
        queue: str | None = None,
        since: Instant | None = None,
        until: Instant | None = None,
        error: str | None = None,
    ) -> Page[Run]:
        """One page of runs matching the filters, newest first; pass ``next_cursor`` as
        ``after`` for the next. ``since`` and ``until`` bound the slot (``scheduled_for``):
        ``since <= slot < until``; aware datetimes or ISO-8601 text with an offset.
        ``error``: only runs whose error holds this text (any case)."""
        wanted = run_state(state)
        check_page(after, limit)
        return self.store.list_runs(
            state=wanted,
            after=after,
            limit=limit,
            **run_filter(
                job_id=job_id,
                tenant=tenant,
                task=task,
                queue=queue,
                since=since,
                until=until,
                error=error,
            ),
        )

    def retry_runs(
        self, *, max_count: int = DEFAULT_BULK, **where: Unpack[RunFilter[Instant]]
    ) -> list[int]:
        """Retry every dead run matching the filters (as :meth:`list_runs`): all of them,
        or, when more than ``max_count`` match, none (ValidationError). The ids retried."""
        bulk_limit(max_count)
        return self.store.retry_runs(max_count=max_count, **run_filter(**where))

    def cancel_runs(
        self, *, max_count: int = DEFAULT_BULK, **where: Unpack[RunFilter[Instant]]
    ) -> list[int]:
        """Cancel every waiting run (queued, or failed and waiting to retry) matching the
        filters: all of them, or, when more than ``max_count`` match, none
        (ValidationError). Running runs are left alone. The ids cancelled."""
        bulk_limit(max_count)
        return self.store.cancel_runs(max_count=max_count, **run_filter(**where))

    # -- commands ----------------------------------------------------------------------------

    def cancel_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        """No more slots; its waiting runs are cancelled, a running one finishes.
        Cancelling a cancelled job changes nothing."""
        return self.store.cancel_job(
            check_id(job_id, "job"), tenant=tenant, now=self.clock.store_now()
        )

    def pause_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        """No slot is triggered until :meth:`resume_job`; InvalidTransition unless active
        (or already paused)."""
        return self.store.pause_job(
            check_id(job_id, "job"), tenant=tenant, now=self.clock.store_now()
        )

    def resume_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        """Slots that fell while paused are recorded as skipped; the next one runs."""
        return self.store.resume_job(
            check_id(job_id, "job"), tenant=tenant, now=self.clock.store_now()
        )

    def trigger_job(self, job_id: int, *, tenant: str | None = None) -> Run:
        """Run the job now, once, besides its schedule (which is untouched)."""
        return self.store.trigger_job(
            check_id(job_id, "job"), tenant=tenant, now=self.clock.store_now()
        )

    def cancel_run(self, run_id: int, *, tenant: str | None = None) -> Run:
        """queued|failed|running -> cancelled (a running handler is stopped at its next
        heartbeat); InvalidTransition for a finished run."""
        return self.store.cancel_run(
            check_id(run_id, "run"), tenant=tenant, now=self.clock.store_now()
        )

    def retry_run(self, run_id: int, *, tenant: str | None = None) -> Run:
        """dead|failed -> queued now, with a fresh allowance of attempts."""
        return self.store.retry_run(
            check_id(run_id, "run"), tenant=tenant, now=self.clock.store_now()
        )

    # -- inspection --------------------------------------------------------------------------

    def dead_runs(
        self, *, tenant: str | None = None, after: int | None = None, limit: int = DEFAULT_PAGE
    ) -> Page[Run]:
        """One page of the dead-letter list (runs that are ``dead``), newest first."""
        check_page(after, limit)
        return self.store.list_runs(tenant=tenant, state=RunState.DEAD, after=after, limit=limit)

    def next_fire_times(self, job: Job, n: int = 5) -> list[datetime]:
        """The job's next ``n`` slots after now (the store's clock).

        A one-off job that has not been triggered yet: ``[at]``, whenever that is. A job
        with no slot left to trigger (cancelled, finished, a one-off job already
        triggered): ``[]``. A paused job: the slots it would get if resumed now.
        """
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_FIRE_TIMES:
            raise ValidationError(f"n must be from 1 to {MAX_FIRE_TIMES}, got {n!r}", field="n")
        if not job.state.has_slots:
            return []
        return [fire.at for fire in self.upcoming(job, n) if not fire.skipped]

    def upcoming(self, job: Job, n: int = 5) -> list[Fire]:
        """:meth:`next_fire_times` with what a DST change or the job's calendar does to
        each (``note``), and the slots they skip on the way (``skipped``, not counted)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_FIRE_TIMES:
            raise ValidationError(f"n must be from 1 to {MAX_FIRE_TIMES}, got {n!r}", field="n")
        if not job.state.has_slots:
            return []
        if isinstance(job.schedule, Once):
            return [Fire(job.next_run_at or job.schedule.first_slot(job.created_at))]
        try:
            return upcoming(job.schedule, self.now(), n)
        except NeverFires:
            return []  # a stored job whose rule fires no more: nothing to come

    def slot_ledger(
        self, job_id: int, *, tenant: str | None = None, limit: int = DEFAULT_PAGE
    ) -> list[SlotSkip]:
        """The job's skipped slots (misfire, coalesced, overlap, paused ...), newest first."""
        check_page(None, limit)
        return self.store.slot_skips(check_id(job_id, "job"), tenant=tenant, limit=limit)

    def explain(
        self, job_id: int, at: str | datetime | None = None, *, tenant: str | None = None
    ) -> Explanation:
        """Why the job did or did not run at the slot ``at``: the slot, its run or its
        ledger entry, and one paragraph (``.text``) saying so.

        ``at`` is an aware datetime or ISO-8601 text; text without an offset is read in the
        job's cron time zone (UTC for other schedules). None: the job's latest slot at or
        before now (its first slot when none has fallen yet).
        """
        job = self.get_job(job_id, tenant=tenant)
        now = self.now()
        slot = self.slot_at(job, at, now=now)
        job, runs, skips = self.store.runs_for_slot(job.id, slot, tenant=tenant)
        waiting = runs and runs[0].state in (RunState.QUEUED, RunState.FAILED)
        status = self.store.list_tenants(tenant=job.tenant)[0] if waiting else None
        task = self.store.task_status(runs[0].task) if waiting else None
        unserved = None
        if waiting and runs[0].run_at <= now:
            live = LiveWorkers.of(self.store.list_nodes(now=now), now)
            unserved = live.unserved(runs[0].task, runs[0].queue)
        leader = self.store.leader()
        until = terms_until(job, slot, runs, skips, leader=leader, now=now)
        terms = self.store.leader_terms(since=slot, until=until, now=now) if until else []
        return explain(
            job,
            slot,
            runs,
            skips,
            now=now,
            leader=leader,
            tenant=status,
            task=task,
            unserved=unserved,
            terms=terms,
        )

    @staticmethod
    def slot_at(job: Job, at: str | datetime | None, *, now: datetime) -> datetime:
        """The slot :meth:`explain` reads ``at`` as (ValidationError for bad text)."""
        if at is None:
            return latest_slot(job, now)
        if isinstance(at, datetime):
            return instant(at, "at")
        if not isinstance(at, str):
            raise ValidationError(
                f"at must be an ISO-8601 time, got {type(at).__name__}", field="at"
            )
        return parse_slot(at, job)

    def cluster(self) -> Cluster:
        """The leader lease and every registered node, by the store's clock."""
        now = self.store.now()
        return Cluster(self.store.leader(now=now), self.store.list_nodes(now=now), now)

    def forget_node(self, node_id: str) -> NodeRecord:
        """Remove a gone node from the cluster view (silent past
        :data:`~tickwork.records.NODE_GONE_AFTER`), returning it as it was: NodeNotFound
        for an unknown id, NodeAlive (nothing changes) for a node not gone yet."""
        check_label("node", node_id)
        return self.store.forget_node(node_id)

    def leader(self) -> Lease | None:
        """The scheduler leader lease, or None when no scheduler leads. A read only, unlike
        :meth:`cluster`, whose node listing also forgets stale nodes (a write): for views
        polled every few seconds, such as the dashboard's overview."""
        return self.store.leader()

    def presence(self, kind: str, node_id: str) -> Presence:
        """A service that shows this process in the cluster view as ``kind`` (``api``),
        with its clock offset, while it runs: ``start()`` it, ``stop()`` it."""
        return Presence(self.store, kind, node_id)

    def store_health(self) -> dict[str, Any]:
        """This process's view of the database: ``{"up", "outages", "reconnects"}`` (see
        :mod:`tickwork.store.health`). Read in memory: it answers when the store does not."""
        return self.store.health.snapshot()

    def schema_version(self) -> tuple[int, int]:
        """(applied, latest) schema version of the store: behind means migrations pending."""
        return self.store.schema_version()

    def migrate(self) -> list[int]:
        """Apply pending schema migrations; the versions applied (safe from several hosts
        at once: they serialise on a lock)."""
        return self.store.migrate()

    def now(self) -> datetime:
        """The store's clock: the time every due-ness and lease is judged by (a test
        clock's time, with one)."""
        return self.clock.store_now() or self.store.now()

    def run_stats(self, *, tenant: str | None = None) -> RunStats:
        """Runs by state, the due backlog and recent trigger lag."""
        return self.store.run_stats(tenant=tenant)

    def run_totals(self) -> RunTotals:
        """Cluster-wide totals since the store was made, over every tenant: runs finished
        by task, queue and outcome, failed attempts, and per queue the histograms of
        execution duration and start lag (``/metrics``' counters; see RunTotals)."""
        return self.store.run_totals()

    def job_names(self, job_ids: Iterable[int], *, tenant: str | None = None) -> dict[int, str]:
        """The names of the named jobs among ``job_ids`` (a job without a name, or of
        another tenant, is left out): for tables of runs. One read per distinct id."""
        names = {}
        for job_id in set(job_ids):
            try:
                job = self.store.get_job(check_id(job_id, "job"), tenant=tenant)
            except NotFound:
                continue
            if job.name:
                names[job.id] = job.name
        return names

    def run_minutes(
        self, window: timedelta, *, tenant: str | None = None, queue: str | None = None
    ) -> tuple[datetime, list[RunMinute]]:
        """The per-minute rollup over the last ``window`` (at most ROLLUP_KEEP): the
        store's now and the minutes with anything in them, oldest first."""
        if not timedelta(minutes=1) <= window <= ROLLUP_KEEP:
            raise ValidationError(f"window must be 1 min to {ROLLUP_KEEP}", field="window")
        now = self.store.now()
        since = now.replace(second=0, microsecond=0) - window
        return now, self.store.run_minutes(since, tenant=tenant, queue=queue)

    def queues(self, *, tenant: str | None = None) -> list[QueueStatus]:
        """Every queue with runs waiting or running, or a live worker consuming it: its due
        backlog, running count, oldest due run, the live workers that claim from it (a
        worker started without ``--queue`` claims from every queue) and, by task, its due
        runs that no live worker would claim (``unserved``: none of its workers has the
        task; they wait, queued, until one does)."""
        now = self.store.now()
        stats = {q.queue: q for q in self.store.queue_stats(tenant=tenant, now=now)}
        nodes = self.store.list_nodes(now=now)
        live = [
            n
            for n in nodes
            if isinstance(n.info, dict) and "queues" in n.info and not n.silent(now)
        ]
        named = {q for n in live for q in (n.info.get("queues") or ())}
        for queue in named - stats.keys():
            stats[queue] = QueueStatus(queue, 0, 0, None)
        unserved: dict[str, list[Unserved]] = {}
        for u in self._unserved(LiveWorkers.of(nodes, now), tenant, now):
            unserved.setdefault(u.queue, []).append(u)
        return [
            replace(
                status,
                workers=sorted(n.id for n in live if _consumes(n, status.queue)),
                unserved=unserved.get(status.queue, []),
            )
            for _, status in sorted(stats.items())
        ]

    def unserved(
        self, *, tenant: str | None = None, cluster: Cluster | None = None
    ) -> list[Unserved]:
        """Due runs that no live worker would claim now, by queue and task, with why (none
        of the queue's live workers has the task, or runs shell commands): they wait,
        queued, spending no attempt, until such a worker starts. ``tickwork_unserved_runs``
        on ``/metrics``. ``cluster``: the nodes as :meth:`cluster` just read them (not read
        again)."""
        if cluster is None:
            cluster = self.cluster()
        live = LiveWorkers.of(cluster.nodes, cluster.now)
        return self._unserved(live, tenant, cluster.now)

    def _unserved(self, live: LiveWorkers, tenant: str | None, now: datetime) -> list[Unserved]:
        found = []
        for backlog in self.store.due_tasks(tenant=tenant, now=now):
            reason = live.unserved(backlog.task, backlog.queue)
            if reason is not None:
                found.append(
                    Unserved(
                        backlog.queue, backlog.task, backlog.due, backlog.oldest_due_at, reason
                    )
                )
        return found
