"""``/metrics`` (read from the store at scrape time), ``/healthz`` and ``/readyz``, in
process over a real store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from api_support import LOCAL, bearer, dead_run, error_of
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tickwork.client import Client
from tickwork.job import JobSpec
from tickwork.retry import RetryPolicy
from tickwork.schedule import Once
from tickwork.store import Store, open_store
from tickwork.web.app import create_app
from tickwork.web.metrics import Metrics, StoreCollector


@pytest.fixture
def web(client: Client, admin_key: str) -> Iterator[TestClient]:
    rescued = iter(range(100))
    app = create_app(client, open_access=False, rescues=lambda: next(rescued))
    with TestClient(app, headers=bearer(admin_key)) as test_client:
        yield test_client


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(web: TestClient) -> Samples:
    """Every sample, keyed by name and sorted labels; the text must parse as Prometheus's."""
    answer = web.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            assert isinstance(sample, Sample)
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_runs_by_state_backlog_and_dead_letter(web: TestClient, client: Client) -> None:
    dead_run(client)
    client.submit("http", args={"url": "https://example.com/"})  # queued, due now
    client.submit("http", args={"url": "https://example.com/"}, delay=3600)  # not due yet

    samples = scrape(web)

    assert value(samples, "tickwork_runs", state="dead") == 1
    assert value(samples, "tickwork_runs", state="queued") == 1
    assert value(samples, "tickwork_runs", state="running") == 0
    assert value(samples, "tickwork_dead_letter_size") == 1
    assert value(samples, "tickwork_due_backlog") == 1
    assert 0 <= value(samples, "tickwork_oldest_due_age_seconds") < 600
    assert value(samples, "tickwork_scrape_error") == 0


SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
COUNTER_SUFFIXES = ("_total", "_bucket", "_count", "_sum")


def finish(store: Store, at: datetime, outcome: str, **fields: Any) -> int:
    """A run due ``at``, claimed a second later, ending ``outcome`` (succeeded, dead, or
    failed: retried hours later) a second after that, as a worker writes it."""
    attempts = 2 if outcome == "failed" else 1
    spec = JobSpec(schedule=Once(at=at), retry=RetryPolicy(max_attempts=attempts), **fields)
    run = store.submit(spec, now=at).run
    assert run is not None
    [held] = store.claim("w", limit=1, queues=[spec.queue], now=at + SECOND)
    assert held.id == run.id
    if outcome == "succeeded":
        store.complete(run.id, held.fencing_token, now=at + 2 * SECOND)
    else:
        wait = timedelta(hours=5)
        store.fail(run.id, held.fencing_token, "boom", retry_after=wait, now=at + 2 * SECOND)
    return run.id


STORE_KEPT = (
    "tickwork_runs_finished_",
    "tickwork_runs_total",
    "tickwork_attempts_failed_",
    "tickwork_run_duration_seconds_",
    "tickwork_start_lag_seconds_",
    "tickwork_limited_start_lag_seconds_",
)


def counters(samples: Samples) -> Samples:
    """The samples of counters and histograms: what must only grow."""
    return {k: v for k, v in samples.items() if k[0].endswith(COUNTER_SUFFIXES)}


def kept(samples: Samples) -> Samples:
    """The counters and histograms the store keeps (not this process's own)."""
    return {k: v for k, v in samples.items() if k[0].startswith(STORE_KEPT)}


