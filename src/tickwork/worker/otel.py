"""OpenTelemetry, with the ``otel`` extra (``pip install tickwork[otel]``): the API only,
so you bring your own SDK and exporter.

Spans
    Every attempt of a run is one span, ``tickwork.run <task>`` (kind CONSUMER), from the
    handler's start to its outcome, with the attributes ``tickwork.task``,
    ``tickwork.job_id``, ``tickwork.run_id``, ``tickwork.attempt``, ``tickwork.tenant``,
    ``tickwork.queue``, ``tickwork.outcome`` (``succeeded``, ``failed``: retried,
    ``dead``) and ``tickwork.lag_ms`` (start minus the slot, on the worker's clock). A
    failed attempt sets the span's status to ERROR with the error's first line, and what
    its handler raised is recorded on the span as an ``exception`` event (type, message,
    stack trace), as OpenTelemetry's own instrumentations record one.

Trace context
    Each run attempt's span is *linked* to the ``traceparent`` its job was submitted with
    (:mod:`tickwork.tracing`).

Nothing here imports ``opentelemetry`` unless the application has already imported it: an
application that does not use OpenTelemetry pays nothing and needs nothing installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tickwork.job import ClaimedRun

if TYPE_CHECKING:
    from tickwork.worker.outcome import Outcome

TRACER_NAME = "tickwork"
SPAN_NAME = "tickwork.run"


def _link(parent: str | None) -> list[Any]:
    """A link to the span ``parent`` names (a traceparent), or none for a missing or
    malformed one: a bad header must never fail a run."""
    from opentelemetry import trace

    if not parent:
        return []
    parts = parent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return []
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return []
    context = trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(flags)
    )
    return [trace.Link(context)] if context.is_valid else []


class _Span:
    def __init__(self, span: Any, run: ClaimedRun) -> None:
        self._span = span
        self._run = run

    def raised(self, exc: BaseException) -> None:
        self._span.record_exception(exc)

    def ended(self, outcome: Outcome) -> None:
        from opentelemetry.trace import Status, StatusCode

        run = self._run
        if outcome.succeeded:
            state = "succeeded"
        elif outcome.discard or run.attempt >= run.max_attempts:
            state = "dead"
        else:
            state = "failed"
        self._span.set_attribute("tickwork.outcome", state)
        if not outcome.succeeded:
            first_line = (outcome.error or "failed").partition("\n")[0]
            self._span.set_status(Status(StatusCode.ERROR, first_line))


@contextmanager
def attempt_span(run: ClaimedRun, parent: str | None, started: datetime) -> Iterator[_Span]:
    """The span of one attempt (see the module docstring), linked to ``parent`` (the job's
    traceparent); current while the handler runs, so its own spans are its children."""
    from opentelemetry import trace

    tracer = trace.get_tracer(TRACER_NAME)
    lag = (started - run.scheduled_for).total_seconds() * 1000
    attributes: dict[str, Any] = {
        "tickwork.task": run.task,
        "tickwork.job_id": run.job_id,
        "tickwork.run_id": run.id,
        "tickwork.attempt": run.attempt,
        "tickwork.tenant": run.tenant,
        "tickwork.queue": run.queue,
        "tickwork.lag_ms": round(lag, 3),
    }
    with tracer.start_as_current_span(
        f"{SPAN_NAME} {run.task}",
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
        links=_link(parent),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield _Span(span, run)
