"""What a worker takes: the tasks it claims runs of, how many runs at once when no
concurrency is configured, the limits its tasks declare, and why it refuses a run that its
claim should not have handed it (a last resort: see "Runs this worker cannot execute" in
:mod:`tickwork.worker`)."""

from __future__ import annotations

from typing import Any

from tickwork.config import ASYNC_CONCURRENCY, SYNC_CONCURRENCY
from tickwork.job import ClaimedRun
from tickwork.records import TaskLimits
from tickwork.tasks.builtins import SHELL
from tickwork.tasks.registry import Registry
from tickwork.tasks.task import Context, Task
from tickwork.worker.outcome import Outcome


def claimable_tasks(registry: Registry, *, allow_shell: bool = False) -> list[str]:
    """The tasks a worker of ``registry`` runs, so claims runs of, by name: its app's, the
    built-in ``http``, and ``shell`` only when it runs shell commands (``allow_shell``)."""
    return [name for name in registry.names() if name != SHELL or allow_shell]


def default_concurrency(registry: Registry, *, allow_shell: bool = False) -> int:
    """A worker's concurrency when none is configured: ASYNC_CONCURRENCY (200) when every
    task of its app is ``async def``, else SYNC_CONCURRENCY (10).

    A sync run holds a pool thread while it runs, and CPU-bound handlers on 200 threads
    would only thrash a few cores; async runs share the event loop's one thread, where a
    slot costs a coroutine. The built-in ``http`` task does not count (it waits on the
    network, not on a core), ``shell`` does when this worker runs it (its commands may be
    CPU-bound). A worker with no task of its own (built-ins only) gets the sync default.
    """
    counted = [
        task
        for name in registry.names()
        if (task := registry.find(name)) is not None
        and (not task.builtin or (task.name == SHELL and allow_shell))
    ]
    if counted and all(task.is_async for task in counted):
        return ASYNC_CONCURRENCY
    return SYNC_CONCURRENCY


def task_limits(registry: Registry) -> dict[str, TaskLimits]:
    """Each of the registry's own tasks' limits (unlimited: clears those an older version
    of the code declared), written before a worker's first claim. Built-in tasks declare
    none."""
    found = (registry.find(name) for name in registry.names())
    return {
        task.name: TaskLimits(task.defaults.max_running, task.defaults.rate, task.defaults.burst)
        for task in found
        if task is not None and not task.builtin
    }


def why_refused(
    run: ClaimedRun,
    task: Task[..., Any] | None,
    registry: Registry,
    node_id: str,
    *,
    allow_shell: bool,
) -> Outcome | None:
    """Why worker ``node_id`` does not execute ``run`` (its ``task`` there, None:
    unknown), or None when it does."""
    if task is None:
        return Outcome(
            False,
            error=f"task {run.task!r} is not registered on worker {node_id} "
            f"(known: {', '.join(registry.names())})",
        )
    if task.name == SHELL and not allow_shell:
        return Outcome(
            False,
            error=f"worker {node_id} does not run shell tasks (start workers with "
            "--allow-shell, and route shell jobs to a queue only they consume)",
            discard=True,
        )
    return None


def never_run(ctx: Context, **args: Any) -> None:
    """The handler of a refused run's stand-in task."""
    raise AssertionError("never called: the run is refused before execution")
