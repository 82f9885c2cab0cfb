"""The trace context a job is submitted with, for OpenTelemetry (the ``otel`` extra).

A job submitted while a span is active stores that span's W3C ``traceparent`` with the
job; each run attempt's span is *linked* to it (not a child: a cron job's runs go on for
months after the request that declared it ended), as Celery's and River's
instrumentations do. The spans are the worker's (:mod:`tickwork.worker.otel`); this is
what the client needs, without the worker.

Nothing here imports ``opentelemetry`` unless the application has already imported it.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from tickwork.job import JobSpec


def traceparent() -> str | None:
    """The W3C ``traceparent`` of the span active now, or None (no span, or OpenTelemetry
    not in use)."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def traced(spec: JobSpec) -> JobSpec:
    """``spec`` with the active span's traceparent (when it has none and a span is active):
    what the client submits, so the job's runs' spans link to the submitter's."""
    if spec.trace_context is not None:
        return spec
    parent = traceparent()
    return spec if parent is None else replace(spec, trace_context=parent)
