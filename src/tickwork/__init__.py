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

from tickwork.app import App
from tickwork.errors import TickworkError, ValidationError
from tickwork.job import Job, JobState, MisfirePolicy, OverlapPolicy, Run, RunState
from tickwork.retry import RetryPolicy
from tickwork.tasks.task import Context, Discard, Retry, Task

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
