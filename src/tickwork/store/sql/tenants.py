"""Tenants' and tasks' limits, written once for every dialect: set, read, and list.

The claim enforces them (each dialect's hot path, over :mod:`tickwork.store.limits`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tickwork.records import check_max_running
from tickwork.store.base import TenantLimits, TenantStatus
from tickwork.store.sql.core import SqlCore


class TenantTransitions(SqlCore):
    def set_tenant_limits(
        self, tenant: str, *, max_running: int | None, now: datetime | None = None
    ) -> TenantLimits:
        params = {"tenant": tenant, "max_running": check_max_running(max_running)}
        with self.driver.write() as tx:
            row = tx.one(
                self.q["set_tenant_limits"], {**params, "now": self.codec.time(tx.now(now))}
            )
        assert row is not None
        return _limits(row)

    def tenant_limits(self, tenant: str) -> TenantLimits:
        with self.driver.read() as tx:
            row = tx.one(self.q["tenant_limits"], {"tenant": tenant})
        return _limits(row) if row is not None else TenantLimits(tenant)

    def list_tenants(
        self, *, tenant: str | None = None, now: datetime | None = None
    ) -> list[TenantStatus]:
        with self.driver.snapshot() as tx:
            t = self.codec.time(tx.now(now))
            found = tx.all(self.q["tenant_statuses"], {"tenant": tenant, "now": t})
        statuses = [TenantStatus(_limits(r), int(r["running"]), int(r["due"])) for r in found]
        if tenant is not None and not statuses:
            return [TenantStatus(TenantLimits(tenant), 0, 0)]
        return statuses

    def register_task_limits(
        self, limits: dict[str, int | None], *, now: datetime | None = None
    ) -> None:
        checked = {task: check_max_running(value) for task, value in limits.items()}
        with self.driver.write() as tx:
            t = self.codec.time(tx.now(now))
            for task in sorted(checked):  # one order for every worker: no deadlock
                value = checked[task]
                if value is None:
                    tx.count(self.q["clear_task_limit"], {"task": task})
                else:
                    params = {"task": task, "max_running": value, "now": t}
                    tx.count(self.q["set_task_limit"], params)

    def task_limits(self) -> dict[str, int]:
        with self.driver.read() as tx:
            return {r["task"]: r["max_running"] for r in tx.all(self.q["task_limits"], {})}


def _limits(r: Any) -> TenantLimits:
    return TenantLimits(
        r["tenant"],
        r["max_running"],
        float(r["rate"]) if r["rate"] is not None else None,
        r["burst"],
        float(r["weight"]),
    )
