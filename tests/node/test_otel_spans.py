"""OpenTelemetry: a real worker makes one span per run attempt, linked to the span that
submitted the job, checked with the SDK's in-memory exporter; an application that does not
use OpenTelemetry never imports it."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from worker_support import finished, make_app, running

from tickwork import Context, Retry
from tickwork.cli.serve import configure_logging
from tickwork.job import RunState
from tickwork.store import Store
from tickwork.worker.observe import RunContextFilter

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans this test ends (the provider is global: set once per process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def attempt_spans(exporter: InMemorySpanExporter, task: str) -> list[ReadableSpan]:
    found = [s for s in exporter.get_finished_spans() if s.name == f"tickwork.run {task}"]
    return sorted(found, key=attempt_of)


def attempt_of(span: ReadableSpan) -> int:
    attempt = (span.attributes or {}).get("tickwork.attempt", 0)
    assert isinstance(attempt, int), attempt
    return attempt


def test_each_attempt_is_a_span_linked_to_the_span_that_submitted_the_job(
    store: Store, spans: InMemorySpanExporter
) -> None:
    app = make_app(store)
    tracer = trace.get_tracer("tests")

    @app.task(max_attempts=3)
    def charge(ctx: Context, amount: int) -> None:
        with tracer.start_as_current_span("charge.call-gateway"):
            if ctx.attempt == 1:
                raise Retry(after=0, reason="gateway busy")

    with app:
        with tracer.start_as_current_span("http POST /orders") as request:
            job = app.submit(charge, args={"amount": 5}, queue="payments", tenant="acme")
        assert job.trace_context is not None
        with running(app.worker(queues=["payments"])):
            run = finished(store, job)
    assert run.state is RunState.SUCCEEDED

    first, second = attempt_spans(spans, "charge")
    for span, attempt, outcome in ((first, 1, "failed"), (second, 2, "succeeded")):
        assert span.kind is SpanKind.CONSUMER
        attributes = dict(span.attributes or {})
        lag = attributes.pop("tickwork.lag_ms")
        assert isinstance(lag, float)
        assert lag >= 0
        assert attributes == {
            "tickwork.task": "charge",
            "tickwork.job_id": job.id,
            "tickwork.run_id": run.id,
            "tickwork.attempt": attempt,
            "tickwork.tenant": "acme",
            "tickwork.queue": "payments",
            "tickwork.outcome": outcome,
        }
        # Linked to the submitter's span, not its child: a new trace per attempt.
        [link] = span.links
        assert link.context.trace_id == request.get_span_context().trace_id
        assert link.context.span_id == request.get_span_context().span_id
        assert span.context.trace_id != request.get_span_context().trace_id
    assert first.status.status_code is StatusCode.ERROR
    assert first.status.description == "gateway busy"
    assert second.status.status_code is StatusCode.UNSET
    # The handler's own spans are children of its attempt's span.
    inner = [s for s in spans.get_finished_spans() if s.name == "charge.call-gateway"]
    assert sorted(s.parent.span_id for s in inner if s.parent) == sorted(
        s.context.span_id for s in (first, second)
    )


def test_an_async_handler_dead_on_its_last_attempt_and_a_job_submitted_without_a_span(
    store: Store, spans: InMemorySpanExporter
) -> None:
    app = make_app(store)

    @app.task(max_attempts=1)
    async def fragile(ctx: Context) -> None:
        raise ValueError("bad input")

    with app:
        job = app.submit(fragile)
        assert job.trace_context is None
        with running(app.worker()):
            assert finished(store, job).state is RunState.DEAD
    [span] = attempt_spans(spans, "fragile")
    assert span.attributes is not None
    assert span.attributes["tickwork.outcome"] == "dead"
    assert span.links == ()
    assert span.status.description == "ValueError: bad input"


def test_an_application_without_opentelemetry_never_imports_it(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from tickwork import App
        from tickwork.testing import wait_until

        app = App("sqlite:///{tmp_path / "t.db"}")

        @app.task
        def hello(ctx):
            ctx.logger.info("hi")

        job = app.submit(hello)
        worker = app.worker(node_id="plain")
        worker.start()
        wait_until(lambda: app.client.get_run(
            app.client.list_runs(job_id=job.id).items[0].id).state.value == "succeeded")
        worker.stop()
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_failed_attempts_span_records_the_exception_as_an_event(
    store: Store, spans: InMemorySpanExporter
) -> None:
    app = make_app(store)

    @app.task(max_attempts=1)
    def fragile(ctx: Context) -> None:
        raise ValueError("bad input")

    with app:
        job = app.submit(fragile)
        with running(app.worker()):
            assert finished(store, job).state is RunState.DEAD
    [span] = attempt_spans(spans, "fragile")
    [event] = span.events
    assert event.name == "exception"
    attributes = dict(event.attributes or {})
    assert attributes["exception.type"] == "ValueError"
    assert attributes["exception.message"] == "bad input"
    assert "raise ValueError" in str(attributes["exception.stacktrace"])


def test_a_handlers_log_lines_carry_its_spans_trace_and_span_ids(
    store: Store, spans: InMemorySpanExporter, capsys: pytest.CaptureFixture[str]
) -> None:
    app = make_app(store)
    logger = logging.getLogger("tickwork")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    configure_logging("info", "json")
    try:

        @app.task
        def charge(ctx: Context) -> None:
            ctx.logger.info("charging")

        with app:
            job = app.submit(charge)
            with running(app.worker()):
                assert finished(store, job).state is RunState.SUCCEEDED
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved
    [span] = attempt_spans(spans, "charge")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    [line] = [entry for entry in lines if entry["msg"].endswith("charging")]
    assert line["trace_id"] == f"{span.context.trace_id:032x}"
    assert line["span_id"] == f"{span.context.span_id:016x}"
    assert line["run_id"] == job.id or line["job_id"] == job.id
    outside = [entry for entry in lines if entry["logger"] == "tickwork.worker"]
    assert outside
    assert all("trace_id" not in entry for entry in outside)  # the worker's own lines


def test_the_text_format_ends_a_line_in_a_span_with_its_ids(
    spans: InMemorySpanExporter,
) -> None:
    record = logging.LogRecord("tickwork.task.x", logging.INFO, __file__, 1, "hello", (), None)
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("outer") as outer:
        RunContextFilter().filter(record)
    context = outer.get_span_context()
    # The filter sets these attributes on the record (logging's documented way to carry them).
    assert record.__dict__["run_context"] == (
        f" [trace={context.trace_id:032x} span={context.span_id:016x}]"
    )
    bare = logging.LogRecord("tickwork.task.x", logging.INFO, __file__, 1, "hello", (), None)
    RunContextFilter().filter(bare)
    assert (bare.__dict__["run_context"], bare.__dict__["trace_id"]) == ("", None)
