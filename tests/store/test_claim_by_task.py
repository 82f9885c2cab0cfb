"""Conformance: a claim takes only runs of the tasks its worker has (``tasks=``).

A run of any other task is not eligible: it stays queued, spends no attempt and keeps its
fencing token, for a worker that has its task. The filter is a condition of the claim
itself, so it holds with everything else the claim decides: the batch fills from the
runs that are eligible (a backlog of other tasks ahead in claim order holds nothing
back), tenants' and tasks' limits count and spend exactly as without it, and fair share
walks only the tenants that have runs this worker can take.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from tickwork.job import JobSpec, RunState
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.store.base import Completion, TaskLimits

LEASE = timedelta(seconds=10)
MINE = ["http", "send_report"]
Children = Callable[..., list[dict[str, Any]]]


def due(
    store: Store, at: datetime, n: int, *, task: str, tenant: str = "default", **fields: Any
) -> list[int]:
    """``n`` queued runs of ``task`` claimable from ``at``."""
    specs = [JobSpec(task=task, schedule=Once(at=at), tenant=tenant, **fields) for _ in range(n)]
    ids = []
    for submitted in store.submit_many(specs, now=at):
        assert submitted.run is not None
        ids.append(submitted.run.id)
    return ids


def untouched(store: Store, ids: list[int]) -> None:
    """Each run is queued still, on its first attempt, never claimed (token 0)."""
    for run_id in ids:
        run = store.get_run(run_id)
        assert (run.state, run.attempt, run.fencing_token, run.worker) == (
            RunState.QUEUED,
            1,
            0,
            None,
        )


def test_a_claim_takes_only_runs_of_the_tasks_given(store: Store, t0: datetime) -> None:
    mail = due(store, t0 - timedelta(seconds=2), 3, task="send_mail")
    report = due(store, t0 - timedelta(seconds=1), 2, task="send_report")
    claimed = store.claim("w", limit=10, lease=LEASE, tasks=MINE, now=t0)
    assert sorted(r.id for r in claimed) == report
    untouched(store, mail)


def test_a_backlog_of_other_tasks_ahead_in_claim_order_holds_back_no_run(
    store: Store, t0: datetime
) -> None:
    due(store, t0 - timedelta(minutes=5), 300, task="send_mail", priority=5)
    mine = due(store, t0, 30, task="send_report")
    first = store.claim("w", limit=20, lease=LEASE, tasks=MINE, now=t0)
    second = store.claim("w", limit=20, lease=LEASE, tasks=MINE, now=t0)
    assert [r.id for r in first] == mine[:20]  # a full batch, in claim order
    assert [r.id for r in second] == mine[20:]


def test_the_tasks_filter_keeps_the_claim_order(store: Store, t0: datetime) -> None:
    late = due(store, t0, 2, task="send_report")
    early = due(store, t0 - timedelta(seconds=5), 2, task="http")
    urgent = due(store, t0, 1, task="send_report", priority=9)
    due(store, t0 - timedelta(seconds=9), 4, task="send_mail", priority=9)
    claimed = store.claim("w", limit=10, lease=LEASE, tasks=MINE, now=t0)
    assert [r.id for r in claimed] == urgent + early + late


def test_no_tasks_claims_every_task_and_an_empty_set_none(store: Store, t0: datetime) -> None:
    ids = due(store, t0, 2, task="send_mail")
    assert store.claim("w", limit=5, lease=LEASE, tasks=[], now=t0) == []
    assert store.complete_and_claim([], "w", limit=5, lease=LEASE, tasks=[], now=t0) == ([], [])
    untouched(store, ids)
    assert sorted(r.id for r in store.claim("w", limit=5, lease=LEASE, now=t0)) == ids


def test_complete_and_claim_completes_then_claims_only_the_tasks_given(
    store: Store, t0: datetime
) -> None:
    due(store, t0 - timedelta(seconds=9), 1, task="send_report")
    (held,) = store.claim("w", limit=1, lease=LEASE, tasks=MINE, now=t0)
    mail = due(store, t0, 2, task="send_mail")
    report = due(store, t0, 2, task="send_report")
    rejected, claimed = store.complete_and_claim(
        [Completion(held.id, held.fencing_token)], "w", limit=5, lease=LEASE, tasks=MINE, now=t0
    )
    assert rejected == []
    assert store.get_run(held.id).state is RunState.SUCCEEDED
    assert [r.id for r in claimed] == report
    untouched(store, mail)


def test_next_claimable_at_counts_only_the_tasks_given(store: Store, t0: datetime) -> None:
    due(store, t0 - timedelta(minutes=1), 1, task="send_mail")
    due(store, t0 + timedelta(minutes=3), 1, task="send_report")
    assert store.next_claimable_at() == t0 - timedelta(minutes=1)
    assert store.next_claimable_at(tasks=MINE) == t0 + timedelta(minutes=3)
    assert store.next_claimable_at(tasks=["other"]) is None
    assert store.next_claimable_at(tasks=MINE, queues=["elsewhere"]) is None


def test_a_run_left_by_one_worker_is_claimed_by_one_that_has_its_task(
    store: Store, t0: datetime
) -> None:
    [mail] = due(store, t0, 1, task="send_mail")
    for _ in range(3):
        assert store.claim("old", limit=5, lease=LEASE, tasks=MINE, now=t0) == []
    [claimed] = store.claim("new", limit=5, lease=LEASE, tasks=["send_mail", *MINE], now=t0)
    assert (claimed.id, claimed.attempt, claimed.fencing_token) == (mail, 1, 1)


# -- with limits and fair share ------------------------------------------------------------


def test_a_tenants_max_running_counts_its_running_runs_of_every_task(
    store: Store, t0: datetime
) -> None:
    store.set_tenant_limits("acme", max_running=3)
    due(store, t0, 2, task="send_mail", tenant="acme")
    mine = due(store, t0, 5, task="send_report", tenant="acme")
    assert len(store.claim("mailer", limit=5, lease=LEASE, tasks=["send_mail"], now=t0)) == 2
    claimed = store.claim("w", limit=5, lease=LEASE, tasks=MINE, now=t0)
    assert [r.id for r in claimed] == mine[:1]  # 2 running elsewhere + 1 = max_running 3


def test_a_tenant_at_its_limit_is_skipped_for_others_with_the_filter(
    store: Store, t0: datetime
) -> None:
    store.set_tenant_limits("acme", max_running=1)
    due(store, t0 - timedelta(seconds=5), 20, task="send_mail", tenant="beta")
    due(store, t0, 5, task="send_report", tenant="acme", priority=5)
    beta = due(store, t0, 5, task="send_report", tenant="beta")
    claimed = store.claim("w", limit=10, lease=LEASE, tasks=MINE, now=t0)
    assert Counter(r.tenant for r in claimed) == {"acme": 1, "beta": 5}
    assert {r.id for r in claimed if r.tenant == "beta"} == set(beta)


def test_a_tasks_limit_holds_with_the_filter(store: Store, t0: datetime) -> None:
    store.register_task_limits({"send_report": TaskLimits(max_running=2)})
    due(store, t0, 10, task="send_mail")
    due(store, t0, 5, task="send_report")
    http = due(store, t0, 3, task="http")
    claimed = store.claim("w", limit=10, lease=LEASE, tasks=MINE, now=t0)
    assert Counter(r.task for r in claimed) == {"send_report": 2, "http": 3}
    assert {r.id for r in claimed if r.task == "http"} == set(http)
    assert store.claim("w", limit=10, lease=LEASE, tasks=MINE, now=t0) == []


def test_a_limited_task_the_worker_lacks_is_left_to_others(store: Store, t0: datetime) -> None:
    store.register_task_limits({"send_mail": TaskLimits(max_running=1)})
    mail = due(store, t0, 3, task="send_mail")
    report = due(store, t0, 2, task="send_report")
    claimed = store.claim("w", limit=10, lease=LEASE, tasks=MINE, now=t0)
    assert sorted(r.id for r in claimed) == report
    untouched(store, mail)
    assert len(store.claim("mailer", limit=10, lease=LEASE, tasks=["send_mail"], now=t0)) == 1


def test_a_tenants_rate_spends_tokens_only_for_what_is_claimed(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", rate=1.0, burst=4)
    due(store, t0, 10, task="send_mail", tenant="acme")
    due(store, t0, 2, task="send_report", tenant="acme")
    assert len(store.claim("w", limit=10, lease=LEASE, tasks=MINE, now=t0)) == 2
    [status] = store.list_tenants(tenant="acme", now=t0)
    assert status.starts == 2
    assert len(store.claim("mailer", limit=10, lease=LEASE, tasks=["send_mail"], now=t0)) == 2


def test_fair_share_walks_only_tenants_with_runs_this_worker_can_take(
    store: Store, t0: datetime
) -> None:
    # Twenty tenants, first in the walk's name order, have only runs of another task: a
    # walk that counted them would see a batch's worth of tenants and claim nothing.
    for i in range(20):
        due(store, t0, 3, task="send_mail", tenant=f"a{i:02}")
    due(store, t0, 10, task="send_report", tenant="x")
    due(store, t0, 10, task="send_report", tenant="y")
    claimed = store.claim("w", limit=4, lease=LEASE, tasks=MINE, now=t0)
    assert Counter(r.tenant for r in claimed) == {"x": 2, "y": 2}


def test_fair_share_keeps_weights_with_the_filter(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("beta", weight=3.0)
    due(store, t0 - timedelta(minutes=1), 50, task="send_mail", tenant="acme")
    due(store, t0 - timedelta(minutes=1), 50, task="send_mail", tenant="beta")
    due(store, t0, 50, task="send_report", tenant="acme")
    due(store, t0, 50, task="send_report", tenant="beta")
    claimed = store.claim("w", limit=8, lease=LEASE, tasks=MINE, now=t0)
    assert Counter(r.tenant for r in claimed) == {"acme": 2, "beta": 6}
    assert {r.task for r in claimed} == {"send_report"}


def test_fair_share_keeps_each_tenants_claim_order_across_its_tasks(
    store: Store, t0: datetime
) -> None:
    due(store, t0 - timedelta(minutes=1), 10, task="send_mail", tenant="acme")
    first = due(store, t0 - timedelta(seconds=2), 1, task="http", tenant="acme")
    second = due(store, t0 - timedelta(seconds=1), 1, task="send_report", tenant="acme")
    due(store, t0, 5, task="send_report", tenant="acme")
    due(store, t0, 5, task="send_report", tenant="beta")
    claimed = store.claim("w", limit=4, lease=LEASE, tasks=MINE, now=t0)
    assert [r.id for r in claimed if r.tenant == "acme"] == first + second


def test_racing_claimers_with_different_tasks_each_take_only_their_own(
    store: Store, store_url: str, children: Children
) -> None:
    now = store.now()
    store.set_tenant_limits("acme", max_running=7)
    mail = set(due(store, now, 60, task="send_mail", tenant="acme"))
    mail |= set(due(store, now, 60, task="send_mail", tenant="beta"))
    report = set(due(store, now, 60, task="send_report", tenant="acme"))
    report |= set(due(store, now, 60, task="send_report", tenant="beta"))
    results = children(
        [
            {
                "op": "claim_all",
                "url": store_url,
                "worker": f"w{i}",
                "limit": 5,
                "lease": 600,
                "tasks": ["send_mail"] if i % 2 else ["send_report"],
            }
            for i in range(4)
        ]
    )
    by = [set(r["ids"]) for r in results]
    everything = [i for r in results for i in r["ids"]]
    assert len(everything) == len(set(everything))
    assert by[1] | by[3] <= mail
    assert by[0] | by[2] <= report
    running = Counter(store.get_run(i).tenant for i in everything)
    assert running["acme"] == 7  # the tenant's limit, across both kinds of worker
    assert set(everything) - {i for i in everything if store.get_run(i).tenant == "acme"} == (
        {i for i in mail | report if store.get_run(i).tenant == "beta"}
    )


@pytest.mark.parametrize("limited", [False, True])
def test_a_large_backlog_of_another_task_leaves_every_batch_full(
    store: Store, t0: datetime, limited: bool
) -> None:
    if limited:
        store.set_tenant_limits("acme", max_running=1000)
    due(store, t0 - timedelta(minutes=1), 2000, task="send_mail", tenant="acme")
    due(store, t0, 50, task="send_report", tenant="acme")
    taken = [len(store.claim("w", limit=5, lease=LEASE, tasks=MINE, now=t0)) for _ in range(11)]
    assert taken == [5] * 10 + [0]
