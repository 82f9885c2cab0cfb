"""``@app.task``'s limits: read and checked when the task is declared, at import."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tickwork.app import App
from tickwork.errors import ValidationError
from tickwork.tasks.task import TaskDefaults


@pytest.fixture
def app(tmp_path: Path) -> App:
    return App(f"sqlite:///{tmp_path / 'tickwork.db'}")  # opened on first use: never here


def defaults(app: App, **limits: Any) -> TaskDefaults:
    @app.task(**limits)
    def paced(ctx: object) -> None: ...

    return paced.defaults


@pytest.mark.parametrize(
    ("rate", "per_second"), [("10/s", 10.0), ("30/m", 0.5), ("100/h", 100 / 3600), (2.5, 2.5)]
)
def test_a_tasks_rate_is_read_as_runs_per_second(app: App, rate: Any, per_second: float) -> None:
    got = defaults(app, rate=rate, burst=4)
    assert got.rate == pytest.approx(per_second)
    assert got.burst == 4


def test_a_task_may_have_a_rate_and_max_running_together(app: App) -> None:
    got = defaults(app, max_running=2, rate="5/s")
    assert (got.max_running, got.rate, got.burst) == (2, 5.0, None)


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"rate": 0}, "rate"),
        ({"rate": -1.0}, "rate"),
        ({"rate": "fast"}, "rate"),
        ({"rate": "10/d"}, "rate"),
        ({"rate": float("inf")}, "rate"),
        ({"rate": "10/s", "burst": 0}, "burst"),
        ({"rate": "10/s", "burst": 1.5}, "burst"),
        ({"burst": 5}, "burst needs a rate"),
        ({"max_running": 0, "rate": "1/s"}, "max_running"),
    ],
)
def test_a_bad_task_rate_or_burst_is_refused_when_the_task_is_declared(
    app: App, limits: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError, match=field):
        defaults(app, **limits)
    assert "paced" not in app.registry.names()
