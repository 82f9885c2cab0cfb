"""Every error tickwork raises, under one root.

::

    TickworkError
    ├── ValidationError            bad input; nothing was written        (CLI exit 2, HTTP 400/422)
    │   ├── InvalidCron            names the field and the value
    │   ├── InvalidTimezone
    │   ├── InvalidSchedule        interval below 1 s, negative delay, no schedule ...
    │   │   └── NeverFires         a rule with no slot to come, or none its search can find
    │   ├── InvalidArgs            not a JSON object, or over the size limit
    │   ├── UnknownTask
    │   ├── InvalidCalendar        unknown country or region, malformed date, bad weekend
    │   ├── UnknownCalendar        a schedule names a calendar that does not exist
    │   └── FaultInjectionRefused  --inject-faults on a database that did not opt in
    ├── NotFound                   no such job / run (for this tenant)   (HTTP 404)
    │   ├── JobNotFound
    │   ├── RunNotFound
    │   ├── ApiKeyNotFound
    │   ├── TenantNotFound         (HTTP: a tenant key asking for another tenant)
    │   ├── CalendarNotFound
    │   └── NodeNotFound           no such node in the cluster view
    ├── InvalidTransition          the row exists but its state forbids the change (HTTP 409)
    │   ├── CalendarInUse          a calendar that live jobs use cannot be deleted
    │   ├── NodeAlive              a node that still beats (or not long silent) is not forgotten
    │   └── CalendarStrandsJobs    an edit would leave live jobs of the calendar never firing
    ├── FencingError               a write from a holder whose lease was taken over
    │   ├── LeaseLost              a run's fencing token is stale or its lease expired
    │   └── LeadershipLost         a scheduler's leader epoch is stale or expired
    ├── StoreError                 the database failed; driver errors are translated here
    │   ├── StoreUnavailable       the database cannot be reached (an outage)
    │   │   └── StoreTimeout       it did not answer in time (load: pool, statement or lock)
    │   ├── StoreMissing           a read on a SQLite file that does not exist (nothing created)
    │   └── MigrationError
    └── BenchError                 ``tickwork bench`` could not finish (a worker died, a stall)

Constructors take the identifying value, so a message is always specific.
"""

from __future__ import annotations

from typing import Self


class TickworkError(Exception):
    """Root of every error tickwork raises on purpose."""


class ValidationError(TickworkError, ValueError):
    """Input was rejected before anything was written.

    ``field`` names the offending input (``"cron"``, ``"tz"``, ``"args"`` ...) so that the
    HTTP layer can point at it.
    """

    index: int | None = None
    """In a batch (``submit_many``, ``POST /jobs/batch``, ``submit --file``): the 0-based
    position of the job at fault; None otherwise."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def at(self, index: int) -> Self:
        """This error, as the fault of the batch's job ``index`` (the message says which)."""
        self.index = index
        self.message = f"job {index} of the batch: {self.message}"
        self.args = (self.message,)
        return self


class InvalidCron(ValidationError):
    def __init__(self, expr: str, reason: str) -> None:
        super().__init__(f"invalid cron expression {expr!r}: {reason}", field="cron")
        self.expr = expr
        self.reason = reason


class InvalidTimezone(ValidationError):
    def __init__(self, tz: str) -> None:
        super().__init__(
            f"unknown time zone {tz!r} (expected an IANA name such as 'Europe/Berlin' or 'UTC')",
            field="tz",
        )
        self.tz = tz


class InvalidSchedule(ValidationError):
    def __init__(self, message: str, *, field: str = "schedule") -> None:
        super().__init__(message, field=field)


class NeverFires(InvalidSchedule):
    """A schedule that has no slot after the time it was asked about, or none that its
    search could find within its budget (:mod:`tickwork.search`): refused at submit, since
    no scheduler could plan it. ``rule`` names the rule (``cron '0 9 * * 6' with calendar
    'x' (business days only)``); the message says why."""

    def __init__(self, rule: str, why: str) -> None:
        super().__init__(f"{rule} {why}")
        self.rule = rule
        self.why = why


class InvalidArgs(ValidationError):
    def __init__(self, message: str) -> None:
        super().__init__(message, field="args")


class UnknownTask(ValidationError):
    def __init__(self, task: str) -> None:
        super().__init__(f"unknown task {task!r}", field="task")
        self.task = task


class InvalidCalendar(ValidationError):
    def __init__(self, message: str, *, field: str = "calendar") -> None:
        super().__init__(message, field=field)


class UnknownCalendar(ValidationError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"unknown calendar {name!r} (create it with: tickwork calendars create {name} "
            "--country CC)",
            field="calendar",
        )
        self.name = name


class FaultInjectionRefused(ValidationError):
    """A worker was told to inject faults into a database that has not opted in."""

    def __init__(self, database: str) -> None:
        super().__init__(
            f"refusing to inject faults: {database} has not opted in (run `tickwork db "
            "allow-fault-injection` on a staging database first; never on production)",
            field="inject_faults",
        )
        self.database = database


class NotFound(TickworkError, LookupError):
    """No such row, or not one the caller's tenant may see (the two look the same)."""


class JobNotFound(NotFound):
    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class RunNotFound(NotFound):
    def __init__(self, run_id: int) -> None:
        super().__init__(f"run {run_id} not found")
        self.run_id = run_id


