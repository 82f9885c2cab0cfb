"""The public names are a promise: this list changes only on purpose."""

import tickwork


def test_the_public_names_are_exactly_the_documented_ones() -> None:
    assert sorted(tickwork.__all__) == [
        "App",
        "Context",
        "Discard",
        "Job",
        "JobState",
        "MisfirePolicy",
        "OverlapPolicy",
        "Retry",
        "RetryPolicy",
        "Run",
        "RunState",
        "Task",
        "TickworkError",
        "ValidationError",
        "__version__",
    ]


def test_every_public_name_is_importable_from_the_package() -> None:
    for name in tickwork.__all__:
        assert getattr(tickwork, name) is not None, name


def test_the_readme_example_registers_a_task_on_an_app(tmp_path: object) -> None:
    from tickwork import App, Context

    app = App(f"sqlite:///{tmp_path}/readme.db")
    try:

        @app.task(max_attempts=5, timeout=60)
        def send_report(ctx: Context, to: str) -> None:
            pass

        assert "send_report" in app.registry
        job = app.submit(send_report, args={"to": "ops@example.com"}, delay=600)
        assert job.task == "send_report"
        assert job.retry.max_attempts == 5
    finally:
        app.close()
