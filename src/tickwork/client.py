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

Operators' commands live here too (cancel, pause, resume, trigger, retry, the dead-letter
list, the slot ledger, ``explain``, the cluster view, API keys), so the CLI and the HTTP API
act through the same calls. Every read and command takes ``tenant``: ``None`` is an admin
(every tenant); an id of another tenant raises the same NotFound as a missing one.

No SQL here and no concrete store: the store comes from :func:`tickwork.store.open_store`.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, fields, is_dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, TypeVar

from tickwork import auth
from tickwork.config import resolve_db_url
from tickwork.errors import ApiKeyNotFound, ValidationError
from tickwork.explain import Explanation, explain, latest_slot, parse_slot
from tickwork.job import (
    DEFAULT_MISFIRE_GRACE,
    DEFAULT_QUEUE,
    DEFAULT_TENANT,
    MAX_NAME_LENGTH,
    Job,
    JobSpec,
    JobState,
    MisfirePolicy,
    OverlapPolicy,
    Run,
    RunState,
    check_args,
    check_label,
    shown_json,
    shown_object,
)
from tickwork.records import (
    DEFAULT_PAGE,
    MAX_PAGE,
    ApiKey,
    Lease,
    Node,
    Page,
    RunStats,
    Session,
    SlotSkip,
    Submitted,
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
from tickwork.store import Store, open_store
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
MAX_FIRE_TIMES = 1000


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


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A new session (:meth:`Client.sign_in`): the token for the browser's cookie, shown
    this once and stored only hashed, the session and the key it signed in with."""

    token: str
    session: Session
    key: ApiKey


@dataclass(frozen=True, slots=True)
class Cluster:
    """Who leads and which nodes are alive (``tickwork cluster``), by the store's clock."""

    leader: Lease | None  # None: no scheduler holds an unexpired leader lease
    nodes: list[Node]  # most recently seen first
    now: datetime


class Client:
    """Submit and inspect jobs and runs on one store, checking tasks against ``registry``."""

    def __init__(self, store: Store, registry: Registry | None = None) -> None:
        self.store = store
        self.registry = registry if registry is not None else Registry()

    @classmethod
    def open(
        cls,
        db_url: str | None = None,
        registry: Registry | None = None,
        *,
        migrate: bool | None = None,
    ) -> Client:
        """A client on ``db_url``, else ``TICKWORK_DB``, else ``./tickwork.db``.

        ``migrate``: as :func:`tickwork.store.open_store` (None: a new SQLite file is
        migrated, PostgreSQL is left to ``tickwork db migrate``)."""
        return cls(open_store(resolve_db_url(db_url), migrate=migrate), registry)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, task: str | Task[..., Any], **options: Any) -> Submitted:
        """Validate (see :func:`make_spec` for the options) and submit a job."""
        return self.submit_spec(make_spec(self.registry, task, **options))

    def submit_spec(self, spec: JobSpec) -> Submitted:
        """Submit a job already validated by :func:`make_spec` (the CLI validates before it
        opens a database, so bad input never creates a file)."""
        return self.store.submit(spec)

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
        return self.store.get_job(check_id(job_id, "job"), tenant=tenant)

    def get_run(self, run_id: int, *, tenant: str | None = None) -> Run:
        return self.store.get_run(check_id(run_id, "run"), tenant=tenant)

    def list_jobs(
        self,
        *,
        tenant: str | None = None,
        state: JobState | str | None = None,
        task: str | None = None,
        after: int | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[Job]:
        """One page of jobs, newest first; pass ``next_cursor`` as ``after`` for the next."""
        wanted = job_state(state)
        check_page(after, limit)
        return self.store.list_jobs(
            tenant=tenant, state=wanted, task=task, after=after, limit=limit
        )

    def list_runs(
        self,
        *,
        job_id: int | None = None,
        state: RunState | str | None = None,
        tenant: str | None = None,
        after: int | None = None,
        limit: int = DEFAULT_PAGE,
    ) -> Page[Run]:
        """One page of runs matching the filters, newest first; pass ``next_cursor`` as
        ``after`` for the next."""
        if job_id is not None:
            check_id(job_id, "job")
        wanted = run_state(state)
        check_page(after, limit)
        return self.store.list_runs(
            tenant=tenant, job_id=job_id, state=wanted, after=after, limit=limit
        )

    # -- commands ----------------------------------------------------------------------------

    def cancel_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        """No more slots; its waiting runs are cancelled, a running one finishes.
        Cancelling a cancelled job changes nothing."""
        return self.store.cancel_job(check_id(job_id, "job"), tenant=tenant)

    def pause_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        """No slot is triggered until :meth:`resume_job`; InvalidTransition unless active
        (or already paused)."""
        return self.store.pause_job(check_id(job_id, "job"), tenant=tenant)

    def resume_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        """Slots that fell while paused are recorded as skipped; the next one runs."""
        return self.store.resume_job(check_id(job_id, "job"), tenant=tenant)

    def trigger_job(self, job_id: int, *, tenant: str | None = None) -> Run:
        """Run the job now, once, besides its schedule (which is untouched)."""
        return self.store.run_now(check_id(job_id, "job"), tenant=tenant)

    def cancel_run(self, run_id: int, *, tenant: str | None = None) -> Run:
        """queued|failed|running -> cancelled (a running handler is stopped at its next
        heartbeat); InvalidTransition for a finished run."""
        return self.store.cancel_run(check_id(run_id, "run"), tenant=tenant)

    def retry_run(self, run_id: int, *, tenant: str | None = None) -> Run:
        """dead|failed -> queued now, with a fresh allowance of attempts."""
        return self.store.retry_run(check_id(run_id, "run"), tenant=tenant)

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
        with no slot left to trigger (cancelled, completed): ``[]``. A paused job: the
        slots it would get if resumed now.
        """
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_FIRE_TIMES:
            raise ValidationError(f"n must be from 1 to {MAX_FIRE_TIMES}, got {n!r}", field="n")
        if job.state in (JobState.CANCELLED, JobState.COMPLETED):
            return []
        if isinstance(job.schedule, Once):
            return [job.next_run_at or job.schedule.first_slot(job.created_at)]
        times: list[datetime] = []
        slot: datetime | None = self.store.now()
        while slot is not None and len(times) < n:
            slot = job.schedule.next_after(slot)
            if slot is not None:
                times.append(slot)
        return times

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
        now = self.store.now()
        slot = self.slot_at(job, at, now=now)
        job, runs, skips = self.store.runs_for_slot(job.id, slot, tenant=tenant)
        return explain(job, slot, runs, skips, now=now, leader=self.store.leader())

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

    def leader(self) -> Lease | None:
        """The scheduler leader lease, or None when no scheduler leads. A read only, unlike
        :meth:`cluster`, whose node listing also forgets stale nodes (a write): for views
        polled every few seconds, such as the dashboard's overview."""
        return self.store.leader()

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
        """The store's clock: the time every due-ness and lease is judged by."""
        return self.store.now()

    def run_stats(self, *, tenant: str | None = None) -> RunStats:
        """Runs by state, the due backlog and recent trigger lag."""
        return self.store.run_stats(tenant=tenant)

    # -- API keys ----------------------------------------------------------------------------

    def create_api_key(
        self, *, tenant: str, admin: bool = False, label: str | None = None
    ) -> tuple[ApiKey, str]:
        """A new key for ``tenant`` (``admin``: every tenant): its record, and the key
        itself, which is shown this once and never stored (see :mod:`tickwork.auth`)."""
        check_label("tenant", tenant)
        if label is not None:
            check_label("label", label)
        if not isinstance(admin, bool):
            raise ValidationError(f"admin must be true or false, got {admin!r}", field="admin")
        key, prefix = auth.generate_key()
        record = self.store.create_api_key(
            key_hash=auth.hash_key(key), prefix=prefix, tenant=tenant, admin=admin, label=label
        )
        return record, key

    def authenticate(self, secret: str) -> ApiKey | None:
        """The unrevoked key ``secret`` is, or None (malformed, unknown or revoked)."""
        if not isinstance(secret, str):
            return None
        prefix = auth.key_prefix(secret)
        if prefix is None:
            return None
        found = self.store.api_key_by_hash(auth.hash_key(secret))
        if found is None or not hmac.compare_digest(found.prefix, prefix):
            return None
        return found

    def list_api_keys(self) -> list[ApiKey]:
        """Every key, revoked ones too, newest first (never a secret or a hash)."""
        return self.store.list_api_keys()

    def api_keys_exist(self) -> bool:
        """Whether a key was ever created, revoked ones included (keys are never deleted):
        the HTTP API runs open on loopback only while none was."""
        return bool(self.store.list_api_keys())

    def revoke_api_key(self, key: str) -> ApiKey:
        """Revoke a key named by its id, its prefix, or the whole key; idempotent.
        ApiKeyNotFound when none matches."""
        if not isinstance(key, str) or not key.strip():
            raise ValidationError("name the key by its id or prefix", field="key")
        text = key.strip()
        name = auth.key_prefix(text) or text.removeprefix(f"{auth.KEY_SCHEME}_")
        if not name or len(name) > MAX_NAME_LENGTH:
            raise ApiKeyNotFound(key)
        return self.store.revoke_api_key(name)

    # -- sessions (the dashboard's sign-in) ----------------------------------------------------

    def sign_in(
        self,
        key: str,
        *,
        idle_timeout: timedelta = auth.SESSION_IDLE_TIMEOUT,
        lifetime: timedelta = auth.SESSION_LIFETIME,
    ) -> SignedIn | None:
        """Start a session with ``key``, or None when the key is malformed, unknown or
        revoked (also when it is revoked while this runs: the store checks again)."""
        found = self.authenticate(key)
        if found is None:
            return None
        token = auth.generate_session_token()
        try:
            session = self.store.sign_in(
                key_id=found.id,
                token_hash=auth.hash_key(token),
                idle_timeout=idle_timeout,
                lifetime=lifetime,
            )
        except ApiKeyNotFound:
            return None
        return SignedIn(token, session, found)

    def authenticate_session(self, token: str) -> tuple[Session, ApiKey] | None:
        """The live session ``token`` names, and its key; None when it is malformed,
        unknown, signed out, expired or its key revoked."""
        if not isinstance(token, str) or not auth.is_session_token(token):
            return None
        return self.store.session_by_hash(auth.hash_key(token))

    def sign_out(self, token: str) -> bool:
        """End the session ``token`` names; False when there was none to end."""
        if not isinstance(token, str) or not auth.is_session_token(token):
            return False
        return self.store.sign_out(auth.hash_key(token))


JsonValue = Job | Run | Node | ApiKey | SlotSkip | Lease | RunStats | Cluster


def to_json(value: JsonValue) -> dict[str, Any]:
    """A record as a JSON-ready dict: times in ISO-8601 UTC, durations in seconds.

    Jobs, runs, nodes, API keys (their prefix, never a secret or hash: the record holds
    neither), ledger entries, leases, run stats and the cluster view.

    It cannot fail on what a row holds, and its output is what every JSON encoder can write:
    the JSON a record carries (args, a result, a node's info) is passed through
    :func:`~tickwork.job.shown_json`, so a row stored before the limits on args, or a
    handler's odd result, is shown cut short rather than breaking a listing (args and a
    result that are not objects are wrapped, ``{"value": ...}``).
    """
    if isinstance(value, Job):
        raw = _fields(value)
        raw["schedule"] = value.schedule.to_json()
        raw["args"] = shown_object(value.args)
    elif isinstance(value, Run):
        raw = _fields(value)
        raw["args"] = shown_object(value.args)
        raw["result"] = shown_object(value.result) if value.result is not None else None
    elif isinstance(value, Cluster):
        raw = {
            "leader": to_json(value.leader) if value.leader else None,
            "nodes": [{**to_json(node), "silent": node.silent(value.now)} for node in value.nodes],
            "now": value.now,
        }
    elif is_dataclass(value):
        raw = _fields(value)
    else:
        raise TypeError(f"cannot encode {type(value).__name__}")
    return {k: _jsonable(v) for k, v in raw.items()}


def _fields(record: Any) -> dict[str, Any]:
    """A record's fields, one level deep (``dataclasses.asdict`` would copy every nested
    value by recursion, and overflow on args nested a few hundred deep)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.value
    if is_dataclass(value) and not isinstance(value, type):  # a policy inside a record
        return {k: _jsonable(v) for k, v in _fields(value).items()}
    if isinstance(value, dict | list | tuple | str | float):
        return shown_json(value)
    return value
