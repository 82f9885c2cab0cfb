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

import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, ParamSpec, TypeVar

from tickwork.errors import InvalidArgs

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Context:
    """What a handler knows about the attempt it is running.

    ``run_id`` is stable across attempts and executions of one slot: use it to deduplicate
    side effects (a run executes twice only when a lease was taken over). ``cancelled`` is
    set when the worker stops caring about this attempt (timeout, cancellation, lost lease,
    shutdown): a long sync handler should poll it (``ctx.cancelled.wait(1)`` instead of
    ``time.sleep(1)``) and return; whatever it returns then is not reported.
    """

    run_id: int
    job_id: int
    task: str
    attempt: int
    max_attempts: int
    scheduled_for: datetime
    fencing_token: int
    tenant: str
    timeout: timedelta | None
    logger: logging.LoggerAdapter[logging.Logger]
    cancelled: threading.Event


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
