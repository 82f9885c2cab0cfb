"""The Python API: declare tasks, submit and schedule jobs.

::

    from datetime import timedelta
    from tickwork import App, Retry

    app = App()                                   # ./tickwork.db, or TICKWORK_DB

    @app.task(max_attempts=5, backoff=(2, 60), timeout=30)
    def send_report(ctx, to: str):
        ctx.logger.info("sending to %s (attempt %d)", to, ctx.attempt)

    app.submit(send_report, args={"to": "ops@example.com"}, delay=timedelta(minutes=10))
    app.schedule(send_report, cron="0 9 * * MON-FRI", tz="Europe/Berlin",
                 name="daily-report", args={"to": "ops@example.com"})

Tenants' limits (``docs/tenants.md``) go through the app's client::

    app.client.set_tenant_limits("acme", max_running=5, rate="20/s", burst=40, weight=2)
    app.client.tenant("acme").held             # due runs a limit keeps waiting now

Workers run the tasks: ``tickwork worker --app myapp.tasks`` imports the module and runs
the tasks its ``App`` registered. ``app.schedule`` creates the named schedule or updates
it in place, so declaring schedules at import time syncs them at every start without
duplicates.

This module is a thin facade: validation and the JobSpec are built by
:mod:`tickwork.client`, which the CLI and the HTTP API share.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, Unpack, overload

from tickwork.client import Client
from tickwork.clock import SYSTEM_CLOCK, Clock
from tickwork.config import Config, resolve_db_url
from tickwork.errors import ValidationError
from tickwork.inputs import (
    Backoff,
    CronRules,
    Duration,
    Instant,
    duration,
    parse_rate,
    retry_policy,
)
from tickwork.job import Job, MisfirePolicy, OverlapPolicy
from tickwork.presence import WorkerWatch
from tickwork.records import TaskLimits, check_task_limits
from tickwork.retry import RetryPolicy
from tickwork.schedule import DstWarning
from tickwork.store import Store, open_store
from tickwork.tasks.registry import Registry
from tickwork.tasks.task import Context, Discard, Retry, Task, TaskDefaults

if TYPE_CHECKING:
    from tickwork.worker import Worker

log = logging.getLogger("tickwork")

P = ParamSpec("P")
R = TypeVar("R")


class App:
    """Tasks, and the store jobs go to: ``db_url``, else ``TICKWORK_DB``, else
    ``sqlite:///./tickwork.db``. The store is opened on first use, not at import.

    An app owns its store: the first use creates one that does not exist yet (a SQLite file
    and its directory, migrated), so a new user's first ``app.submit`` just works, as
    ``tickwork run`` and ``tickwork worker`` do. That first use may be a read too: code that
    only looks at a store somebody else made (a report, a script) should open
    ``Client.open(url)`` instead, which refuses a missing store (``StoreMissing``) and creates
    nothing, as the CLI's read commands do. A PostgreSQL database is never created; its
    schema comes from ``tickwork db migrate``.

    ``clock``: the time submits and the app's workers go by; the system clock (the store's
    own time) unless a test sets a :class:`~tickwork.testing.FakeClock`."""

    def __init__(
        self,
        db_url: str | None = None,
        *,
        config: Config | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if config is None:
            config = Config.from_env(db_url=resolve_db_url(db_url))
        elif db_url is not None:
            config = replace(config, db_url=db_url)
        self.config = config
        self.registry = Registry()
        self.clock = clock
        self._store: Store | None = None
        self._workers: WorkerWatch | None = None
        self._lock = threading.Lock()

    @property
    def store(self) -> Store:
        with self._lock:
            if self._store is None:
                self._store = open_store(self.config.db_url)
            return self._store

    @property
    def client(self) -> Client:
        return Client(self.store, self.registry, clock=self.clock, workers=self._worker_watch())

    def _worker_watch(self) -> WorkerWatch | None:
        """The view of the live workers this app's submits warn from, shared by the clients
        it makes; None on a test's clock (the test kit runs runs itself: no worker of its
        is ever live)."""
        if self.clock is not SYSTEM_CLOCK:
            return None
        store = self.store
        with self._lock:
            if self._workers is None or self._workers.store is not store:
                self._workers = WorkerWatch(store)
            return self._workers

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tasks -----------------------------------------------------------------------------

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        timeout: Duration | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_running: int | None = None,
        rate: float | str | None = None,
        burst: int | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        name: str | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        timeout: Duration | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_running: int | None = None,
        rate: float | str | None = None,
        burst: int | None = None,
    ) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
        """Register a handler ``def f(ctx, **args)`` (or ``async def``) as a task.

        Bare (``@app.task``) or with defaults for the task's jobs: ``name`` (default: the
        function's name), ``max_attempts`` (default 3), ``backoff`` as ``(base, cap)``
        seconds or a RetryPolicy (default (1, 300): waits up to 1, 2, 4 ... s, capped at
        5 min), ``timeout`` (seconds or a timedelta; default none), ``queue``,
        ``priority``. A submit may override each.

        ``max_running``: at most this many runs of the task execute at once, across every
        worker (``1``: a cluster-wide mutex). A run whose worker died counts until its
        lease expires and it is rescued. ``rate``: at most this many runs of the task
        start a second, across every worker, as a tenant's rate: runs per second, or text
        (``"10/s"``, ``"30/m"``, ``"100/h"``); a token bucket of ``burst`` starts (unset:
        one second's worth, at least 1). ``rate=10, burst=20``: a backlog starts 20 runs at
        once, then 10 a second. Either limit or both; a run starts only when its task and
        its tenant both have room. A bad value (a rate of 0, a burst below 1 or without a
        rate) raises ValidationError here, at import. Each worker records its tasks' limits
        in the store before its first claim; the newest worker's code wins.
        """
        policy = retry_policy(max_attempts, backoff)  # validates now, at import
        explicit_attempts = max_attempts is not None or isinstance(backoff, RetryPolicy)
        per_second = parse_rate(rate) if rate is not None else None
        limits = check_task_limits(TaskLimits(max_running, per_second, burst))
        defaults = TaskDefaults(
            max_attempts=policy.max_attempts if explicit_attempts else None,
            backoff=(policy.backoff_base, policy.backoff_cap) if backoff is not None else None,
            timeout=duration(timeout, "timeout") if timeout is not None else None,
            queue=queue,
            priority=priority,
            max_running=limits.max_running,
            rate=limits.rate,
            burst=limits.burst,
        )

        def register(handler: Callable[P, R]) -> Task[P, R]:
            if not callable(handler):
                raise ValidationError(f"@app.task needs a function, got {handler!r}")
            task = Task(name or handler.__name__, handler, defaults)
            self.registry.add(task)
            return task

        return register(fn) if fn is not None else register

    # -- jobs ------------------------------------------------------------------------------

    def submit(
        self,
        task: str | Task[..., Any],
        args: dict[str, Any] | None = None,
        *,
        at: Instant | None = None,
        delay: Duration | None = None,
        name: str | None = None,
        tenant: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        timeout: Duration | None = None,
        idempotency_key: str | None = None,
        conn: object | None = None,
    ) -> Job:
        """Submit a one-off job: now, ``at`` an instant, or after ``delay``. Durable when
        this returns. With an ``idempotency_key`` the tenant already used, the existing job
        is returned and nothing is written.

        ``conn``: write the job inside your own open transaction on the store's PostgreSQL
        (the outbox pattern): a psycopg 3 connection (Django: ``connection.connection``),
        or a SQLAlchemy ``Connection`` or ``Session``. The job exists only if you commit;
        workers are woken at the commit::

            with psycopg.connect(url) as conn:     # one transaction, committed at the end
                conn.execute("INSERT INTO orders ...")
                app.submit(send_receipt, {"order": 42}, conn=conn)
        """
        if at is not None and delay is not None:
            raise ValidationError("give at most one of at= and delay=", field="schedule")
        client = self.client
        submitted = client.submit(
            task,
            args=args,
            at=at,
            delay=delay,
            name=name,
            tenant=tenant,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            backoff=backoff,
            timeout=timeout,
            idempotency_key=idempotency_key,
            conn=conn,
        )
        # A one-off job's only warning: no live worker would claim its run (logged once a
        # minute at most: an app may submit such jobs many times a second).
        for message in submitted.warnings:
            if client.workers is None or client.workers.first_in_a_while(message):
                log.warning("submitted job %d: %s", submitted.job.id, message)
        return submitted.job

    def submit_many(
        self, jobs: Iterable[Mapping[str, Any]], *, conn: object | None = None
    ) -> list[Job]:
        """Submit many jobs in one transaction: all of them, or (on any error) none.

        Each job is a dict of ``task`` (a name or a Task) and :meth:`submit`'s options::

            app.submit_many([
                {"task": send_report, "args": {"to": "a@example.com"}},
                {"task": "send_report", "args": {"to": "b@example.com"}, "delay": "10m",
                 "idempotency_key": "report-b"},
            ])

        Returns the jobs in order; where an ``idempotency_key`` matched (a job submitted
        before, or an earlier one of this batch), the existing job. A bad job raises
        ValidationError whose ``index`` is its position and ``field`` the option at fault.
        Jobs due now get their run in the same transaction, so workers start them at once.
        ``conn``: inside your own open transaction, as in :meth:`submit`.
        """
        return [s.job for s in self.client.submit_many(jobs, conn=conn)]

    def schedule(
        self,
        task: str | Task[..., Any],
        *,
        cron: str | None = None,
        every: Duration | None = None,
        tz: str | None = None,
        anchor: datetime | None = None,
        name: str | None = None,
        args: dict[str, Any] | None = None,
        misfire: MisfirePolicy | str | None = None,
        misfire_grace: Duration | None = None,
        overlap: OverlapPolicy | str | None = None,
        tenant: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        timeout: Duration | None = None,
        **cron_rules: Unpack[CronRules],
    ) -> Job:
        """Create or update the recurring job ``name`` (default: the task's name) to run
        on ``cron`` (in ``tz``, default UTC) or ``every`` interval. The same declaration
        again changes nothing.

        Cron only (``cron_rules``): ``dst_gap`` (``"run-after"``/``"skip"``) and ``dst_repeat``
        (``"once"``/``"twice"``) choose what a slot in a DST gap or repeated hour does
        (default: Debian cron's rules, docs/time.md); ``calendar`` names a stored calendar,
        with ``on_holiday`` (``"skip"``, the default, ``"next-business-day"``,
        ``"previous-business-day"``) or ``business_day`` (n-th business day of the month,
        -1 the last); ``business_days_only`` is short for ``on_holiday="skip"``. A schedule
        that meets a DST change within a year warns (:class:`~tickwork.schedule.DstWarning`,
        naming the date); the job is written all the same."""
        if (cron is None) == (every is None):
            raise ValidationError(
                "a schedule takes exactly one of cron= and every=", field="schedule"
            )
        submitted = self.client.schedule(
            task,
            cron=cron,
            every=every,
            tz=tz,
            anchor=anchor,
            name=name,
            args=args,
            misfire=misfire,
            misfire_grace=misfire_grace,
            overlap=overlap,
            tenant=tenant,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            backoff=backoff,
            timeout=timeout,
            **cron_rules,
        )
        for message in submitted.warnings:
            warnings.warn(message, DstWarning, stacklevel=2)
        return submitted.job

    # -- running ---------------------------------------------------------------------------

    def worker(self, **overrides: Any) -> Worker:
        """A worker for this app's tasks on its store (not started). ``overrides`` replace
        config fields: ``app.worker(concurrency=4, allow_shell=True)``."""
        from tickwork.worker import Worker  # here: a client of the app loads no worker

        return Worker(self.store, self.registry, replace(self.config, **overrides), self.clock)


def load_app(spec: str) -> App:
    """The App named by ``module`` or ``module:attribute`` (the ``--app`` option).

    Without an attribute, the module's only App is taken. The current directory is put
    on ``sys.path`` first, as ``python -m`` would, so ``--app tasks`` finds ``./tasks.py``.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name:
        raise ValidationError(f"--app {spec!r} names no module", field="app")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValidationError(
            f"cannot import app module {module_name!r}: {exc}", field="app"
        ) from None
    if attribute:
        found = getattr(module, attribute, None)
        if not isinstance(found, App):
            raise ValidationError(f"{spec!r} is not an App", field="app")
        return found
    apps = [v for v in vars(module).values() if isinstance(v, App)]
    if len(apps) != 1:
        raise ValidationError(
            f"module {module_name!r} defines {len(apps)} Apps; name one as {module_name}:NAME",
            field="app",
        )
    return apps[0]


__all__ = ["App", "Context", "Discard", "Retry", "Task", "load_app"]
