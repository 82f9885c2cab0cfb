"""The one API that apps, the CLI and the HTTP API call to submit and inspect work.

It turns loose user input (a task name, JSON args, ``--in 10s``, ``cron=...``, seconds or
durations, policy names) into a validated :class:`~tickwork.job.JobSpec` and hands it to
the store, so every interface validates the same way and says the same thing about bad
input. Every check happens before the store is called: bad input raises a
:class:`~tickwork.errors.ValidationError` and writes nothing.

Task names are checked against a :class:`~tickwork.worker.registry.Registry`: its tasks
and the built-ins ``shell`` and ``http``. A task's args are checked against its handler's
signature (and, for built-ins, their types), so a job that no worker could run is refused
at submit rather than discovered dead later.

No SQL here and no concrete store: the store comes from :func:`tickwork.store.open_store`.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, TypeVar

from tickwork.config import resolve_db_url
from tickwork.errors import ValidationError
from tickwork.job import (
    DEFAULT_MISFIRE_GRACE,
    DEFAULT_QUEUE,
    DEFAULT_TENANT,
    Job,
    JobSpec,
    MisfirePolicy,
    OverlapPolicy,
    Run,
    RunState,
    check_args,
)
from tickwork.retry import (
    DEFAULT_BACKOFF_BASE,
    DEFAULT_BACKOFF_CAP,
    DEFAULT_MAX_ATTEMPTS,
    RetryPolicy,
)
from tickwork.schedule import Cron, Interval, Once, Schedule, parse_duration, parse_instant
from tickwork.store import Store, open_store
from tickwork.store.base import DEFAULT_PAGE, Submitted
from tickwork.worker.registry import Registry
from tickwork.worker.task import Task

Duration = timedelta | float | int | str
"""A length of time: a timedelta, seconds, or text such as ``"90s"``, ``"10m"``, ``"1h30m"``."""
Instant = datetime | str
"""A point in time: an aware datetime, or ISO-8601 text with an offset."""
Backoff = RetryPolicy | tuple[float, float]
"""Exponential backoff: a RetryPolicy, or ``(base, cap)`` in seconds."""
E = TypeVar("E", bound=Enum)


def make_spec(
    registry: Registry,
    task: str | Task[..., Any],
    *,
    args: dict[str, Any] | None = None,
    at: Instant | None = None,
    delay: Duration | None = None,
    cron: str | None = None,
    tz: str | None = None,
    every: Duration | None = None,
    anchor: Instant | None = None,
    name: str | None = None,
    tenant: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    backoff: Backoff | None = None,
    timeout: Duration | None = None,
    misfire: MisfirePolicy | str | None = None,
    misfire_grace: Duration | None = None,
    overlap: OverlapPolicy | str | None = None,
    idempotency_key: str | None = None,
) -> JobSpec:
    """A validated JobSpec for ``task``, with the task's defaults where the caller gave none.

    The schedule is at most one of ``at``, ``delay``, ``cron`` (with ``tz``, default UTC)
    or ``every`` (with an optional ``anchor``); none means *now*.
    """
    resolved = resolve_task(registry, task)
    args = {} if args is None else args
    check_args(args)
    resolved.check_args(args)
    defaults = resolved.defaults
    retry = retry_policy(
        max_attempts if max_attempts is not None else defaults.max_attempts,
        backoff if backoff is not None else defaults.backoff,
    )
    return JobSpec(
        task=resolved.name,
        schedule=make_schedule(at=at, delay=delay, cron=cron, tz=tz, every=every, anchor=anchor),
        args=args,
        tenant=tenant or DEFAULT_TENANT,
        name=name,
        queue=queue or defaults.queue or DEFAULT_QUEUE,
        priority=priority if priority is not None else (defaults.priority or 0),
        retry=retry,
        timeout=duration(timeout, "timeout") if timeout is not None else defaults.timeout,
        misfire=_choice(MisfirePolicy, misfire, "misfire", MisfirePolicy.ONCE),
        misfire_grace=(
            duration(misfire_grace, "misfire_grace")
            if misfire_grace is not None
            else DEFAULT_MISFIRE_GRACE
        ),
        overlap=_choice(OverlapPolicy, overlap, "overlap", OverlapPolicy.ALLOW),
        idempotency_key=idempotency_key,
    )


def resolve_task(registry: Registry, task: str | Task[..., Any]) -> Task[..., Any]:
    """The registered task, or UnknownTask (a Task object must be this registry's)."""
    name = task.name if isinstance(task, Task) else task
    if not isinstance(name, str):
        raise ValidationError(f"task must be a name or a task, got {type(task).__name__}")
    found = registry.get(name)
    if isinstance(task, Task) and found is not task:
        raise ValidationError(f"task {name!r} is registered to another function", field="task")
    return found


def make_schedule(
    *,
    at: Instant | None = None,
    delay: Duration | None = None,
    cron: str | None = None,
    tz: str | None = None,
    every: Duration | None = None,
    anchor: Instant | None = None,
) -> Schedule:
    """The one schedule the arguments describe; none of them means *now*."""
    given = [
        k
        for k, v in (("at", at), ("delay", delay), ("cron", cron), ("every", every))
        if v is not None
    ]
    if len(given) > 1:
        raise ValidationError(
            f"give at most one schedule, got {' and '.join(given)}", field="schedule"
        )
    if tz is not None and cron is None:
        raise ValidationError("a time zone applies only to a cron schedule", field="tz")
    if anchor is not None and every is None:
        raise ValidationError("an anchor applies only to an interval schedule", field="anchor")
    if cron is not None:
        return Cron(cron, tz or "UTC")
    if every is not None:
        return Interval(duration(every, "every"), instant(anchor, "anchor") if anchor else None)
    if at is not None:
        return Once(at=instant(at, "at"))
    return Once(delay=duration(delay, "delay") if delay is not None else timedelta(0))


def duration(value: Duration, field: str) -> timedelta:
    """A timedelta from a timedelta, seconds or ``"10m"``; never negative."""
    if isinstance(value, timedelta):
        result = value
    elif isinstance(value, bool):
        raise ValidationError(f"{field} must be a duration, got {value!r}", field=field)
    elif isinstance(value, int | float):
        result = timedelta(seconds=value)
    elif isinstance(value, str):
        return parse_duration(value, field=field)
    else:
        raise ValidationError(
            f"{field} must be a duration, got {type(value).__name__}", field=field
        )
    if result < timedelta(0):
        raise ValidationError(f"{field} must not be negative", field=field)
    return result


def instant(value: Instant, field: str) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValidationError(
                f"{field} {value.isoformat()} has no time zone (pass an aware datetime)",
                field=field,
            )
        return value
    return parse_instant(value, field=field)


def retry_policy(max_attempts: int | None, backoff: Backoff | None) -> RetryPolicy:
    if isinstance(backoff, RetryPolicy):
        if max_attempts is None:
            return backoff
        base, cap = backoff.backoff_base, backoff.backoff_cap
    elif backoff is not None:
        try:
            base, cap = (float(x) for x in backoff)
        except (TypeError, ValueError):
            raise ValidationError(
                f"backoff must be (base, cap) in seconds or a RetryPolicy, got {backoff!r}",
                field="backoff",
            ) from None
    else:
        base, cap = DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_CAP
    attempts = max_attempts if max_attempts is not None else DEFAULT_MAX_ATTEMPTS
    if isinstance(attempts, bool) or not isinstance(attempts, int):
        raise ValidationError(
            f"max_attempts must be an integer, got {attempts!r}", field="max_attempts"
        )
    return RetryPolicy(max_attempts=attempts, backoff_base=base, backoff_cap=cap)


def _choice(kind: type[E], value: E | str | None, field: str, default: E) -> E:
    if value is None:
        return default
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in kind)
        raise ValidationError(
            f"{field} must be one of {allowed}, got {value!r}", field=field
        ) from None