class ApiKeyNotFound(NotFound):
    def __init__(self, key: str) -> None:
        super().__init__(f"API key {key!r} not found")
        self.key = key


class TenantNotFound(NotFound):
    def __init__(self, tenant: str) -> None:
        super().__init__(f"tenant {tenant!r} not found")
        self.tenant = tenant


class CalendarNotFound(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"calendar {name!r} not found")
        self.name = name


class NodeNotFound(NotFound):
    def __init__(self, node_id: str) -> None:
        super().__init__(f"node {node_id!r} not found")
        self.node_id = node_id


class InvalidTransition(TickworkError):
    """The row exists, but its current state does not allow the requested change."""

    def __init__(self, what: str, ident: int | str, state: str, action: str) -> None:
        super().__init__(f"cannot {action} {what} {ident}: it is {state}")
        self.ident = ident
        self.state = state
        self.action = action


class NodeAlive(InvalidTransition):
    """A node asked to be forgotten that is not silent long enough (``unseen``: how long
    since its last heartbeat; ``bound``: how long it must be)."""

    def __init__(self, node_id: str, unseen: float, bound: float) -> None:
        TickworkError.__init__(
            self,
            f"cannot forget node {node_id!r}: it was seen {unseen:.1f} s ago; a node is "
            f"forgotten only once silent for {bound:.0f} s (stop it, or wait)",
        )
        self.ident = node_id
        self.state = "alive"
        self.action = "forget"
        self.node_id = node_id


class CalendarInUse(InvalidTransition):
    """A calendar that active or paused jobs use; ``job_ids`` names them."""

    def __init__(self, name: str, job_ids: list[int]) -> None:
        shown = ", ".join(str(i) for i in job_ids[:20]) + (" ..." if len(job_ids) > 20 else "")
        TickworkError.__init__(
            self,
            f"cannot delete calendar {name!r}: {len(job_ids)} job(s) use it ({shown}); "
            "cancel them or move them to another calendar first",
        )
        self.ident = name
        self.state = "in use"
        self.action = "delete"
        self.name = name
        self.job_ids = job_ids


class CalendarStrandsJobs(InvalidTransition):
    """A calendar edit that would leave active or paused jobs with no slot to come;
    ``stranded`` holds each one's id and what its search found (nothing was changed)."""

    def __init__(self, name: str, stranded: list[tuple[int, str]]) -> None:
        shown = "; ".join(f"job {job_id} ({why})" for job_id, why in stranded[:10])
        more = f"; and {len(stranded) - 10} more" if len(stranded) > 10 else ""
        TickworkError.__init__(
            self,
            f"cannot change calendar {name!r}: it would leave {len(stranded)} job(s) with no "
            f"slot to come: {shown}{more}; cancel them or give them another calendar first",
        )
        self.ident = name
        self.state = "in use"
        self.action = "change"
        self.name = name
        self.job_ids = [job_id for job_id, _ in stranded]


class FencingError(TickworkError):
    """A write came from a holder whose lease has been taken over; nothing was applied."""


class LeaseLost(FencingError):
    def __init__(self, run_id: int, token: int) -> None:
        super().__init__(
            f"run {run_id}: fencing token {token} is no longer current "
            "(the lease expired or the run was re-claimed, finished or cancelled)"
        )
        self.run_id = run_id
        self.token = token


class LeadershipLost(FencingError):
    """``node_id`` is the node that lost (None where the store cannot know it: a trigger is
    fenced by epoch alone); ``holder`` the node that holds the lease now, if the store read
    it (None: nobody, or not read)."""

    def __init__(self, node_id: str | None, epoch: int, *, holder: str | None = None) -> None:
        who = f"node {node_id!r}" if node_id is not None else "the caller"
        now_held = f" ({holder!r} holds the lease)" if holder else ""
        super().__init__(f"{who} no longer leads at epoch {epoch}{now_held}")
        self.node_id = node_id
        self.epoch = epoch
        self.holder = holder


class StoreError(TickworkError):
    """The database failed in a way the caller did not cause."""


class StoreUnavailable(StoreError):
    """The store cannot serve the call now: retry later. Itself, an outage (the database
    cannot be reached, is shutting down, or is a read-only standby)."""


class StoreTimeout(StoreUnavailable):
    """The store did not answer in time: every pooled connection stayed in use for the
    pool's wait, a statement or lock timeout ended the call, or SQLite's write lock stayed
    taken for its busy timeout. Load, not an outage: the database itself answers."""


class StoreMissing(StoreError):
    """There is no store at ``path``, and this caller may not create one: a read command
    (``tickwork jobs``, ``runs`` ...) on a SQLite file that does not exist. Nothing was
    created. ``tickwork run``, ``worker``, ``scheduler``, ``api`` and ``db migrate`` create it."""

    def __init__(self, path: str, url: str) -> None:
        super().__init__(
            f"no tickwork store at {path} (is --db or TICKWORK_DB right? `tickwork run` or "
            f"`tickwork db migrate --db {url}` creates one)"
        )
        self.path = path
        self.url = url


class MigrationError(StoreError):
    pass


class BenchError(TickworkError):
    """``tickwork bench`` could not finish a measurement; the message says why."""
