"""Log records a handler emits carry its run: run id, job id, attempt, tenant, in the text
and JSON formats of the long-running commands, for sync handlers (pool threads) and async
ones (the event loop), and for any logger given the filter."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Iterator

import pytest
from worker_support import finished, make_app, running

from tickwork import Context
from tickwork.cli.serve import configure_logging
from tickwork.job import RunState
from tickwork.store import Store
from tickwork.worker.observe import RunContextFilter, current_run


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.addFilter(RunContextFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def tickwork_logging() -> Iterator[None]:
    """configure_logging changes the ``tickwork`` logger: put it back afterwards."""
    logger = logging.getLogger("tickwork")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


def run_two_handlers(store: Store) -> tuple[dict[str, object], dict[str, object]]:
    """A sync and an async handler, run by a real worker at once (both in their handler
    when either logs), each logging through ctx.logger and through an app logger."""
    app = make_app(store, concurrency=4)
    both_in = threading.Barrier(2, timeout=10)
    mine = logging.getLogger("myapp")

    @app.task
    def sync_task(ctx: Context) -> None:
        both_in.wait()
        ctx.logger.info("pool via ctx")
        mine.info("pool via app logger")

    @app.task
    async def async_task(ctx: Context) -> None:
        await asyncio.to_thread(both_in.wait)
        ctx.logger.info("loop via ctx")
        mine.info("loop via app logger")

    with app:
        sync_job = app.submit(sync_task, tenant="acme")
        async_job = app.submit(async_task)
        with running(app.worker()):
            sync_run = finished(store, sync_job)
            async_run = finished(store, async_job)
    assert sync_run.state is RunState.SUCCEEDED
    assert async_run.state is RunState.SUCCEEDED
    expect = {
        "sync": {"run_id": sync_run.id, "job_id": sync_job.id, "attempt": 1, "tenant": "acme"},
        "async": {
            "run_id": async_run.id,
            "job_id": async_job.id,
            "attempt": 1,
            "tenant": "default",
        },
    }
    return expect["sync"], expect["async"]


def test_json_lines_of_handlers_carry_their_run(
    store: Store, tickwork_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("info", "json")
    sync_fields, async_fields = run_two_handlers(store)
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    by_msg = {line["msg"]: line for line in lines}
    for msg, fields in (("pool via ctx", sync_fields), ("loop via ctx", async_fields)):
        [line] = [v for k, v in by_msg.items() if k.endswith(msg)]
        assert {k: line[k] for k in fields} == fields
    started = next(line for line in lines if "started" in line["msg"])
    assert "run_id" not in started  # the worker's own lines belong to no run


def test_text_lines_of_handlers_end_with_their_run(
    store: Store, tickwork_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("info", "text")
    sync_fields, _ = run_two_handlers(store)
    [line] = [x for x in capsys.readouterr().err.splitlines() if "pool via ctx" in x]
    # With OpenTelemetry imported in this process (another test did), the attempt's span
    # ids end the suffix too (tests/node/test_otel_spans.py).
    suffix = f" [run={sync_fields['run_id']} job={sync_fields['job_id']} attempt=1 tenant=acme"
    assert re.search(re.escape(suffix) + r"( trace=[0-9a-f]{32} span=[0-9a-f]{16})?\]$", line)


def test_the_filter_gives_any_logger_the_run_and_nothing_outside_one(store: Store) -> None:
    records = Records()
    mine = logging.getLogger("myapp")
    mine.addHandler(records)
    mine.setLevel(logging.INFO)
    try:
        sync_fields, async_fields = run_two_handlers(store)
        mine.info("outside")
    finally:
        mine.removeHandler(records)
    by_msg = {r.getMessage(): r for r in records.records}
    for msg, fields in (
        ("pool via app logger", sync_fields),
        ("loop via app logger", async_fields),
    ):
        assert {k: getattr(by_msg[msg], k) for k in fields} == fields
    assert by_msg["outside"].run_id is None  # type: ignore[attr-defined]
    assert by_msg["outside"].run_context == ""  # type: ignore[attr-defined]
    assert current_run() is None


def test_outside_a_run_the_filter_keeps_fields_a_record_was_logged_with() -> None:
    records = Records()
    mine = logging.getLogger("myapp.extra")
    mine.addHandler(records)
    mine.setLevel(logging.INFO)
    try:
        mine.info("billing", extra={"tenant": "acme"})
    finally:
        mine.removeHandler(records)
    [record] = records.records
    assert record.tenant == "acme"  # type: ignore[attr-defined]
    assert record.run_id is None  # type: ignore[attr-defined]
