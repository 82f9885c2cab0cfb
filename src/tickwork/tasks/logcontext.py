"""The log context of the run a handler is running, for any log handler.

While a handler runs, :func:`current_run` is the run it runs for (a context variable:
set in the pool thread around a sync handler, in the handler's own asyncio task around
an async one, so concurrent runs never see each other's). :class:`RunContextFilter` puts
it on every log record a handler emits, through any logger, as ``run_id``, ``job_id``,
``attempt`` and ``tenant`` (None outside a run) and as ``run_context``, text ready for a
format string (`` [run=12 job=3 attempt=2 tenant=acme]``, or empty). With
OpenTelemetry in use, every record in a span also carries ``trace_id`` and ``span_id``
(hex, as exporters show them; None outside a span), in the JSON and at the end of
``run_context`` (`` [run=12 ... trace=4bf9... span=00f0...]``), so a log line leads to
its trace. The log handler of ``tickwork run|worker|scheduler|api`` carries the filter in
both ``--log-format``\\ s; add it to your own handlers to get the same fields.

Here, in the task model, so that a process's log set-up (the CLI's) needs no worker: the
worker sets :data:`CURRENT_RUN` around each handler (:mod:`tickwork.worker.executor`).
"""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar
from typing import Any

from tickwork.job import ClaimedRun

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


OTEL_MODULE = "opentelemetry.trace"


def tracing_on() -> bool:
    """Whether the application uses OpenTelemetry: it has imported its API (tickwork never
    imports it first)."""
    return OTEL_MODULE in sys.modules


def run_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The run and trace fields a record carries (set by :class:`RunContextFilter`), for
    JSON logs: the run's outside a run and the trace's outside a span are left out."""
    fields: dict[str, Any] = {}
    if getattr(record, "run_id", None) is not None:
        fields.update((name, getattr(record, name)) for name in RUN_FIELDS)
    if getattr(record, "trace_id", None) is not None:
        fields.update((name, getattr(record, name, None)) for name in TRACE_FIELDS)
    return fields
