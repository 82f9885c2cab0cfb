"""The task registry: names to handlers. An :class:`~tickwork.app.App` fills one with its
``@app.task`` functions; a :class:`~tickwork.worker.Worker` runs what it finds there.

The built-in tasks ``shell`` and ``http`` are in every registry and cannot be replaced.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tickwork.errors import UnknownTask, ValidationError
from tickwork.tasks.builtins import BUILTINS
from tickwork.tasks.task import Task


class Registry:
    def __init__(self) -> None:
        self._tasks: dict[str, Task[..., Any]] = dict(BUILTINS)

    def add(self, task: Task[..., Any]) -> None:
        """Register ``task``; a second task of the same name is a ValidationError."""
        existing = self._tasks.get(task.name)
        if existing is not None and existing is not task:
            what = "a built-in task" if existing.builtin else f"already registered to {existing!r}"
            raise ValidationError(f"task name {task.name!r} is {what}", field="task")
        self._tasks[task.name] = task

    def get(self, name: str) -> Task[..., Any]:
        """The task, or UnknownTask."""
        try:
            return self._tasks[name]
        except KeyError:
            raise UnknownTask(name) from None

    def find(self, name: str) -> Task[..., Any] | None:
        """The task, or None."""
        return self._tasks.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._tasks))

    def __len__(self) -> int:
        return len(self._tasks)

    def names(self) -> list[str]:
        return sorted(self._tasks)
