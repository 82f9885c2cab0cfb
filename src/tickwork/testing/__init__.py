"""Test helpers: a testing kit for your tasks, a clock the test moves, and one way to wait
for a condition.

:class:`TickworkTestKit` tests *your* tasks and schedules, inline: ``kit.advance(hours=1)``
fires the cron and interval slots that fall in the hour, ``kit.drain()`` runs what is due
(retries included) in the calling thread, and ``kit.assert_submitted(task, args=...)``
checks what your code submitted. It drives the same store and the same code as production
(the store's ``trigger``, ``claim``, ``complete`` and ``fail``; the worker's handler call),
on a :class:`FakeClock`. ``docs/testing-your-tasks.md`` has worked examples; the pytest
plugin (:mod:`tickwork.pytest_plugin`) gives each test a kit on its own store.

:class:`FakeClock` stands in for the system clock in a
:class:`~tickwork.scheduler.Scheduler`, a :class:`~tickwork.worker.Worker` or a
:class:`~tickwork.node.Node`. Time stands still until the test calls :meth:`FakeClock.advance`
or :meth:`FakeClock.set`; then every service wait whose deadline has passed ends at once,
and the services pass the clock's time as ``now=`` to the store, so due-ness, leases and
expiry are judged at the time the test set (the store's own clock is not asked). Pair it
with :meth:`~tickwork.service.Service.wait_passes` to know that a service has acted on the
new time::

    clock = FakeClock(datetime(2030, 1, 7, 8, 59, tzinfo=UTC))
    scheduler = Scheduler(store, config, clock)
    ...
    done = scheduler.trigger.passes
    clock.advance(60)
    scheduler.trigger.wait_passes(done + 1)

:func:`wait_until` polls a predicate until it holds (or fails the test with a message): for
what no pass counter covers, such as another process's effect. ``docs/testing.md`` shows
both at work.
"""

from tickwork.testing.clock import FakeClock, wait_until
from tickwork.testing.kit import Executed, Submission, TickworkTestKit

__all__ = ["Executed", "FakeClock", "Submission", "TickworkTestKit", "wait_until"]
