"""Role views of the Store: the part of :class:`~tickwork.store.base.Store` each kind of
process calls, as Protocols.

:class:`~tickwork.store.base.Store` is the whole contract (every method documented there);
a service takes the view of its role instead, so its dependency says what it may do and
mypy holds it to that:

- :class:`NodeRegistry`: a process in the cluster view (:mod:`tickwork.presence`; every
  worker and scheduler node registers too): its node row, the store's clock and health.
- :class:`WorkerStore`: a worker (:mod:`tickwork.worker`): claim, heartbeat, complete, fail,
  release, its task limits and fault marks; the registry and 14 more.
- :class:`LeaderStore`: the scheduler's election and its leader-only services
  (:mod:`tickwork.scheduler`): lease, trigger, rescue, prune, fold; the registry and 10 more.

Both sleepers' wake-ups (``capabilities``, ``listener``, ``next_due_at``) are in each.
Every Store satisfies each view structurally (no registration, no inheritance;
``tests/unit/test_store_roles.py`` checks both dialects), and a test double need implement
only its role's calls. The signatures here repeat the Store's; the contract is written
once, on the Store's methods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol

from tickwork.config import RUN_LEASE, TRIGGER_BATCH
from tickwork.job import ClaimedRun, Job, Run
from tickwork.records import (
    AttemptEnd,
    Completion,
    FaultMark,
    Lease,
    LeaseStatus,
    NodeRecord,
    RescueResult,
    TaskLimits,
    TriggerResult,
)
from tickwork.store.base import DEFAULT_PRUNE_BATCH, DEFAULT_RESCUE_BATCH, Listener
from tickwork.store.health import StoreHealth

__all__ = ["LeaderStore", "NodeRegistry", "WorkerStore"]


class NodeRegistry(Protocol):
    """A process's row in the cluster view, and the clock and health it reports."""

    @property
    def health(self) -> StoreHealth:
        """:attr:`Store.health <tickwork.store.base.Store.health>`."""
        ...

    def now(self) -> datetime:
        """:meth:`Store.now <tickwork.store.base.Store.now>`."""
        ...

    def register_node(
        self,
        node_id: str,
        kind: str,
        host: str,
        pid: int,
        info: dict[str, Any] | None = None,
        *,
        now: datetime | None = None,
    ) -> None:
        """:meth:`Store.register_node <tickwork.store.base.Store.register_node>`."""
        ...

    def node_heartbeat(
        self,
        node_id: str,
        *,
        running: int = 0,
        info: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> None:
        """:meth:`Store.node_heartbeat <tickwork.store.base.Store.node_heartbeat>`."""
        ...

    def deregister_node(self, node_id: str) -> None:
        """:meth:`Store.deregister_node <tickwork.store.base.Store.deregister_node>`."""
        ...

    def list_nodes(
        self, *, seen_within: timedelta | None = None, now: datetime | None = None
    ) -> list[NodeRecord]:
        """:meth:`Store.list_nodes <tickwork.store.base.Store.list_nodes>`."""
        ...


class _Notified(Protocol):
    """What a sleeper needs to be woken early (both roles sleep)."""

    @property
    def capabilities(self) -> frozenset[str]:
        """:attr:`Store.capabilities <tickwork.store.base.Store.capabilities>`."""
        ...

    def listener(self, channels: Sequence[str]) -> Listener:
        """:meth:`Store.listener <tickwork.store.base.Store.listener>`."""
        ...

    def next_due_at(self) -> datetime | None:
        """:meth:`Store.next_due_at <tickwork.store.base.Store.next_due_at>`."""
        ...


class WorkerStore(NodeRegistry, _Notified, Protocol):
    """What a worker calls: its claim loop, heartbeat, reporter and fault injector."""

    def complete_and_claim(
        self,
        completions: Sequence[Completion],
        worker: str,
        *,
        limit: int,
        lease: timedelta = RUN_LEASE,
        queues: Sequence[str] | None = None,
        tasks: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> tuple[list[int], list[ClaimedRun]]:
        """:meth:`Store.complete_and_claim <tickwork.store.base.Store.complete_and_claim>`."""
        ...

    def next_claimable_at(
        self, *, queues: Sequence[str] | None = None, tasks: Sequence[str] | None = None
    ) -> datetime | None:
        """:meth:`Store.next_claimable_at <tickwork.store.base.Store.next_claimable_at>`."""
        ...

    def heartbeat_many(
        self,
        leases: Sequence[tuple[int, int]],
        *,
        lease: timedelta = RUN_LEASE,
        now: datetime | None = None,
    ) -> dict[int, LeaseStatus]:
        """:meth:`Store.heartbeat_many <tickwork.store.base.Store.heartbeat_many>`."""
        ...

    def complete_many(
        self, completions: Sequence[Completion], *, now: datetime | None = None
    ) -> list[int]:
        """:meth:`Store.complete_many <tickwork.store.base.Store.complete_many>`."""
        ...

    def complete_in_transaction(
        self,
        run_id: int,
        fencing_token: int,
        *,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> AbstractContextManager[Any]:
        """:meth:`Store.complete_in_transaction
        <tickwork.store.base.Store.complete_in_transaction>`."""
        ...

    def fail(
        self,
        run_id: int,
        fencing_token: int,
        error: str,
        *,
        traceback: str | None = None,
        ended: AttemptEnd = AttemptEnd.FAILED,
        retry_after: timedelta | None = None,
        discard: bool = False,
        result: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Run:
        """:meth:`Store.fail <tickwork.store.base.Store.fail>`."""
        ...

    def release(self, run_id: int, fencing_token: int, *, now: datetime | None = None) -> Run:
        """:meth:`Store.release <tickwork.store.base.Store.release>`."""
        ...

    def get_job(self, job_id: int, *, tenant: str | None = None) -> Job:
        """:meth:`Store.get_job <tickwork.store.base.Store.get_job>` (a run's trace context)."""
        ...

    def register_task_limits(
        self, limits: Mapping[str, TaskLimits], *, now: datetime | None = None
    ) -> None:
        """:meth:`Store.register_task_limits
        <tickwork.store.base.Store.register_task_limits>`."""
        ...

    def fault_injection_allowed(self) -> bool:
        """:meth:`Store.fault_injection_allowed
        <tickwork.store.base.Store.fault_injection_allowed>`."""
        ...

    def mark_injected(
        self, marks: Sequence[FaultMark], worker: str, *, now: datetime | None = None
    ) -> list[int]:
        """:meth:`Store.mark_injected <tickwork.store.base.Store.mark_injected>`."""
        ...


class LeaderStore(NodeRegistry, _Notified, Protocol):
    """What a scheduler node calls: the election, then the leader-only services."""

    def acquire_leadership(
        self, node_id: str, ttl: timedelta, *, now: datetime | None = None
    ) -> Lease | None:
        """:meth:`Store.acquire_leadership <tickwork.store.base.Store.acquire_leadership>`."""
        ...

    def renew_leadership(
        self, node_id: str, epoch: int, ttl: timedelta, *, now: datetime | None = None
    ) -> Lease:
        """:meth:`Store.renew_leadership <tickwork.store.base.Store.renew_leadership>`."""
        ...

    def resign_leadership(self, node_id: str, epoch: int) -> None:
        """:meth:`Store.resign_leadership <tickwork.store.base.Store.resign_leadership>`."""
        ...

    def trigger(
        self, epoch: int, *, limit: int = TRIGGER_BATCH, now: datetime | None = None
    ) -> TriggerResult:
        """:meth:`Store.trigger <tickwork.store.base.Store.trigger>`."""
        ...

    def rescue(
        self, *, limit: int = DEFAULT_RESCUE_BATCH, now: datetime | None = None
    ) -> RescueResult:
        """:meth:`Store.rescue <tickwork.store.base.Store.rescue>`."""
        ...

    def prune(
        self, retention: timedelta, *, limit: int = DEFAULT_PRUNE_BATCH, now: datetime | None = None
    ) -> int:
        """:meth:`Store.prune <tickwork.store.base.Store.prune>`."""
        ...

    def fold_minutes(self, *, now: datetime | None = None) -> int:
        """:meth:`Store.fold_minutes <tickwork.store.base.Store.fold_minutes>`."""
        ...
