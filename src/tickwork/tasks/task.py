"""Tasks as a worker sees them: the handler, its defaults, the context it is called with,
and the two exceptions a handler raises to steer its retry.

A handler is ``def handler(ctx: Context, **args)`` or ``async def handler(ctx, **args)``;
``args`` are the job's JSON args. What it returns becomes the run's ``result`` (a dict is
kept as is, any other JSON value as ``{"value": ...}``). What it raises decides the attempt:

- returns: the run succeeds;
- ``Retry(after=...)``: the attempt fails and the next one waits ``after`` instead of the
  job's backoff (it still counts as an attempt: the last one ends ``dead``);
- ``Discard(reason)``: the run ends ``dead`` at once, whatever attempts are left;
- any other exception: the attempt fails; the job's backoff and max attempts decide.

``Retry`` and ``Discard`` are not :class:`~tickwork.errors.TickworkError` s: tickwork never
raises them; they are messages from a handler to its worker, like ``StopIteration``.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, ParamSpec, TypeVar

from tickwork.errors import InvalidArgs, InvalidTransition
from tickwork.job import ClaimedRun

P = ParamSpec("P")
R = TypeVar("R")
Opener = Callable[[int, int], AbstractContextManager[Any]]
"""Opens a run's completing transaction: ``Store.complete_in_transaction``."""


class Context:
    """What a handler knows about the attempt it is running.

    ``run_id`` is stable across attempts and executions of one slot: use it to deduplicate
    side effects (a run executes twice only when a lease was taken over). ``cancelled`` is
    set when the worker stops caring about this attempt (timeout, cancellation, lost lease,
    shutdown): a long sync handler should poll it (``ctx.cancelled.wait(1)`` instead of
    ``time.sleep(1)``) and return; whatever it returns then is not reported. ``logger``
    logs under ``tickwork.task.<task>`` with every line starting ``run N:``. ``now()`` is
    the store's time (one round trip to the database), the clock every node agrees on:
    use it, not the host's clock, for work that must agree on what time it is.

    ``transaction()`` commits a handler's writes to the store's own database together with
    the run's completion (see :meth:`transaction`): exactly-once in effect.

    Read-only. The logger and the event are made when first asked for: most handlers use
    neither, and a busy worker starts tens of thousands of runs a second.
    """

    __slots__ = ("_cancelled", "_completed", "_logger", "_now", "_open", "_run")

    def __init__(
        self,
        run: ClaimedRun,
        now: Callable[[], datetime],
        transaction: Opener | None = None,
    ) -> None:
        self._run = run
        self._now = now
        self._open = transaction
        self._completed = False
        self._logger: logging.LoggerAdapter[logging.Logger] | None = None
        self._cancelled: threading.Event | None = None

    @property
    def run_id(self) -> int:
        return self._run.id

    @property
    def job_id(self) -> int:
        return self._run.job_id

    @property
    def task(self) -> str:
        return self._run.task

    @property
    def attempt(self) -> int:
        return self._run.attempt

    @property
    def max_attempts(self) -> int:
        return self._run.max_attempts

    @property
    def scheduled_for(self) -> datetime:
        return self._run.scheduled_for

    @property
    def fencing_token(self) -> int:
        return self._run.fencing_token

    @property
    def tenant(self) -> str:
        return self._run.tenant

    @property
    def queue(self) -> str:
        return self._run.queue

    @property
    def timeout(self) -> timedelta | None:
        return self._run.timeout

    def now(self) -> datetime:
        """The store's time now, aware UTC: the database's clock, not this host's (which
        may be off: ``tickwork cluster`` shows by how much)."""
        return self._now()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A transaction on the store's own database that also completes this run::

            with ctx.transaction() as conn:
                conn.execute("INSERT INTO ledger (run_id, amount) VALUES (%s, %s)",
                             (ctx.run_id, amount))

        Yields a psycopg connection (rows as dicts) on PostgreSQL, the ``sqlite3``
        connection on SQLite (``?`` placeholders; it holds the database's write lock
        until the block ends, so keep the block short). Do not commit or roll back on it.

        When the block ends, the run is marked succeeded and the transaction commits: the
        writes and the completion land together or not at all. If this attempt's lease
        was taken over meanwhile (the worker stalled; another one runs the slot now), the
        whole transaction is rolled back and :class:`~tickwork.errors.LeaseLost` raised:
        a zombie's writes never land. A block that raises rolls back and completes
        nothing. A worker that dies before the commit leaves nothing: the retry writes
        it once.

        Once per attempt: the run is finished when the block has committed. What the
        handler returns afterwards is not recorded (the run succeeded with no result),
        and an exception it raises afterwards is logged, not retried: its effect has
        landed. On PostgreSQL the server ends a transaction idle for 2 s between two
        statements: keep slow work (an HTTP call) outside the block. An async handler
        runs the block in a thread: ``await asyncio.to_thread(write)``.
        """
        if self._open is None:
            raise InvalidTransition("run", self._run.id, "not held by a worker", "commit")
        if self._completed:
            # Once per attempt: the first block completed the run.
            raise InvalidTransition(
                "run", self._run.id, "succeeded (ctx.transaction() committed)", "commit again"
            )
        with self._open(self._run.id, self._run.fencing_token) as conn:
            yield conn
        self._completed = True

    @property
    def completed(self) -> bool:
        """Whether :meth:`transaction` committed: the run is succeeded already."""
        return self._completed

    @property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        if self._logger is None:
            self._logger = RunLogger(_task_logger(self._run.task), {"run_id": self._run.id})
        return self._logger

    @property
    def cancelled(self) -> threading.Event:
        event = self._cancelled
        if event is None:
            with _LAZY:  # the handler and whoever stops it may both ask first
                if self._cancelled is None:
                    self._cancelled = threading.Event()
                event = self._cancelled
        return event

    def __repr__(self) -> str:
        run = self._run
        return f"<Context run={run.id} task={run.task!r} attempt {run.attempt}/{run.max_attempts}>"


_LAZY = threading.Lock()


class RunLogger(logging.LoggerAdapter[logging.Logger]):
    """A task's logger: every line starts with ``run N:``."""

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        return f"run {self.extra['run_id'] if self.extra else '?'}: {msg}", kwargs


