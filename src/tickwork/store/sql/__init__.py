"""SqlStore: every cold-path transition written once, over a dialect's
:class:`~tickwork.store.driver.Driver`.

A dialect's store subclasses it and adds what really differs: its hot paths (trigger,
claim, complete, heartbeat, bulk submit), migrations and notifications. The parts:

- :mod:`.jobs`: put_schedule, pause, resume, cancel, trigger_job, job reads;
- :mod:`.runs`: fail (retry or dead), release, rescue, run commands, prune, run reads;
- :mod:`.cluster`: nodes, API keys, sessions, the leader lease;
- :mod:`.tenants`: tenants' limits;
- :mod:`.calendars`: business-day calendars, and binding a job's schedule to its calendar;
- :mod:`.faults`: fault injection's opt-in and marks;
- :mod:`.minutes`: the per-minute rollup (the dashboard's time axis).
"""

from __future__ import annotations

from datetime import datetime

from tickwork.store.sql.calendars import CalendarTransitions
from tickwork.store.sql.cluster import ClusterTransitions
from tickwork.store.sql.faults import FaultTransitions
from tickwork.store.sql.jobs import JobTransitions
from tickwork.store.sql.minutes import MinuteRollup
from tickwork.store.sql.runs import RunTransitions
from tickwork.store.sql.tenants import TenantTransitions


class SqlStore(
    JobTransitions,
    RunTransitions,
    ClusterTransitions,
    TenantTransitions,
    CalendarTransitions,
    FaultTransitions,
    MinuteRollup,
):
    def close(self) -> None:
        self.driver.close()

    def now(self) -> datetime:
        return self.driver.now()


__all__ = ["SqlStore"]