def run_state(value: RunState | str | None) -> RunState | None:
    """A run state from its name, or ValidationError naming the allowed ones."""
    return None if value is None else _choice(RunState, value, "state", RunState.QUEUED)


class Client:
    """Submit and inspect jobs and runs on one store, checking tasks against ``registry``."""

    def __init__(self, store: Store, registry: Registry | None = None) -> None:
        self.store = store
        self.registry = registry if registry is not None else Registry()

    @classmethod
    def open(cls, db_url: str | None = None, registry: Registry | None = None) -> Client:
        """A client on ``db_url``, else ``TICKWORK_DB``, else ``./tickwork.db``."""
        return cls(open_store(resolve_db_url(db_url)), registry)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, task: str | Task[..., Any], **options: Any) -> Submitted:
        """Validate (see :func:`make_spec` for the options) and submit a job."""
        return self.store.submit(make_spec(self.registry, task, **options))

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
        return self.store.put_schedule(spec)

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        return self.store.get_job(job_id, tenant=tenant)

    def get_run(self, run_id: int, *, tenant: str | None = None) -> Run:
        return self.store.get_run(run_id, tenant=tenant)

    def list_runs(
        self,
        *,
        job_id: int | None = None,
        state: RunState | str | None = None,
        tenant: str | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> list[Run]:
        """The newest ``limit`` runs matching the filters, newest first."""
        if limit < 1:
            raise ValidationError(f"limit must be at least 1, got {limit}", field="limit")
        wanted = run_state(state)
        runs: list[Run] = []
        after: int | None = None
        while len(runs) < limit:
            page = self.store.list_runs(
                tenant=tenant,
                job_id=job_id,
                state=wanted,
                after=after,
                limit=min(limit - len(runs), 1000),
            )
            runs.extend(page.items)
            if page.next_cursor is None:
                break
            after = page.next_cursor
        return runs


def to_json(value: Job | Run) -> dict[str, Any]:
    """A job or run as a JSON-ready dict: times in ISO-8601 UTC, durations in seconds."""
    raw = asdict(value)
    if isinstance(value, Job):
        raw["schedule"] = value.schedule.to_json()
    return {k: _jsonable(v) for k, v in raw.items()}


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
