"""tickwork: a distributed job scheduler. Jobs run on time, once per slot, never lost.

The public Python API::

    from tickwork import App, Context, Retry, Discard

    app = App()                       # ./tickwork.db, or App("postgresql://...")

    @app.task(max_attempts=5, timeout=60)
    def send_report(ctx: Context, to: str) -> None: ...

Everything else is reached through these names or documented modules
(``tickwork.errors``, ``tickwork.job``, ``tickwork.schedule``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickwork.app import App
    from tickwork.errors import TickworkError, ValidationError
    from tickwork.job import Job, JobState, MisfirePolicy, OverlapPolicy, Run, RunState
    from tickwork.retry import RetryPolicy
    from tickwork.tasks.task import Context, Discard, Retry, Task

_HOMES = {
    "App": "tickwork.app",
    "Context": "tickwork.tasks.task",
    "Discard": "tickwork.tasks.task",
    "Job": "tickwork.job",
    "JobState": "tickwork.job",
    "MisfirePolicy": "tickwork.job",
    "OverlapPolicy": "tickwork.job",
    "Retry": "tickwork.tasks.task",
    "RetryPolicy": "tickwork.retry",
    "Run": "tickwork.job",
    "RunState": "tickwork.job",
    "Task": "tickwork.tasks.task",
    "TickworkError": "tickwork.errors",
    "ValidationError": "tickwork.errors",
}
"""Where each public name lives. They are imported on first use (PEP 562), so that a
``tickwork --help`` or ``import tickwork.cron`` does not pay for the App, the client and
the store."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tickwork' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])


__version__ = "0.1.0"

__all__ = [
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