def test_counters_and_histograms_only_grow_across_finishing_runs_and_pruning(
    web: TestClient, client: Client, store: Store, store_url: str, admin_key: str
) -> None:
    m0 = store.now().replace(second=0, microsecond=0) - timedelta(hours=2)
    finish(store, m0, "succeeded", task="report")
    finish(store, m0 + SECOND, "dead", task="report")
    finish(store, m0 + 2 * SECOND, "failed", task="report")  # counted as it fails
    store.fold_minutes(now=m0 + 3 * MINUTE)  # the leader's fold, a minute on
    first = scrape(web)

    finish(store, m0 + 4 * MINUTE, "succeeded", task="report", queue="mail")
    finish(store, m0 + 5 * MINUTE, "dead", task="report")
    # The pruner deletes every finished run, the last two before any fold read them; then
    # a fold a day later deletes the rollup's minutes too.
    assert store.prune(timedelta(0), now=m0 + 10 * MINUTE) == 4
    store.fold_minutes(now=m0 + 12 * MINUTE)
    store.fold_minutes(now=m0 + timedelta(hours=27))
    assert [m for m in store.run_minutes(m0 - MINUTE) if m.minute < m0 + timedelta(hours=2)] == []
    second = scrape(web)

    def grown(name: str, **labels: str) -> tuple[float, float]:
        return value(first, name, **labels), value(second, name, **labels)

    report = {"task": "report", "queue": "default"}
    assert grown("tickwork_runs_finished_total", **report, outcome="succeeded") == (1, 1)
    assert grown("tickwork_runs_finished_total", **report, outcome="dead") == (1, 2)
    assert value(second, "tickwork_runs_finished_total", task="report", queue="mail",
                 outcome="succeeded") == 1  # fmt: skip
    assert grown("tickwork_attempts_failed_total", **report) == (1, 1)
    assert grown("tickwork_runs_total", state="dead") == (1, 2)
    assert value(second, "tickwork_runs", state="succeeded") == 0  # pruned: the gauge drops
    # Every attempt ran a second; every first attempt started a second after its slot.
    assert grown("tickwork_run_duration_seconds_count", queue="default") == (3, 4)
    assert grown("tickwork_run_duration_seconds_bucket", queue="default", le="1.0") == (3, 4)
    assert grown("tickwork_run_duration_seconds_bucket", queue="default", le="0.5") == (0, 0)
    assert grown("tickwork_run_duration_seconds_sum", queue="default") == (3.0, 4.0)
    assert grown("tickwork_start_lag_seconds_count", queue="default") == (3, 4)
    assert value(second, "tickwork_start_lag_seconds_count", queue="mail") == 1
    # Only grows: every counter and bucket of the first scrape is in the second, no lower.
    before, after = counters(first), counters(second)
    assert before
    assert [k for k, v in before.items() if after.get(k, -1) < v] == []
    assert [k for k in after if k not in before]  # the new queue's series

    # Another replica of the API on the same store says the same.
    assert kept(second)
    with (
        Client(open_store(store_url)) as other,
        TestClient(create_app(other, open_access=False), headers=bearer(admin_key)) as replica,
    ):
        assert kept(scrape(replica)) == kept(second)


def test_runs_held_back_by_a_limit_are_no_lag(web: TestClient, store: Store) -> None:
    store.set_tenant_limits("acme", max_running=1)
    m0 = store.now().replace(second=0, microsecond=0) - timedelta(hours=2)
    # An acme run that waited half an hour for its turn, another tenant's on time.
    run = store.submit(JobSpec(task="t", tenant="acme", schedule=Once(at=m0)), now=m0).run
    assert run is not None
    [held] = store.claim("w", limit=1, now=m0 + 30 * MINUTE)
    store.complete(run.id, held.fencing_token, now=m0 + 31 * MINUTE)
    finish(store, m0 + 32 * MINUTE, "succeeded", task="t", tenant="globex")
    store.fold_minutes(now=m0 + 40 * MINUTE)
    # Now: acme has a backlog an hour old, globex one a second old.
    now = store.now()
    for _ in range(3):
        store.submit(JobSpec(task="t", tenant="acme", schedule=Once(at=now - timedelta(hours=1))))
    store.submit(JobSpec(task="t", tenant="globex", schedule=Once(at=now - SECOND)))

    samples = scrape(web)

    assert value(samples, "tickwork_start_lag_seconds_count", queue="default") == 1
    assert value(samples, "tickwork_start_lag_seconds_sum", queue="default") == 1.0
    assert value(samples, "tickwork_limited_start_lag_seconds_count", queue="default") == 1
    assert value(samples, "tickwork_limited_start_lag_seconds_sum", queue="default") == 1800.0
    assert value(samples, "tickwork_due_backlog") == 4
    assert value(samples, "tickwork_limited_due_backlog") == 3
    assert 1 <= value(samples, "tickwork_oldest_due_age_seconds") < 600  # globex's, not acme's
    assert value(samples, "tickwork_tenant_held", tenant="acme") == 2  # one may start


