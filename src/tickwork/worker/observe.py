"""What a handler runs inside: the run's log context and, with the ``otel`` extra, a span.

Log context
    While a handler runs, :func:`current_run` is the run it runs for (a context variable:
    set in the pool thread around a sync handler, in the handler's own asyncio task around
    an async one, so concurrent runs never see each other's). :class:`RunContextFilter` puts
    it on every log record a handler emits, through any logger, as ``run_id``, ``job_id``,
    ``attempt`` and ``tenant`` (None outside a run) and as ``run_context``, text ready for a
    format string (`` [run=12 job=3 attempt=2 tenant=acme]``, or empty). With
    OpenTelemetry in use, every record in a span also carries ``trace_id`` and ``span_id``
    (hex, as exporters show them; None outside a span), in the JSON and at the end of
    ``run_context`` (`` [run=12 ... trace=4bf9... span=00f0...]``), so a log line leads to
    its trace. The log handler of
    ``tickwork run|worker|scheduler|api`` carries the filter in both ``--log-format``\\ s;
    add it to your own handlers to get the same fields.

Spans (:mod:`tickwork.worker.otel`)
    Each attempt is one span, ended with its outcome; see that module. Without
    ``opentelemetry`` imported by the application, this costs one dictionary look-up per
    attempt and imports nothing. With it, a worker reads each job's stored traceparent
    once (:class:`Tracing`), in the pool thread or, for an async handler, in a thread of
    its own, never on the event loop.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from tickwork.clock import Clock
from tickwork.job import ClaimedRun, Job

if TYPE_CHECKING:
    from tickwork.worker.outcome import Outcome

log = logging.getLogger("tickwork.worker")

CURRENT_RUN: ContextVar[ClaimedRun | None] = ContextVar("tickwork_run", default=None)
"""The run whose handler runs in this thread or asyncio task (read :func:`current_run`)."""

RUN_FIELDS = ("run_id", "job_id", "attempt", "tenant")
"""The attributes :class:`RunContextFilter` sets on every record (and the JSON log keys)."""
TRACE_FIELDS = ("trace_id", "span_id")
"""The attributes it sets too, from the current OpenTelemetry span (None outside one)."""


def current_run() -> ClaimedRun | None:
    """The run whose handler is running in this thread or asyncio task, or None."""
    return CURRENT_RUN.get()


class RunContextFilter(logging.Filter):
    """Adds the current run's ids to each record (see the module docstring), and the
    current span's trace and span ids when the application uses OpenTelemetry; drops
    nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        run = CURRENT_RUN.get()
        fields = record.__dict__
        ids = span_ids() if tracing_on() else None
        if ids is None:
            for name in TRACE_FIELDS:
                fields.setdefault(name, None)
            trace = ""
        else:
            record.trace_id, record.span_id = ids
            trace = f"trace={ids[0]} span={ids[1]}"
        if run is None:  # a record's own fields (logged with extra=) stay as they are
            for name in RUN_FIELDS:
                fields.setdefault(name, None)
            fields.setdefault("run_context", f" [{trace}]" if trace else "")
        else:
            record.run_id = run.id
            record.job_id = run.job_id
            record.attempt = run.attempt
            record.tenant = run.tenant
            record.run_context = (
                f" [run={run.id} job={run.job_id} attempt={run.attempt} tenant={run.tenant}"
                f"{' ' + trace if trace else ''}]"
            )
        return True


def span_ids() -> tuple[str, str] | None:
    """The current span's trace id and span id, in hex as exporters show them, or None
    outside a span (call only once :func:`tracing_on`)."""
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


class Scope(Protocol):
    def raised(self, exc: BaseException) -> None:
        """The handler raised ``exc``: the span records it as an exception event."""
        ...

    def ended(self, outcome: Outcome) -> None:
        """The attempt's outcome, decided: the span records it."""
        ...


OTEL_MODULE = "opentelemetry.trace"
TRACE_CACHE = 4096
"""Jobs whose traceparent a worker keeps in memory (a job's never changes once written)."""


def tracing_on() -> bool:
    """Whether the application uses OpenTelemetry: it has imported its API (tickwork never
    imports it first)."""
    return OTEL_MODULE in sys.modules


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


def run_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The run and trace fields a record carries (set by :class:`RunContextFilter`), for
    JSON logs: the run's outside a run and the trace's outside a span are left out."""
    fields: dict[str, Any] = {}
    if getattr(record, "run_id", None) is not None:
        fields.update((name, getattr(record, name)) for name in RUN_FIELDS)
    if getattr(record, "trace_id", None) is not None:
        fields.update((name, getattr(record, name, None)) for name in TRACE_FIELDS)
    return fields
