"""Fault injection's share of the store, written once for every dialect: the database's
opt-in, the marks of injected faults on runs, and the runs they made execute again."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from tickwork.clock import from_micros
from tickwork.faults import InjectedFault
from tickwork.records import DEFAULT_PAGE, FaultMark, InjectedRun, Page, page_limit, page_of
from tickwork.store import rows
from tickwork.store.sql.core import SqlCore

FAULT_INJECTION = "fault_injection"
"""The settings row whose presence opts the database in."""


class FaultTransitions(SqlCore):
    def set_fault_injection(self, allowed: bool, *, now: datetime | None = None) -> None:
        with self.driver.write() as tx:
            if allowed:
                t = self.codec.time(tx.now(now))
                params = {"name": FAULT_INJECTION, "value": "allowed", "now": t}
                tx.count(self.q["set_setting"], params)
            else:
                tx.count(self.q["delete_setting"], {"name": FAULT_INJECTION})

    def fault_injection_allowed(self) -> bool:
        with self.driver.read() as tx:
            return tx.one(self.q["get_setting"], {"name": FAULT_INJECTION}) is not None

    def mark_injected(
        self, marks: Sequence[FaultMark], worker: str, *, now: datetime | None = None
    ) -> list[int]:
        if not marks:
            return []
        params = {
            "ids": self.codec.array([m.run_id for m in marks]),
            "tokens": self.codec.array([m.fencing_token for m in marks]),
            "faults": self.codec.array([m.fault for m in marks]),
            "by_runs": self.codec.array([m.by_run for m in marks]),
            "worker": worker,
        }
        with self.driver.write() as tx:
            t = self.codec.time(tx.now(now))
            return sorted(r["id"] for r in tx.all(self.q["mark_injected"], {**params, "now": t}))

    def injected_runs(
        self, *, tenant: str | None = None, after: int | None = None, limit: int = DEFAULT_PAGE
    ) -> Page[InjectedRun]:
        limit = page_limit(limit)
        params = {"tenant": tenant, "after": after, "limit": limit + 1}  # +1: a next page?
        with self.driver.read() as tx:
            found = tx.all(self.q["injected_runs"], params)
        runs = [InjectedRun(rows.run(r, self.codec), _marks(r["injected"])) for r in found]
        return page_of(runs, limit, lambda injected: injected.run.id)


def _marks(value: object) -> list[InjectedFault]:
    """The marks column: a JSON array (decoded by the driver, or text)."""
    found = json.loads(value) if isinstance(value, str) else value
    assert isinstance(found, list)
    return [
        InjectedFault(
            attempt=int(m["attempt"]),
            fault=str(m["fault"]),
            at=from_micros(int(m["at"])),
            worker=str(m["worker"]),
            by_run=int(m["by_run"]) if m.get("by_run") is not None else None,
        )
        for m in found
    ]
