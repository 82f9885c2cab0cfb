"""What callers type, checked: loose input (a task name, JSON args, ``--in 10s``,
``cron=...``, seconds or durations, policy names, ids, page sizes) becomes a validated
:class:`~tickwork.job.JobSpec` or value, or a :class:`~tickwork.errors.ValidationError`
that names the field.

Every interface (the Python API, the CLI, the HTTP API) checks through these, so each says
the same thing about bad input, and before anything is written. Task names are checked
against a :class:`~tickwork.worker.registry.Registry`: its tasks and the built-ins ``shell``
and ``http``; a task's args against its handler's signature (and, for built-ins, their
types), so a job that no worker could run is refused at submit rather than found dead later.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import Enum
from typing import Any, TypeVar

from tickwork.errors import ValidationError
from tickwork.job import (
    DEFAULT_MISFIRE_GRACE,
    DEFAULT_QUEUE,
    DEFAULT_TENANT,
    JobSpec,
    JobState,
    MisfirePolicy,
    OverlapPolicy,
    RunState,
    check_args,
    check_label,
)
from tickwork.records import (
    MAX_PAGE,
)
from tickwork.retry import (
    DEFAULT_BACKOFF_BASE,
    DEFAULT_BACKOFF_CAP,
    DEFAULT_MAX_ATTEMPTS,
    RetryPolicy,
)
from tickwork.schedule import (
    Cron,
    Interval,
    Once,
    Schedule,
    check_instant,
    parse_duration,
    parse_instant,
)
from tickwork.worker.registry import Registry
from tickwork.worker.task import Task

Duration = timedelta | float | int | str
"""A length of time: a timedelta, seconds, or text such as ``"90s"``, ``"10m"``, ``"1h30m"``."""
Instant = datetime | str
"""A point in time: an aware datetime, or ISO-8601 text with an offset."""
Backoff = RetryPolicy | tuple[float, float]
"""Exponential backoff: a RetryPolicy, or ``(base, cap)`` in seconds."""
E = TypeVar("E", bound=Enum)
MAX_ID = 2**63 - 1
"""Ids are 64-bit signed integers in every store; a larger number names no row."""


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
    """An aware datetime or ISO-8601 text as UTC, within the range every input time keeps
    (:func:`tickwork.schedule.check_instant`), or ValidationError."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValidationError(
                f"{field} {value.isoformat()} has no time zone (pass an aware datetime)",
                field=field,
            )
        return check_instant(value, field=field)
    if not isinstance(value, str):
        raise ValidationError(
            f"{field} must be a datetime or ISO-8601 text, got {type(value).__name__}",
            field=field,
        )
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


def job_state(value: JobState | str | None) -> JobState | None:
    """A job state from its name, or ValidationError naming the allowed ones."""
    return None if value is None else _choice(JobState, value, "state", JobState.ACTIVE)


def check_id(value: int, what: str = "id") -> int:
    """``value`` if it could name a row (a 64-bit integer), else ValidationError.

    Zero and negative numbers pass: they name no row, which the store reports as NotFound
    like any other unknown id.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{what} must be an integer, got {value!r}", field=what)
    if not -MAX_ID <= value <= MAX_ID:
        raise ValidationError(f"{what} {value} is out of range", field=what)
    return value


def check_page(after: int | None, limit: int) -> None:
    """``after`` is an id (or None); ``limit`` is 1 to MAX_PAGE."""
    if after is not None:
        check_id(after, "after")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ValidationError(
            f"limit must be an integer from 1 to {MAX_PAGE}, got {limit!r}", field="limit"
        )


def run_filter(
    *,
    job_id: int | None,
    tenant: str | None,
    task: str | None,
    queue: str | None,
    since: Instant | None,
    until: Instant | None,
) -> dict[str, Any]:
    """The filters of a run listing or bulk command, checked, as the store takes them
    (``since <= scheduled_for < until``), or ValidationError."""
    if job_id is not None:
        check_id(job_id, "job")
    for field, text in (("task", task), ("queue", queue), ("tenant", tenant)):
        if text:  # empty: no filter
            check_label(field, text)
    start = instant(since, "since") if since is not None else None
    end = instant(until, "until") if until is not None else None
    if start is not None and end is not None and end <= start:
        raise ValidationError("until must be after since", field="until")
    return {
        "job_id": job_id,
        "tenant": tenant or None,
        "task": task or None,
        "queue": queue or None,
        "since": start,
        "until": end,
    }
