"""Tenants' and tasks' limits, written once for every dialect: set, read, and list.

The claim enforces them (each dialect's hot path, over :mod:`tickwork.store.limits`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tickwork.records import (
    DEFAULT_WEIGHT,
    KEEP,
    Keep,
    check_task_limits,
    check_tenant_limits,
)
from tickwork.store.base import TaskLimits, TaskStatus, TenantLimits, TenantStatus
from tickwork.store.limits import refill_all, whole
from tickwork.store.sql.core import SqlCore


class TenantTransitions(SqlCore):
    def set_tenant_limits(
        self,
        tenant: str,
        *,
        max_running: int | Keep | None = KEEP,
        rate: float | Keep | None = KEEP,
        burst: int | Keep | None = KEEP,
        weight: float | Keep | None = KEEP,
        now: datetime | None = None,
    ) -> TenantLimits:
        with self.driver.write() as tx:
            row = tx.one(self.q["tenant_limits_for_update"], {"tenant": tenant})
            old = _limits(row) if row is not None else TenantLimits(tenant)
            limits = check_tenant_limits(
                TenantLimits(
                    tenant,
                    old.max_running if max_running is KEEP else max_running,
                    old.rate if rate is KEEP else rate,
                    old.burst if burst is KEEP else burst,
                    old.weight if weight is KEEP else DEFAULT_WEIGHT if weight is None else weight,
                )
            )
            if limits.unlimited:
                tx.count(self.q["delete_tenant_limits"], {"tenant": tenant})
                return limits
            params = {
                "tenant": tenant,
                "max_running": limits.max_running,
                "rate": limits.rate,
                "burst": limits.burst,
                "weight": limits.weight,
                "now": self.codec.time(tx.now(now)),
            }
            stored = tx.one(self.q["set_tenant_limits"], params)
        assert stored is not None
        return _limits(stored)

    def tenant_limits(self, tenant: str) -> TenantLimits:
        with self.driver.read() as tx:
            row = tx.one(self.q["tenant_limits"], {"tenant": tenant})
        return _limits(row) if row is not None else TenantLimits(tenant)

    def list_tenants(
        self, *, tenant: str | None = None, now: datetime | None = None
    ) -> list[TenantStatus]:
        with self.driver.snapshot() as tx:
            at = tx.now(now)
            found = tx.all(
                self.q["tenant_statuses"], {"tenant": tenant, "now": self.codec.time(at)}
            )
        statuses = [
            TenantStatus(_limits(r), int(r["running"]), int(r["due"]), self._starts(r, at))
            for r in found
        ]
        if tenant is not None and not statuses:
            return [TenantStatus(TenantLimits(tenant), 0, 0)]
        return statuses

    def _starts(self, r: Any, now: datetime, name: str = "tenant") -> int | None:
        """How many runs the tenant's (or, by ``name``, task's) rate lets start at ``now``,
        as the claim counts them."""
        if r["rate"] is None:
            return None
        row = (
            r[name],
            r["rate"],
            r["burst"],
            r["tokens"],
            self.codec.from_time(r["refilled_at"]),
        )
        [(tokens, _)] = refill_all([row], now).values()
        return whole(tokens)

    def register_task_limits(
        self, limits: Mapping[str, TaskLimits], *, now: datetime | None = None
    ) -> None:
        checked = {task: check_task_limits(value) for task, value in limits.items()}
        with self.driver.write() as tx:
            t = self.codec.time(tx.now(now))
            for task in sorted(checked):  # one order for every worker: no deadlock
                value = checked[task]
                if value.unlimited:
                    tx.count(self.q["clear_task_limit"], {"task": task})
                else:
                    params = {
                        "task": task,
                        "max_running": value.max_running,
                        "rate": value.rate,
                        "burst": value.burst,
                        "now": t,
                    }
                    tx.count(self.q["set_task_limit"], params)

    def task_limits(self) -> dict[str, TaskLimits]:
        with self.driver.read() as tx:
            return {r["task"]: _task_limits(r) for r in tx.all(self.q["task_limits"], {})}

    def task_status(self, task: str, *, now: datetime | None = None) -> TaskStatus:
        with self.driver.snapshot() as tx:
            at = tx.now(now)
            r = tx.one(self.q["task_status"], {"task": task})
        if r is None:
            return TaskStatus(task, TaskLimits())
        return TaskStatus(task, _task_limits(r), self._starts(r, at, "task"))


def _limits(r: Any) -> TenantLimits:
    return TenantLimits(
        r["tenant"],
        r["max_running"],
        float(r["rate"]) if r["rate"] is not None else None,
        r["burst"],
        float(r["weight"]),
    )


def _task_limits(r: Any) -> TaskLimits:
    return TaskLimits(
        r["max_running"], float(r["rate"]) if r["rate"] is not None else None, r["burst"]
    )