@functools.lru_cache(maxsize=1024)
def _task_logger(task: str) -> logging.Logger:
    return logging.getLogger(f"tickwork.task.{task}")


class Retry(Exception):
    """Fail this attempt and retry after ``after`` (a timedelta or seconds).

    Example: ``raise Retry(after=30)`` when a rate limit says "try again in 30 s".
    """

    def __init__(
        self,
        after: timedelta | float | None = None,
        *,
        reason: str = "retry requested",
        result: dict[str, Any] | None = None,
    ) -> None:
        if after is not None and not isinstance(after, timedelta):
            after = timedelta(seconds=after)
        if after is not None and after < timedelta(0):
            raise ValueError(f"Retry(after=...) must not be negative, got {after}")
        super().__init__(reason)
        self.after = after
        self.reason = reason
        self.result = result


class Discard(Exception):
    """End the run ``dead`` now: retrying cannot help (bad input, a 404, a deleted account)."""

    def __init__(self, reason: str, *, result: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.result = result


class TaskFailed(Exception):
    """An ordinary failed attempt that carries a ``result`` (a shell command's output)."""

    def __init__(self, message: str, *, result: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True, slots=True)
class TaskDefaults:
    """Policies a task gives its jobs unless a submit overrides them (None: the job's
    default). ``backoff`` is ``(base, cap)`` in seconds, as in
    :class:`~tickwork.retry.RetryPolicy`."""

    max_attempts: int | None = None
    backoff: tuple[float, float] | None = None
    timeout: timedelta | None = None
    queue: str | None = None
    priority: int | None = None
    max_running: int | None = None
    """Not a job default: the task's cluster-wide limit of executions at once."""
    rate: float | None = None
    """Not a job default: the task's cluster-wide limit of starts, in runs per second."""
    burst: int | None = None
    """Not a job default: the size of the task's token bucket (None: one second's worth)."""


class Task(Generic[P, R]):
    """A named handler. Calling the task calls the handler (handy in tests)."""

    def __init__(
        self,
        name: str,
        fn: Callable[P, R],
        defaults: TaskDefaults | None = None,
        *,
        validate: Callable[[dict[str, Any]], None] | None = None,
        builtin: bool = False,
    ) -> None:
        self.name = name
        self.fn = fn
        self.defaults = defaults or TaskDefaults()
        self.is_async = inspect.iscoroutinefunction(fn)
        self.builtin = builtin
        self._validate = validate
        self._signature = inspect.signature(fn)
        self._takes_no_args = validate is None and _binds(self._signature)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Task {self.name!r} {self.fn.__module__}.{self.fn.__qualname__}>"

    def check_args(self, args: dict[str, Any]) -> None:
        """InvalidArgs unless ``handler(ctx, **args)`` would bind (names; built-ins check
        types and values too). Called at submit, so bad args never reach a worker."""
        if not args and self._takes_no_args:
            return  # the common case, answered once at definition
        if self._validate is not None:
            self._validate(args)
        try:
            self._signature.bind(None, **args)
        except TypeError as exc:
            raise InvalidArgs(
                f"args do not fit task {self.name!r}{self._signature}: {exc}"
            ) from None


def _binds(signature: inspect.Signature) -> bool:
    """Whether ``handler(ctx)``, with no args, binds."""
    try:
        signature.bind(None)
    except TypeError:
        return False
    return True
