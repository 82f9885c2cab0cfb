"""Conformance: tenants' limits, and the claim that holds them exactly."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from tickwork.errors import ValidationError
from tickwork.job import JobSpec
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.store.base import Completion, TaskLimits, TaskStatus, TenantLimits, TenantStatus

LEASE = timedelta(seconds=10)
Children = Callable[..., list[dict[str, Any]]]


def due(store: Store, at: datetime, tenant: str, n: int, **fields: Any) -> list[int]:
    """``n`` queued runs of ``tenant``, claimable at ``at``."""
    specs = [
        JobSpec(task="tests.run", schedule=Once(at=at), tenant=tenant, **fields) for _ in range(n)
    ]
    ids = []
    for submitted in store.submit_many(specs, now=at):
        assert submitted.run is not None
        ids.append(submitted.run.id)
    return ids


def tenants_of(runs: Any) -> Counter[str]:
    return Counter(r.tenant for r in runs)


# -- limits --------------------------------------------------------------------------------


def test_a_tenant_never_set_has_no_limits(store: Store) -> None:
    assert store.tenant_limits("acme") == TenantLimits("acme")
    assert store.list_tenants() == []


def test_set_tenant_limits_stores_max_running_and_none_clears_it(store: Store) -> None:
    assert store.set_tenant_limits("acme", max_running=5).max_running == 5
    assert store.tenant_limits("acme").max_running == 5
    assert store.set_tenant_limits("acme", max_running=None).max_running is None
    assert store.tenant_limits("acme") == TenantLimits("acme")


def test_set_tenant_limits_changes_only_what_is_given(store: Store) -> None:
    store.set_tenant_limits("acme", max_running=5, rate=20.0, burst=40, weight=3.0)
    assert store.tenant_limits("acme") == TenantLimits("acme", 5, 20.0, 40, 3.0)
    store.set_tenant_limits("acme", rate=10.0)
    assert store.tenant_limits("acme") == TenantLimits("acme", 5, 10.0, 40, 3.0)
    store.set_tenant_limits("acme", weight=None, burst=None)
    assert store.tenant_limits("acme") == TenantLimits("acme", 5, 10.0, None, 1.0)


def test_a_tenant_whose_limits_are_all_cleared_has_no_row(store: Store) -> None:
    store.set_tenant_limits("acme", max_running=5, rate=2.5)
    assert [s.tenant for s in store.list_tenants()] == ["acme"]
    cleared = store.set_tenant_limits("acme", max_running=None, rate=None)
    assert cleared == TenantLimits("acme")
    assert store.list_tenants() == []


def test_a_rate_without_burst_buckets_one_seconds_worth(store: Store) -> None:
    assert store.set_tenant_limits("acme", rate=2.5).bucket == 3
    assert store.set_tenant_limits("acme", rate=0.1).bucket == 1
    assert store.set_tenant_limits("acme", burst=7).bucket == 7


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("rate", 0),
        ("rate", -1.0),
        ("rate", float("nan")),
        ("rate", float("inf")),
        ("rate", "20/s"),
        ("burst", 0),
        ("burst", 1.5),
        ("weight", 0),
        ("weight", -2.0),
        ("weight", 1e9),
    ],
)
def test_a_bad_rate_burst_or_weight_is_rejected_and_changes_nothing(
    store: Store, field: str, bad: Any
) -> None:
    store.set_tenant_limits("acme", max_running=3, rate=5.0, burst=5, weight=2.0)
    with pytest.raises(ValidationError, match=field):
        store.set_tenant_limits("acme", **{field: bad})
    assert store.tenant_limits("acme") == TenantLimits("acme", 3, 5.0, 5, 2.0)


def test_a_burst_without_a_rate_is_rejected_and_changes_nothing(store: Store) -> None:
    with pytest.raises(ValidationError, match="burst needs a rate"):
        store.set_tenant_limits("acme", burst=10)
    assert store.list_tenants() == []
    store.set_tenant_limits("acme", rate=1.0, burst=10)
    with pytest.raises(ValidationError, match="burst needs a rate"):
        store.set_tenant_limits("acme", rate=None)
    assert store.tenant_limits("acme") == TenantLimits("acme", None, 1.0, 10)


def test_held_counts_due_runs_beyond_the_room_left(store: Store) -> None:
    limits = TenantLimits("acme", max_running=3)
    assert TenantStatus(limits, running=1, due=5).held == 3
    assert TenantStatus(limits, running=3, due=5).held == 5
    assert TenantStatus(limits, running=0, due=2).held == 0
    assert TenantStatus(TenantLimits("acme"), running=9, due=9).held == 0
    rated = TenantLimits("acme", max_running=3, rate=5.0)
    assert TenantStatus(rated, running=1, due=5, starts=1).held == 4  # the rate binds
    assert TenantStatus(rated, running=1, due=5, starts=4).held == 3  # max_running binds


@pytest.mark.parametrize("bad", [0, -1, 2.5, "5", True])
def test_a_bad_max_running_is_rejected_and_changes_nothing(store: Store, bad: Any) -> None:
    store.set_tenant_limits("acme", max_running=3)
    with pytest.raises(ValidationError, match="max_running"):
        store.set_tenant_limits("acme", max_running=bad)
    assert store.tenant_limits("acme").max_running == 3


def test_list_tenants_counts_running_and_queued_and_due_runs(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", max_running=2)
    due(store, t0, "acme", 3)
    due(store, t0, "beta", 2)
    due(store, t0 + timedelta(hours=1), "gamma", 1)  # not due: gamma is not listed
    store.claim("w1", limit=10, lease=LEASE, now=t0)
    listed = {s.tenant: s for s in store.list_tenants(now=t0)}
    assert set(listed) == {"acme", "beta"}
    assert (listed["acme"].running, listed["acme"].due, listed["acme"].at_limit) == (2, 1, True)
    assert (listed["beta"].running, listed["beta"].due, listed["beta"].at_limit) == (2, 0, False)
    assert listed["acme"].limits.max_running == 2
    [only] = store.list_tenants(tenant="beta", now=t0)
    assert only.running == 2
    assert store.list_tenants(tenant="nobody", now=t0)[0].running == 0


# -- the claim -----------------------------------------------------------------------------


def test_claim_takes_no_more_of_a_tenant_than_its_max_running(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", max_running=2)
    due(store, t0, "acme", 5)
    assert tenants_of(store.claim("w1", limit=10, lease=LEASE, now=t0)) == {"acme": 2}
    assert store.claim("w2", limit=10, lease=LEASE, now=t0) == []


def test_a_throttled_tenant_does_not_hold_back_others_in_the_batch(
    store: Store, t0: datetime
) -> None:
    store.set_tenant_limits("acme", max_running=1)
    due(store, t0, "acme", 5, priority=10)  # first in claim order
    due(store, t0, "beta", 3)
    assert tenants_of(store.claim("w1", limit=4, lease=LEASE, now=t0)) == {"acme": 1, "beta": 3}


def test_a_finished_run_makes_room_for_the_next(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", max_running=1)
    due(store, t0, "acme", 3)
    [first] = store.claim("w1", limit=5, lease=LEASE, now=t0)
    store.complete(first.id, first.fencing_token, now=t0)
    [second] = store.claim("w1", limit=5, lease=LEASE, now=t0)
    assert second.id != first.id


def test_complete_and_claim_holds_the_limit_and_counts_what_it_completes(
    store: Store, t0: datetime
) -> None:
    store.set_tenant_limits("acme", max_running=2)
    due(store, t0, "acme", 5)
    due(store, t0, "beta", 5)
    _, claimed = store.complete_and_claim([], "w1", limit=3, lease=LEASE, now=t0)
    _, more = store.complete_and_claim([], "w1", limit=10, lease=LEASE, now=t0)
    assert tenants_of(claimed) + tenants_of(more) == {"acme": 2, "beta": 5}
    acme = [r for r in claimed + more if r.tenant == "acme"]
    done = [Completion(r.id, r.fencing_token) for r in acme]
    rejected, after = store.complete_and_claim(done, "w1", limit=10, lease=LEASE, now=t0)
    assert rejected == []
    assert tenants_of(after) == {"acme": 2}


def test_a_dead_workers_run_counts_until_it_is_rescued(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", max_running=1)
    due(store, t0, "acme", 2)
    store.claim("dead", limit=5, lease=LEASE, now=t0)
    later = t0 + LEASE + timedelta(seconds=1)  # its lease has expired, not yet rescued
    assert store.claim("w2", limit=5, lease=LEASE, now=later) == []
    assert len(store.rescue(now=later).requeued) == 1
    assert len(store.claim("w2", limit=5, lease=LEASE, now=later)) == 1


def test_a_changed_limit_applies_from_the_next_claim(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", max_running=1)
    due(store, t0, "acme", 5)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=t0)) == 1
    store.set_tenant_limits("acme", max_running=3)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=t0)) == 2
    store.set_tenant_limits("acme", max_running=None)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=t0)) == 2


def race_to_claim_all(store_url: str, children: Children) -> list[int]:
    """The ids four processes claimed, racing in batches of 7 until nothing is left; no
    run twice."""
    results = children(
        [
            {"op": "claim_all", "url": store_url, "worker": f"w{i}", "limit": 7, "lease": 600}
            for i in range(4)
        ]
    )
    claimed = [i for r in results for i in r["ids"]]
    assert len(claimed) == len(set(claimed))
    return claimed


def test_racing_claimers_never_take_more_than_max_running_together(
    store: Store, store_url: str, children: Children
) -> None:
    now = store.now()
    store.set_tenant_limits("acme", max_running=5)
    acme = set(due(store, now, "acme", 200))
    others = set(due(store, now, "beta", 200))
    claimed = race_to_claim_all(store_url, children)
    assert len(set(claimed) & acme) == 5
    assert set(claimed) - acme == others


# -- tasks' limits -------------------------------------------------------------------------


def test_register_task_limits_sets_and_clears_them(store: Store) -> None:
    store.register_task_limits(
        {
            "mutex": TaskLimits(max_running=1),
            "pair": TaskLimits(max_running=2),
            "paced": TaskLimits(rate=2.5, burst=5),
            "free": TaskLimits(),
        }
    )
    assert store.task_limits() == {
        "mutex": TaskLimits(max_running=1),
        "pair": TaskLimits(max_running=2),
        "paced": TaskLimits(rate=2.5, burst=5),
    }
    store.register_task_limits({"pair": TaskLimits(), "paced": TaskLimits(1, 2.5)})
    assert store.task_limits() == {
        "mutex": TaskLimits(max_running=1),
        "paced": TaskLimits(max_running=1, rate=2.5),
    }


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (TaskLimits(max_running=0), "max_running"),
        (TaskLimits(rate=0.0), "rate"),
        (TaskLimits(rate=float("nan")), "rate"),
        (TaskLimits(rate=1.0, burst=0), "burst"),
        (TaskLimits(burst=3), "burst needs a rate"),
    ],
)
def test_a_bad_task_limit_is_rejected_and_writes_nothing(
    store: Store, bad: TaskLimits, field: str
) -> None:
    with pytest.raises(ValidationError, match=field):
        store.register_task_limits({"a": TaskLimits(max_running=1), "b": bad})
    assert store.task_limits() == {}


def test_a_task_with_max_running_one_is_claimed_one_at_a_time(store: Store, t0: datetime) -> None:
    store.register_task_limits({"mutex": TaskLimits(max_running=1)})
    specs = [JobSpec(task="mutex", schedule=Once(at=t0), tenant=f"t{i}") for i in range(3)]
    store.submit_many(specs, now=t0)
    due(store, t0, "acme", 2)
    first = store.claim("w1", limit=10, lease=LEASE, now=t0)
    assert Counter(r.task for r in first) == {"mutex": 1, "tests.run": 2}
    assert store.claim("w2", limit=10, lease=LEASE, now=t0) == []
    [held] = [r for r in first if r.task == "mutex"]
    store.complete(held.id, held.fencing_token, now=t0)
    assert [r.task for r in store.claim("w2", limit=10, lease=LEASE, now=t0)] == ["mutex"]


def test_a_run_needs_room_in_both_its_tenants_and_its_tasks_limit(
    store: Store, t0: datetime
) -> None:
    store.set_tenant_limits("acme", max_running=1)
    store.register_task_limits({"mutex": TaskLimits(max_running=2)})
    specs = [JobSpec(task="mutex", schedule=Once(at=t0), tenant="acme") for _ in range(3)]
    specs += [JobSpec(task="mutex", schedule=Once(at=t0), tenant="beta") for _ in range(3)]
    store.submit_many(specs, now=t0)
    claimed = store.claim("w1", limit=10, lease=LEASE, now=t0)
    assert tenants_of(claimed) == {"acme": 1, "beta": 1}


def claims_at(store: Store, t0: datetime) -> Callable[[float], int]:
    """How many runs a claim of up to 10 takes ``after`` seconds past ``t0``."""

    def claimed(after: float) -> int:
        return len(store.claim("w1", limit=10, lease=LEASE, now=t0 + timedelta(seconds=after)))

    return claimed


def paced(store: Store, at: datetime, task: str, n: int, tenant: str = "acme") -> None:
    """``n`` queued runs of ``task``, claimable at ``at``."""
    store.submit_many(
        [JobSpec(task=task, schedule=Once(at=at), tenant=tenant) for _ in range(n)], now=at
    )


def test_a_rate_limited_task_starts_its_burst_then_its_rate(store: Store, t0: datetime) -> None:
    store.register_task_limits({"paced": TaskLimits(rate=2.0, burst=2)}, now=t0)
    paced(store, t0, "paced", 10)

    claimed = claims_at(store, t0)

    assert claimed(0) == 2  # the full bucket
    assert claimed(0) == 0
    assert claimed(0.4) == 0  # 0.8 of a token
    assert claimed(0.5) == 1  # 1.0
    assert claimed(1.5) == 2
    assert claimed(1.75) == 0  # half a token left over
    assert claimed(10) == 2  # refilled no fuller than its burst


def test_a_rate_limited_tasks_runs_share_its_bucket_across_tenants(
    store: Store, t0: datetime
) -> None:
    store.register_task_limits({"paced": TaskLimits(rate=1.0, burst=3)}, now=t0)
    for tenant in ("acme", "beta", "gamma"):
        paced(store, t0, "paced", 3, tenant=tenant)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=t0)) == 3
    assert len(store.claim("w2", limit=10, lease=LEASE, now=t0)) == 0
    assert len(store.claim("w2", limit=10, lease=LEASE, now=t0 + timedelta(seconds=1))) == 1


def test_a_tasks_rate_and_max_running_hold_together(store: Store, t0: datetime) -> None:
    store.register_task_limits({"paced": TaskLimits(max_running=2, rate=1.0, burst=5)}, now=t0)
    paced(store, t0, "paced", 10)
    first = store.claim("w1", limit=10, lease=LEASE, now=t0)
    assert len(first) == 2  # max_running binds: 3 tokens stay
    for run in first:
        store.complete(run.id, run.fencing_token, now=t0)
    second = store.claim("w1", limit=10, lease=LEASE, now=t0)
    assert len(second) == 2
    for run in second:
        store.complete(run.id, run.fencing_token, now=t0)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=t0)) == 1  # the rate binds


def test_a_rate_held_task_does_not_hold_back_other_tasks_runs(store: Store, t0: datetime) -> None:
    store.register_task_limits({"paced": TaskLimits(rate=1.0)}, now=t0)
    store.submit_many(
        [JobSpec(task="paced", schedule=Once(at=t0), tenant="acme", priority=10)] * 5, now=t0
    )
    due(store, t0, "acme", 3)
    due(store, t0, "beta", 3)
    claimed = store.claim("w1", limit=10, lease=LEASE, now=t0)
    assert Counter(r.task for r in claimed) == {"paced": 1, "tests.run": 6}


def test_a_rate_held_tasks_backlog_longer_than_a_batch_does_not_hold_back_its_tenant(
    store: Store, t0: datetime
) -> None:
    # The throttled task's runs come first in the tenant's claim order, more of them than
    # a claim reads for the tenant: its other task's runs must still be claimed.
    store.register_task_limits({"paced": TaskLimits(rate=1.0)}, now=t0)
    paced(store, t0, "paced", 40)
    due(store, t0 + timedelta(milliseconds=1), "acme", 5)
    claimed = store.claim("w1", limit=10, lease=LEASE, now=t0 + timedelta(milliseconds=1))
    assert Counter(r.task for r in claimed) == {"paced": 1, "tests.run": 5}


def test_a_tasks_status_counts_the_starts_its_rate_allows_now(store: Store, t0: datetime) -> None:
    assert store.task_status("paced", now=t0) == TaskStatus("paced", TaskLimits())
    store.register_task_limits({"paced": TaskLimits(max_running=4, rate=2.0, burst=3)}, now=t0)
    limits = TaskLimits(max_running=4, rate=2.0, burst=3)
    assert store.task_status("paced", now=t0) == TaskStatus("paced", limits, starts=3)
    paced(store, t0, "paced", 10)
    store.claim("w1", limit=10, lease=LEASE, now=t0)
    assert store.task_status("paced", now=t0).rate_held
    later = t0 + timedelta(seconds=1)
    assert store.task_status("paced", now=later) == TaskStatus("paced", limits, starts=2)


def test_racing_claimers_never_start_more_than_a_tasks_bucket_together(
    store: Store, store_url: str, children: Children
) -> None:
    now = store.now()
    store.register_task_limits({"paced": TaskLimits(rate=0.001, burst=5)})
    specs = [JobSpec(task="paced", schedule=Once(at=now), tenant=f"t{i % 4}") for i in range(80)]
    throttled = {s.run.id for s in store.submit_many(specs, now=now) if s.run is not None}
    others = set(due(store, now, "beta", 100))
    claimed = race_to_claim_all(store_url, children)
    assert len(set(claimed) & throttled) == 5
    assert set(claimed) - throttled == others


def test_registering_a_tasks_limits_again_keeps_its_bucket(store: Store, t0: datetime) -> None:
    store.register_task_limits({"paced": TaskLimits(rate=1.0, burst=3)}, now=t0)
    paced(store, t0, "paced", 10)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=t0)) == 3
    store.register_task_limits({"paced": TaskLimits(rate=1.0, burst=3)}, now=t0)  # a restart
    assert len(store.claim("w1", limit=10, lease=LEASE, now=t0)) == 0
    store.register_task_limits({"paced": TaskLimits(rate=2.0, burst=3)}, now=t0)  # a new rate
    assert len(store.claim("w1", limit=10, lease=LEASE, now=t0)) == 0
    half = t0 + timedelta(seconds=0.5)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=half)) == 1
    store.register_task_limits({"paced": TaskLimits()}, now=half)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=half)) == 6


# -- rate limits ---------------------------------------------------------------------------


def test_a_rate_limited_tenant_starts_its_burst_then_its_rate(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", rate=2.0, burst=4)
    due(store, t0, "acme", 20)

    claimed = claims_at(store, t0)

    assert claimed(0) == 4  # the full bucket
    assert claimed(0) == 0
    assert claimed(0.4) == 0  # 0.8 of a token
    assert claimed(0.5) == 1  # 1.0
    assert claimed(1.5) == 2
    assert claimed(1.75) == 0  # half a token left over
    assert claimed(2.0) == 1


def test_a_bucket_refills_no_fuller_than_its_burst(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", rate=10.0, burst=3)
    due(store, t0, "acme", 20)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=t0)) == 3
    later = t0 + timedelta(hours=1)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=later)) == 3


def test_a_rate_held_tenant_does_not_hold_back_others(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", rate=1.0)
    due(store, t0, "acme", 5, priority=10)  # first in claim order
    due(store, t0, "beta", 3)
    assert tenants_of(store.claim("w1", limit=10, lease=LEASE, now=t0)) == {"acme": 1, "beta": 3}


def test_rate_and_max_running_hold_together(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", max_running=2, rate=100.0)
    due(store, t0, "acme", 10)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=t0)) == 2
    store.set_tenant_limits("acme", max_running=None)
    assert len(store.claim("w1", limit=10, lease=LEASE, now=t0)) == 8


def test_a_changed_rate_applies_from_the_next_claim(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", rate=1.0)
    due(store, t0, "acme", 30)
    assert len(store.claim("w1", limit=50, lease=LEASE, now=t0)) == 1
    store.set_tenant_limits("acme", rate=10.0)  # the bucket grows; its tokens stay
    second = t0 + timedelta(seconds=1)
    assert len(store.claim("w1", limit=50, lease=LEASE, now=second)) == 10
    store.set_tenant_limits("acme", rate=None)
    assert len(store.claim("w1", limit=50, lease=LEASE, now=second)) == 19


def test_complete_and_claim_spends_the_bucket_too(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("acme", rate=1.0, burst=2)
    due(store, t0, "acme", 5)
    _, first = store.complete_and_claim([], "w1", limit=10, lease=LEASE, now=t0)
    done = [Completion(r.id, r.fencing_token) for r in first]
    rejected, more = store.complete_and_claim(done, "w1", limit=10, lease=LEASE, now=t0)
    assert (len(first), rejected, more) == (2, [], [])


# -- fair share ----------------------------------------------------------------------------


def test_a_claim_shares_its_batch_between_tenants_with_due_runs(store: Store, t0: datetime) -> None:
    due(store, t0 - timedelta(minutes=1), "acme", 100)  # a backlog, first in run_at order
    due(store, t0, "beta", 10)
    assert tenants_of(store.claim("w1", limit=10, lease=LEASE, now=t0)) == {"acme": 5, "beta": 5}


def test_a_claim_shares_its_batch_by_weight(store: Store, t0: datetime) -> None:
    store.set_tenant_limits("beta", weight=3.0)
    due(store, t0, "acme", 50)
    due(store, t0, "beta", 50)
    assert tenants_of(store.claim("w1", limit=8, lease=LEASE, now=t0)) == {"acme": 2, "beta": 6}


def test_a_tenant_with_few_runs_leaves_the_rest_of_the_batch_to_others(
    store: Store, t0: datetime
) -> None:
    due(store, t0, "acme", 50)
    due(store, t0, "beta", 2)
    assert tenants_of(store.claim("w1", limit=10, lease=LEASE, now=t0)) == {"acme": 8, "beta": 2}


def test_fair_share_keeps_each_tenants_own_claim_order(store: Store, t0: datetime) -> None:
    low = due(store, t0, "acme", 3)
    high = due(store, t0, "acme", 3, priority=5)
    due(store, t0, "beta", 6)
    claimed = [r.id for r in store.claim("w1", limit=6, lease=LEASE, now=t0) if r.tenant == "acme"]
    assert claimed == high
    assert not set(claimed) & set(low)


def test_claims_go_round_the_tenants_when_there_are_more_than_a_batch(
    store: Store, t0: datetime
) -> None:
    for i in range(20):
        due(store, t0, f"t{i:02}", 5)
    served: set[str] = set()
    for _ in range(5):
        batch = tenants_of(store.claim("w1", limit=4, lease=LEASE, now=t0))
        assert sum(batch.values()) == 4
        served |= set(batch)
    assert len(served) == 20


def test_a_claim_fills_its_batch_from_many_tenants_of_one_run_each(
    store: Store, t0: datetime
) -> None:
    # A walk shorter than the batch (tried: 32 tenants, 4 runs each) came back with 32 of
    # 50 here, and a worker that claims a short batch waits a poll interval.
    for i in range(60):
        due(store, t0, f"t{i:02}", 1)
    batch = tenants_of(store.claim("w1", limit=50, lease=LEASE, now=t0))
    assert sum(batch.values()) == 50
    assert set(batch.values()) == {1}


def test_a_lone_tenant_is_claimed_in_full_batches(store: Store, t0: datetime) -> None:
    due(store, t0, "acme", 30)
    due(store, t0, "beta", 1)
    assert tenants_of(store.claim("w1", limit=10, lease=LEASE, now=t0)) == {"acme": 9, "beta": 1}
    assert tenants_of(store.claim("w1", limit=10, lease=LEASE, now=t0)) == {"acme": 10}


def test_tenants_with_nothing_due_do_not_hide_one_with_due_runs(store: Store, t0: datetime) -> None:
    for i in range(10):
        due(store, t0 + timedelta(hours=1), f"a{i}", 1)  # queued, not due yet
    due(store, t0, "zeta", 3)
    assert tenants_of(store.claim("w1", limit=2, lease=LEASE, now=t0)) == {"zeta": 2}
