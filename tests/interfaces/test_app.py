"""The Python API: ``App``, ``@app.task``, ``app.submit`` and ``app.schedule``; bad input
raises a typed error and writes nothing."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.app import App, Context, Task, load_app
from tickwork.config import Config
from tickwork.errors import InvalidArgs, InvalidCron, UnknownTask, ValidationError
from tickwork.job import JobState, MisfirePolicy, OverlapPolicy
from tickwork.retry import RetryPolicy
from tickwork.schedule import Cron, Interval, Once
from tickwork.store import Store


@pytest.fixture
def app(store: Store) -> Iterator[App]:
    application = App(config=Config(db_url=store.url))
    yield application
    application.close()


def jobs_in(store: Store) -> int:
    return len(store.list_jobs().items)


def test_a_bare_decorator_registers_the_function_under_its_name(app: App) -> None:
    @app.task
    def send_report(ctx: Context, to: str) -> str:
        return to

    assert isinstance(send_report, Task)
    assert send_report.name == "send_report"
    assert app.registry.get("send_report") is send_report
    assert send_report(None, to="x") == "x"  # type: ignore[arg-type]  # still callable


def test_task_defaults_apply_to_its_jobs_and_a_submit_overrides_them(
    app: App, store: Store
) -> None:
    @app.task(name="reports.send", max_attempts=5, backoff=(2, 60), timeout=30, queue="mail",
              priority=7)  # fmt: skip
    def send(ctx: Context) -> None:
        pass

    default = app.submit(send)
    override = app.submit("reports.send", max_attempts=2, queue="urgent", timeout=5)

    assert default.task == "reports.send"
    assert default.retry == RetryPolicy(max_attempts=5, backoff_base=2, backoff_cap=60)
    assert default.timeout == timedelta(seconds=30)
    assert (default.queue, default.priority) == ("mail", 7)
    assert override.retry == RetryPolicy(max_attempts=2, backoff_base=2, backoff_cap=60)
    assert (override.queue, override.timeout) == ("urgent", timedelta(seconds=5))


def test_submit_now_at_or_after_a_delay(app: App, store: Store) -> None:
    @app.task
    def noop(ctx: Context) -> None:
        pass

    now_job = app.submit(noop)
    at = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
    at_job = app.submit(noop, at=at)
    before = store.now()
    delay_job = app.submit(noop, delay=timedelta(minutes=10))

    assert store.list_runs(job_id=now_job.id).items  # due at once: queued at submit
    assert at_job.schedule == Once(at=at)
    assert delay_job.next_run_at is not None
    assert delay_job.next_run_at >= before + timedelta(minutes=10)


def test_an_unknown_task_raises_unknown_task_and_writes_nothing(app: App, store: Store) -> None:
    with pytest.raises(UnknownTask, match="unknown task 'nope'"):
        app.submit("nope")
    assert jobs_in(store) == 0


def test_args_that_do_not_fit_the_handler_are_refused_at_submit(app: App, store: Store) -> None:
    @app.task
    def greet(ctx: Context, name: str) -> None:
        pass

    with pytest.raises(InvalidArgs, match="missing a required argument: 'name'"):
        app.submit(greet, {"nam": "x"})
    with pytest.raises(InvalidArgs, match="JSON object"):
        app.submit(greet, ["x"])  # type: ignore[arg-type]
    assert jobs_in(store) == 0


def test_built_in_tasks_are_always_known_and_check_their_args(app: App, store: Store) -> None:
    assert app.submit("shell", {"argv": ["true"]}).task == "shell"
    assert app.submit("http", {"url": "https://example.com"}).task == "http"
    with pytest.raises(InvalidArgs, match="argv"):
        app.submit("shell", {"argv": "rm -rf /"})
    with pytest.raises(InvalidArgs, match="not an absolute http"):
        app.submit("http", {"url": "file:///etc/passwd"})
    assert jobs_in(store) == 2


def test_a_builtin_name_cannot_be_taken(app: App) -> None:
    with pytest.raises(ValidationError, match="built-in"):

        @app.task(name="shell")
        def mine(ctx: Context) -> None:
            pass


def test_an_idempotency_key_returns_the_same_job(app: App, store: Store) -> None:
    first = app.submit("shell", {"argv": ["true"]}, idempotency_key="nightly-2030-01-01")
    again = app.submit("shell", {"argv": ["true"]}, idempotency_key="nightly-2030-01-01")

    assert again.id == first.id
    assert jobs_in(store) == 1


def test_schedule_creates_the_named_job_then_updates_it_in_place(app: App, store: Store) -> None:
    @app.task
    def report(ctx: Context, to: str) -> None:
        pass

    first = app.schedule(report, cron="0 9 * * MON-FRI", tz="Europe/Berlin", name="daily",
                         args={"to": "ops"}, misfire="skip", overlap="forbid")  # fmt: skip
    same = app.schedule(report, cron="0 9 * * MON-FRI", tz="Europe/Berlin", name="daily",
                        args={"to": "ops"}, misfire="skip", overlap="forbid")  # fmt: skip
    moved = app.schedule(report, cron="0 10 * * MON-FRI", tz="Europe/Berlin", name="daily",
                         args={"to": "ops"})  # fmt: skip

    assert same.id == first.id == moved.id
    assert jobs_in(store) == 1
    assert first.schedule == Cron("0 9 * * MON-FRI", "Europe/Berlin")
    assert (first.misfire, first.overlap) == (MisfirePolicy.SKIP, OverlapPolicy.FORBID)
    assert moved.schedule == Cron("0 10 * * MON-FRI", "Europe/Berlin")
    assert moved.state is JobState.ACTIVE


def test_schedule_every_defaults_its_name_to_the_task(app: App) -> None:
    @app.task
    def ping(ctx: Context) -> None:
        pass

    job = app.schedule(ping, every=30)

    assert job.name == "ping"
    assert isinstance(job.schedule, Interval)
    assert job.schedule.every == timedelta(seconds=30)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"cron": "61 * * * *"}, InvalidCron),
        ({"cron": "* * * * *", "tz": "Mars/Olympus"}, ValidationError),
        ({"every": 0.5}, ValidationError),
        ({"cron": "* * * * *", "every": 30}, ValidationError),
        ({}, ValidationError),
        ({"cron": "* * * * *", "misfire": "sometimes"}, ValidationError),
    ],
)
def test_a_bad_schedule_raises_and_writes_nothing(
    app: App, store: Store, kwargs: dict[str, object], error: type[Exception]
) -> None:
    @app.task
    def ping(ctx: Context) -> None:
        pass

    with pytest.raises(error):
        app.schedule(ping, **kwargs)  # type: ignore[arg-type]
    assert jobs_in(store) == 0


def test_the_database_comes_from_the_argument_then_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TICKWORK_DB", "sqlite:///from-env.db")
    assert App().config.db_url == "sqlite:///from-env.db"
    assert App("sqlite:///explicit.db").config.db_url == "sqlite:///explicit.db"
    monkeypatch.delenv("TICKWORK_DB")
    assert App().config.db_url == "sqlite:///./tickwork.db"


def test_load_app_finds_the_modules_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "myapp_for_load.py").write_text(
        textwrap.dedent(
            """
            from tickwork.app import App
            app = App("sqlite:///unused.db")

            @app.task
            def hello(ctx):
                return "hi"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        loaded = load_app("myapp_for_load")
        assert "hello" in loaded.registry
        assert load_app("myapp_for_load:app") is loaded
        with pytest.raises(ValidationError, match="is not an App"):
            load_app("myapp_for_load:hello")
        with pytest.raises(ValidationError, match="cannot import"):
            load_app("no_such_module_here")
    finally:
        sys.modules.pop("myapp_for_load", None)


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_a_task_max_running_below_one_is_rejected_at_import(app: App, bad: Any) -> None:
    with pytest.raises(ValidationError, match="max_running"):

        @app.task(max_running=bad)
        def never(ctx: Context) -> None: ...

    assert "never" not in app.registry


def test_a_task_declares_its_max_running(app: App) -> None:
    @app.task(max_running=1)
    def backup(ctx: Context) -> None: ...

    assert backup.defaults.max_running == 1