def test_no_series_is_labelled_by_a_run_a_job_or_anything_unbounded(
    web: TestClient, client: Client, store: Store
) -> None:
    dead_run(client)
    store.register_node("worker-1", "worker", "host-a", 42, {"store": {"up": True}})
    store.fold_minutes(now=store.now() + 2 * MINUTE)

    labels = {name for (_, pairs) in scrape(web) for name, _ in pairs}

    assert labels <= {"state", "task", "queue", "outcome", "le", "node", "kind", "holder", "tenant"}


def test_leader_and_node_heartbeats(web: TestClient, store: Store) -> None:
    before = scrape(web)
    store.register_node("worker-1", "worker", "host-a", 42)
    lease = store.acquire_leadership("sched-1", timedelta(seconds=30))
    assert lease is not None

    samples = scrape(web)

    assert value(before, "tickwork_leader") == 0
    assert ("tickwork_leader_epoch", ()) not in before
    assert value(samples, "tickwork_leader") == 1
    assert value(samples, "tickwork_leader_epoch") == lease.epoch
    assert value(samples, "tickwork_leader_info", holder="sched-1") == 1
    age = value(samples, "tickwork_node_last_seen_seconds", node="worker-1", kind="worker")
    assert 0 <= age < 60
    assert value(samples, "tickwork_node_running", node="worker-1", kind="worker") == 0


def test_a_silent_nodes_gauges_go_away_but_its_silence(web: TestClient, store: Store) -> None:
    info = {
        "beat": 1,
        "store": {"up": True, "outages": 0},
        "clock": {"offset": 0.1, "bound": 0.01},
    }
    store.register_node("alive", "worker", "host-a", 1, info)
    store.register_node("gone", "worker", "host-b", 2, info, now=store.now() - timedelta(minutes=5))

    samples = scrape(web)

    for node, silent in (("alive", 0), ("gone", 1)):
        labels = {"node": node, "kind": "worker"}
        assert value(samples, "tickwork_node_silent", **labels) == silent
        assert ("tickwork_node_last_seen_seconds", tuple(sorted(labels.items()))) in samples
    gone = (("kind", "worker"), ("node", "gone"))
    alive = (("kind", "worker"), ("node", "alive"))
    for name in (
        "tickwork_node_running",
        "tickwork_node_store_up",
        "tickwork_node_store_outages_total",
        "tickwork_node_clock_offset_seconds",
    ):
        assert (name, alive) in samples
        assert (name, gone) not in samples


def test_each_nodes_clock_offset_is_a_gauge(web: TestClient, store: Store) -> None:
    store.register_node("fast", "worker", "host-a", 1, {"clock": {"offset": 5.01, "bound": 0.002}})
    store.register_node("old", "worker", "host-b", 2, {})

    samples = scrape(web)

    labels = {"node": "fast", "kind": "worker"}
    assert value(samples, "tickwork_node_clock_offset_seconds", **labels) == 5.01
    assert value(samples, "tickwork_node_clock_offset_bound_seconds", **labels) == 0.002
    assert ("tickwork_node_clock_offset_seconds", (("kind", "worker"), ("node", "old"))) not in (
        samples
    )


def test_rescues_come_from_the_reaper_in_this_process(web: TestClient) -> None:
    first = value(scrape(web), "tickwork_rescues_total")
    second = value(scrape(web), "tickwork_rescues_total")

    assert (first, second) == (0, 1)


def test_without_a_reaper_in_process_there_is_no_rescue_series(client: Client) -> None:
    with TestClient(create_app(client, open_access=True), base_url=LOCAL) as web:
        samples = scrape(web)

    assert not [name for name, _ in samples if name.startswith("tickwork_rescues")]


def test_metrics_need_an_admin_key(web: TestClient, client: Client) -> None:
    _, tenant_key = client.create_api_key(tenant="acme")

    tenant = web.get("/metrics", headers=bearer(tenant_key))
    web.headers.pop("Authorization")
    anonymous = web.get("/metrics")

    assert tenant.status_code == 403
    assert anonymous.status_code == 401


