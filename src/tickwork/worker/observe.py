"""What a handler runs inside: the run's log context (:mod:`tickwork.tasks.logcontext`,
whose names are here too) and, with the ``otel`` extra, a span.

Spans (:mod:`tickwork.worker.otel`)
    Each attempt is one span, ended with its outcome; see that module. Without
    ``opentelemetry`` imported by the application, this costs one dictionary look-up per
    attempt and imports nothing. With it, a worker reads each job's stored traceparent
    once (:class:`Tracing`), in the pool thread or, for an async handler, in a thread of
    its own, never on the event loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from tickwork.clock import Clock
from tickwork.job import ClaimedRun, Job
from tickwork.tasks.logcontext import (
    CURRENT_RUN,
    RUN_FIELDS,
    TRACE_FIELDS,
    RunContextFilter,
    current_run,
    run_fields,
    span_ids,
    tracing_on,
)

if TYPE_CHECKING:
    from tickwork.worker.outcome import Outcome

log = logging.getLogger("tickwork.worker")


class Scope(Protocol):
    def raised(self, exc: BaseException) -> None:
        """The handler raised ``exc``: the span records it as an exception event."""
        ...

    def ended(self, outcome: Outcome) -> None:
        """The attempt's outcome, decided: the span records it."""
        ...


TRACE_CACHE = 4096
"""Jobs whose traceparent a worker keeps in memory (a job's never changes once written)."""


class Tracing:
    """What an attempt's span needs besides the run: the traceparent stored with its job
    (read once per job: it never changes once written) and the clock its lag is read on."""

    def __init__(self, get_job: Callable[[int], Job], clock: Clock) -> None:
        self._get_job = get_job
        self.clock = clock
        self._parents: dict[int, str | None] = {}
        self._lock = threading.Lock()

    def cached(self, job_id: int) -> bool:
        with self._lock:
            return job_id in self._parents

    def parent(self, job_id: int) -> str | None:
        """The job's traceparent (a store read the first time); None when it has none or
        the store did not answer (a span without its link beats a failed run)."""
        with self._lock:
            if job_id in self._parents:
                return self._parents[job_id]
        try:
            parent = self._get_job(job_id).trace_context
        except Exception as exc:
            log.debug("job %d: no trace context for its span: %s", job_id, exc)
            return None
        with self._lock:
            if len(self._parents) >= TRACE_CACHE:
                del self._parents[next(iter(self._parents))]
            self._parents[job_id] = parent
        return parent


@contextmanager
def attempt_span(run: ClaimedRun, tracing: Tracing, parent: str | None) -> Iterator[Scope]:
    """An attempt's span (:mod:`tickwork.worker.otel`), for an application that uses
    OpenTelemetry (``parent``: the job's traceparent)."""
    from tickwork.worker.otel import attempt_span as span_of

    with span_of(run, parent, tracing.clock.now()) as span:
        yield span


__all__ = [
    "CURRENT_RUN",
    "RUN_FIELDS",
    "TRACE_FIELDS",
    "RunContextFilter",
    "Scope",
    "Tracing",
    "attempt_span",
    "current_run",
    "run_fields",
    "span_ids",
    "tracing_on",
]
