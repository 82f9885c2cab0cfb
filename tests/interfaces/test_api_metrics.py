"""``/metrics`` (read from the store at scrape time), ``/healthz`` and ``/readyz``, in
process over a real store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from api_support import LOCAL, bearer, dead_run, error_of
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tickwork.client import Client
from tickwork.job import JobSpec
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


def test_finished_runs_total_never_decreases_when_runs_are_pruned(
    web: TestClient, client: Client, store: Store
) -> None:
    dead_run(client)
    first = value(scrape(web), "tickwork_runs_total", state="dead")

    store.prune(timedelta(0), now=store.now() + timedelta(seconds=1))
    pruned = scrape(web)
    dead_run(client)
    later = value(scrape(web), "tickwork_runs_total", state="dead")

    assert first == 1
    assert value(pruned, "tickwork_runs", state="dead") == 0
    assert value(pruned, "tickwork_runs_total", state="dead") == 1
    assert later == 2


def test_trigger_lag_is_a_histogram_of_the_recent_sample(web: TestClient, client: Client) -> None:
    for _ in range(3):
        dead_run(client)  # claimed: each started once

    samples = scrape(web)

    assert value(samples, "tickwork_trigger_lag_seconds_count") == 3
    assert value(samples, "tickwork_trigger_lag_seconds_bucket", le="+Inf") == 3
    assert value(samples, "tickwork_trigger_lag_seconds_sum") >= 0
    buckets = [
        v for (name, _), v in samples.items() if name == "tickwork_trigger_lag_seconds_bucket"
    ]
    assert buckets == sorted(buckets)


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