def test_health_needs_no_key(client: Client, admin_key: str) -> None:
    with TestClient(create_app(client, open_access=False)) as web:
        health = web.get("/healthz")
        ready = web.get("/readyz")

    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert ready.status_code == 200
    schema = ready.json()["schema"]
    assert schema["applied"] == schema["latest"] >= 1


def test_not_ready_while_migrations_are_pending(blank_store_url: str) -> None:
    with (
        Client(open_store(blank_store_url, migrate=False)) as blank,
        TestClient(create_app(blank, open_access=False)) as web,
    ):
        health = web.get("/healthz")
        ready = web.get("/readyz")

    assert health.status_code == 200
    assert ready.status_code == 503
    assert ready.json()["error"]["code"] == "migrations_pending"
    assert "tickwork db migrate" in ready.json()["error"]["message"]
    assert ready.json()["schema"]["applied"] == 0


def test_not_ready_and_503_while_the_store_is_down(store_url: str, admin_key: str) -> None:
    down = Client(open_store(store_url))
    down.close()

    with TestClient(create_app(down, open_access=False)) as web:
        ready = web.get("/readyz")
        jobs = web.get("/api/v1/jobs", headers=bearer(admin_key))

    assert ready.status_code == 503
    assert jobs.status_code == 503
    error = error_of(jobs)
    assert error["code"] == "store_unavailable"
    assert "closed" not in error["message"]  # details stay in the server's log


def test_each_tenant_has_gauges_of_its_runs_and_limits(
    web: TestClient, client: Client, store: Store
) -> None:
    now = store.now()
    store.submit_many([JobSpec(task="t", schedule=Once(at=now), tenant="acme")] * 5, now=now)
    store.submit_many([JobSpec(task="t", schedule=Once(at=now), tenant="globex")] * 2, now=now)
    client.set_tenant_limits("acme", max_running=2, weight=3)
    client.set_tenant_limits("initech", rate=0.5)  # limits, no runs
    claimed = store.claim("w", limit=10)
    assert len(claimed) == 4  # acme's 2 and globex's 2

    samples = scrape(web)

    assert value(samples, "tickwork_tenant_running", tenant="acme") == 2
    assert value(samples, "tickwork_tenant_due_backlog", tenant="acme") == 3
    assert value(samples, "tickwork_tenant_held", tenant="acme") == 3
    assert value(samples, "tickwork_tenant_running", tenant="globex") == 2
    assert value(samples, "tickwork_tenant_held", tenant="globex") == 0
    assert value(samples, "tickwork_tenant_running", tenant="initech") == 0
    assert value(samples, "tickwork_tenant_max_running", tenant="acme") == 2
    assert value(samples, "tickwork_tenant_rate", tenant="initech") == 0.5
    assert value(samples, "tickwork_tenant_weight", tenant="acme") == 3
    assert value(samples, "tickwork_tenant_weight", tenant="globex") == 1
    assert ("tickwork_tenant_max_running", (("tenant", "globex"),)) not in samples
    assert value(samples, "tickwork_tenants") == 3
    assert value(samples, "tickwork_tenants_other_running") == 0


def test_past_the_cap_the_busiest_tenants_keep_their_series_and_the_rest_are_summed(
    client: Client, store: Store
) -> None:
    now = store.now()
    counts = {"a": 1, "b": 4, "c": 2, "d": 3}
    specs = [
        JobSpec(task="t", schedule=Once(at=now), tenant=tenant)
        for tenant, count in counts.items()
        for _ in range(count)
    ]
    store.submit_many(specs, now=now)
    client.set_tenant_limits("e", max_running=1)  # no runs: the quietest
    text = Metrics(StoreCollector(client, tenant_series=2)).render().decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }

    due = {
        labels[0][1]: v
        for (name, labels), v in samples.items()
        if name == "tickwork_tenant_due_backlog"
    }
    assert due == {"b": 4, "d": 3}
    assert value(samples, "tickwork_tenants") == 5
    assert value(samples, "tickwork_tenants_other_due_backlog") == 1 + 2
    assert ("tickwork_tenant_max_running", (("tenant", "e"),)) not in samples
