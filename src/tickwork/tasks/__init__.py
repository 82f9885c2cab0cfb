"""The task model: what a worker can run, as the client, the CLI and the API see it too.

- :mod:`.task`: a :class:`Task` (a handler and its defaults), the :class:`Context` it is
  called with, and the :class:`Retry` and :class:`Discard` a handler raises;
- :mod:`.registry`: a :class:`Registry`, names to tasks, the built-ins in every one;
- :mod:`.builtins`: the built-in tasks ``shell`` and ``http``;
- :mod:`.egress`: where an ``http`` run may connect.

Nothing here runs a task on a schedule: that is the worker's (:mod:`tickwork.worker`),
which this package does not import, so ``import tickwork.client`` loads no worker.
"""

from tickwork.tasks.registry import Registry
from tickwork.tasks.task import Context, Discard, Retry, Task, TaskDefaults

__all__ = ["Context", "Discard", "Registry", "Retry", "Task", "TaskDefaults"]
