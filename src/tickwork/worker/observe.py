"""What a handler runs inside: the run's log context and, with the ``otel`` extra, a span.

Log context
    While a handler runs, :func:`current_run` is the run it runs for (a context variable:
    set in the pool thread around a sync handler, in the handler's own asyncio task around
    an async one, so concurrent runs never see each other's). :class:`RunContextFilter` puts
    it on every log record a handler emits, through any logger, as ``run_id``, ``job_id``,
    ``attempt`` and ``tenant`` (None outside a run) and as ``run_context``, text ready for a
    format string (`` [run=12 job=3 attempt=2 tenant=acme]``, or empty). The log handler of
    ``tickwork run|worker|scheduler|api`` carries the filter in both ``--log-format``\\ s;
    add it to your own handlers to get the same fields.

Spans (:mod:`tickwork.worker.otel`)
    Each attempt is one span, ended with its outcome; see that module. Without
    ``opentelemetry`` imported by the application, this costs one dictionary look-up per
    attempt and imports nothing.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from tickwork.job import ClaimedRun

if TYPE_CHECKING:
    from tickwork.worker.executor import Outcome

_CURRENT: ContextVar[ClaimedRun | None] = ContextVar("tickwork_run", default=None)

RUN_FIELDS = ("run_id", "job_id", "attempt", "tenant")
"""The attributes :class:`RunContextFilter` sets on every record (and the JSON log keys)."""


def current_run() -> ClaimedRun | None:
    """The run whose handler is running in this thread or asyncio task, or None."""
    return _CURRENT.get()


class RunContextFilter(logging.Filter):
    """Adds the current run's ids to each record (see the module docstring); drops nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        run = _CURRENT.get()
        if run is None:
            record.run_id = record.job_id = record.attempt = record.tenant = None
            record.run_context = ""
        else:
            record.run_id = run.id
            record.job_id = run.job_id
            record.attempt = run.attempt
            record.tenant = run.tenant
            record.run_context = (
                f" [run={run.id} job={run.job_id} attempt={run.attempt} tenant={run.tenant}]"
            )
        return True


class Scope(Protocol):
    def ended(self, outcome: Outcome) -> None:
        """The attempt's outcome, decided: the span records it."""
        ...


class _NoSpan:
    def ended(self, outcome: Outcome) -> None:
        pass


_NO_SPAN = _NoSpan()
OTEL_MODULE = "opentelemetry.trace"


@contextmanager
def run_scope(run: ClaimedRun, queue: str | None = None) -> Iterator[Scope]:
    """Around a handler: the log context, and a span when the application uses OpenTelemetry
    (it has imported ``opentelemetry.trace``; tickwork never imports it first)."""
    token = _CURRENT.set(run)
    try:
        if OTEL_MODULE in sys.modules:
            from tickwork.worker.otel import attempt_span

            with attempt_span(run, queue) as span:
                yield span
        else:
            yield _NO_SPAN
    finally:
        _CURRENT.reset(token)


def run_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The run fields a record carries (set by :class:`RunContextFilter`), for JSON logs:
    empty outside a run."""
    if getattr(record, "run_id", None) is None:
        return {}
    return {name: getattr(record, name) for name in RUN_FIELDS}
