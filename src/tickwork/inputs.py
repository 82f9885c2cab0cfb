"""What callers type, checked: loose input (a task name, JSON args, ``--in 10s``,
``cron=...``, seconds or durations, policy names, ids, page sizes) becomes a validated
:class:`~tickwork.job.JobSpec` or value, or a :class:`~tickwork.errors.ValidationError`
that names the field.

Every interface (the Python API, the CLI, the HTTP API) checks through these, so each says
the same thing about bad input, and before anything is written. Task names are checked
against a :class:`~tickwork.tasks.registry.Registry`: its tasks and the built-ins ``shell``
and ``http``; a task's args against its handler's signature (and, for built-ins, their
types), so a job that no worker could run is refused at submit rather than found dead later.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, TypedDict, TypeVar

from tickwork.calendar import HolidayPolicy, check_business_day, check_name
from tickwork.cron import DstGap, DstRepeat
from tickwork.errors import ValidationError
from tickwork.job import (
    DEFAULT_MISFIRE_GRACE,
    DEFAULT_QUEUE,
    DEFAULT_TENANT,
    RETIRED_JOB_STATES,
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
    RATE_CEILING,
    RATE_FLOOR,
    RATE_UNITS,
    check_rate,
    plain,
)
from tickwork.retry import (
    DEFAULT_BACKOFF_BASE,
    DEFAULT_BACKOFF_CAP,
    DEFAULT_MAX_ATTEMPTS,
    RetryPolicy,
)
from tickwork.schedule import Cron, Interval, Once, Schedule
from tickwork.tasks.registry import Registry
from tickwork.tasks.task import Task
from tickwork.timetext import check_instant, parse_duration, parse_instant

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
    **cron_rules: Any,
) -> JobSpec:
    """A validated JobSpec for ``task``, with the task's defaults where the caller gave none.

    The schedule is at most one of ``at``, ``delay``, ``cron`` (with ``tz``, default UTC)
    or ``every`` (with an optional ``anchor``); none means *now*. ``cron_rules`` are a cron
    schedule's DST policy and calendar (see :func:`cron_schedule`).
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
        schedule=make_schedule(
            at=at, delay=delay, cron=cron, tz=tz, every=every, anchor=anchor, **cron_rules
        ),
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


def job_spec(registry: Registry, job: object) -> JobSpec:
    """A validated JobSpec from one job of a batch: a mapping of ``task`` and the keyword
    options of :func:`make_spec` (``{"task": "send", "args": {...}, "delay": "10m"}``), as
    ``submit_many`` and ``tickwork submit --file`` take them. An unknown key is refused
    (a typo must not be ignored)."""
    if not isinstance(job, Mapping):
        raise ValidationError(
            f"a job must be an object of submit's options, got {type(job).__name__}",
            field="job",
        )
    unknown = [k for k in job if k not in JOB_KEYS]
    if unknown:
        raise ValidationError(
            f"{unknown[0]!r} is not a submit option (known: {', '.join(sorted(JOB_KEYS))})",
            field=str(unknown[0]),
        )
    if "task" not in job:
        raise ValidationError("a job needs a task", field="task")
    options = dict(job)
    return make_spec(registry, options.pop("task"), **options)


def job_specs(registry: Registry, jobs: Iterable[Any]) -> list[JobSpec]:
    """:func:`job_spec` for each job of a batch; a bad one raises its ValidationError with
    ``.index`` set to its position."""
    specs: list[JobSpec] = []
    for i, job in enumerate(jobs):
        try:
            specs.append(job_spec(registry, job))
        except ValidationError as exc:
            raise exc.at(i) from None
    return specs


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
    **cron_rules: Any,
) -> Schedule:
    """The one schedule the arguments describe; none of them means *now*. ``cron_rules``
    (:func:`cron_schedule`'s) apply to a cron schedule only."""
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
        return cron_schedule(cron, tz or "UTC", **cron_rules)
    given_rules = [k for k, v in cron_rules.items() if v is not None and v is not False]
    if given_rules:
        raise ValidationError(
            f"{given_rules[0]} applies only to a cron schedule", field=given_rules[0]
        )
    if every is not None:
        return Interval(duration(every, "every"), instant(anchor, "anchor") if anchor else None)
    if at is not None:
        return Once(at=instant(at, "at"))
    return Once(delay=duration(delay, "delay") if delay is not None else timedelta(0))


class CronRules(TypedDict, total=False):
    """A cron schedule's DST policy and calendar rules, as keywords (:func:`cron_schedule`
    documents them); a None or False one is as if not given."""

    dst_gap: DstGap | str | None
    dst_repeat: DstRepeat | str | None
    calendar: str | None
    on_holiday: HolidayPolicy | str | None
    business_day: int | None
    business_days_only: bool


def cron_schedule(
    expr: str,
    tz: str = "UTC",
    *,
    dst_gap: DstGap | str | None = None,
    dst_repeat: DstRepeat | str | None = None,
    calendar: str | None = None,
    on_holiday: HolidayPolicy | str | None = None,
    business_day: int | None = None,
    business_days_only: bool = False,
) -> Cron:
    """A cron schedule with its DST policy (None: Debian cron's) and calendar rules.

    ``business_days_only`` is short for ``on_holiday="skip"``: with another ``on_holiday``
    or a ``business_day`` it is a conflict (ValidationError), not a silent override.
    """
    if not isinstance(business_days_only, bool):
        raise ValidationError(
            f"business_days_only must be true or false, got {business_days_only!r}",
            field="business_days_only",
        )
    if business_days_only:
        if on_holiday is not None or business_day is not None:
            other = "on_holiday" if on_holiday is not None else "business_day"
            raise ValidationError(
                f"business_days_only is short for on_holiday=skip: give it or {other}, not both",
                field="business_days_only",
            )
        if calendar is None:
            raise ValidationError(
                "business_days_only needs a calendar (tickwork calendars create ...)",
                field="calendar",
            )
        on_holiday = HolidayPolicy.SKIP
    if calendar is not None:
        check_name(calendar)
    if business_day is not None:
        check_business_day(business_day)
    return Cron(
        expr,
        tz,
        dst_gap=dst_gap,  # type: ignore[arg-type]  # Cron checks the names
        dst_repeat=dst_repeat,  # type: ignore[arg-type]
        calendar=calendar,
        on_holiday=on_holiday,  # type: ignore[arg-type]
        business_day=business_day,
    )


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
    (:func:`tickwork.timetext.check_instant`), or ValidationError."""
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
    """A job state from its name, or ValidationError naming the allowed ones (and, for a
    state older tickwork had, ``completed``, what became of it)."""
    if isinstance(value, str) and value in RETIRED_JOB_STATES:
        allowed = ", ".join(str(m.value) for m in JobState)
        raise ValidationError(
            f"{RETIRED_JOB_STATES[value]}: state must be one of {allowed}", field="state"
        )
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


_RATE = re.compile(r"(?P<count>-?[0-9]+(?:\.[0-9]+)?|-?\.[0-9]+)\s*(?:/\s*(?P<unit>[smh]))?")


def parse_rate(value: float | int | str, field: str = "rate") -> float:
    """Runs per second from a number (per second) or text: ``"20/s"``, ``"30/m"`` (0.5 a
    second), ``"1.5/s"``, ``"100/h"``; a bare ``"20"`` is per second, as a number is.
    From :data:`~tickwork.records.RATE_FLOOR` (about one a day) to
    :data:`~tickwork.records.RATE_CEILING`; ValidationError naming ``field`` otherwise."""
    if isinstance(value, str):
        match = _RATE.fullmatch(value.strip())
        if match is None:
            raise ValidationError(
                f"{field} must be a number per second, minute or hour such as 20/s, 30/m or "
                f"100/h, not {value!r}",
                field=field,
            )
        per_second = float(match["count"]) / RATE_UNITS[match["unit"] or "s"]
    else:
        per_second = value
    try:
        checked = check_rate(per_second)
    except ValidationError as exc:
        raise ValidationError(
            f"{field} must be from {plain(RATE_FLOOR)}/s (about one a day) to "
            f"{plain(RATE_CEILING)}/s, not {value!r}",
            field=field,
        ) from exc
    assert checked is not None
    return checked


JOB_KEYS = (
    frozenset(inspect.signature(make_spec).parameters) - {"registry", "cron_rules"}
) | frozenset(inspect.signature(cron_schedule).parameters) - {"expr", "tz"}
"""The keys of a job in a batch: ``task``, make_spec's options and a cron schedule's DST
policy and calendar rules."""


def run_filter(
    *,
    job_id: int | None = None,
    tenant: str | None = None,
    task: str | None = None,
    queue: str | None = None,
    since: Instant | None = None,
    until: Instant | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """The filters of a run listing or bulk command, checked, as the store takes them
    (``since <= scheduled_for < until``; ``error``: the run's error holds this text, in
    any case), or ValidationError."""
    if job_id is not None:
        check_id(job_id, "job")
    for field, text in (("task", task), ("queue", queue), ("tenant", tenant), ("error", error)):
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
        "error": error or None,
    }
