"""Prometheus metrics at ``/metrics``, read from the store at scrape time.

The API process executes nothing, so it counts nothing as it happens: every scrape asks
the client for :meth:`~tickwork.client.Client.run_stats`,
:meth:`~tickwork.client.Client.cluster` and :meth:`~tickwork.client.Client.list_tenants`
and reports what the store holds then. The series
(all of them cluster-wide, over every tenant; ``/metrics`` needs an admin key unless the
API is open):

``tickwork_runs{state}`` (gauge)
    Runs in each state now: queued, running, succeeded, failed, dead, cancelled.
``tickwork_runs_total{state}`` (counter; succeeded, dead, cancelled)
    Runs that reached that final state, as far as the store can tell: it keeps finished
    runs only for the retention (7 days by default), so this process adds up the *growth*
    of the retained count from one scrape to the next. It never decreases (``rate()`` is
    sound) and restarts from the retained count when the API restarts (a counter reset).
    It under-counts by the runs the pruner deleted between two scrapes in which runs also
    finished. With several API replicas, aggregate with ``max``, not ``sum``.
``tickwork_due_backlog`` (gauge)
    Queued or failed runs whose time has come: waiting for a worker now.
``tickwork_oldest_due_age_seconds`` (gauge)
    How long the oldest of those has waited (0 with no backlog).
``tickwork_trigger_lag_seconds`` (histogram)
    Start minus scheduled time of the first attempts of the latest started runs (up to
    1000): *the recent sample*, recomputed at each scrape, not a cumulative histogram. Read
    it with ``histogram_quantile(0.99, tickwork_trigger_lag_seconds_bucket)`` directly;
    ``rate()`` over it means nothing.
``tickwork_rescues_total`` (counter)
    Lease expirations rescued by the reaper running *in this process*: only when the API
    is served by ``tickwork run``, whose scheduler rescues. A standalone ``tickwork api``
    has no reaper and does not export it (the scheduler logs one ``rescue`` line per run).
``tickwork_leader`` (gauge), ``tickwork_leader_epoch`` (gauge), ``tickwork_leader_info{holder}``
    1 while a scheduler holds an unexpired leader lease (else 0), its fencing epoch, and
    its node id as a label.
``tickwork_node_last_seen_seconds{node, kind}`` (gauge), ``tickwork_node_running{node, kind}``
    Seconds since each registered node (scheduler, worker, run) was last seen (its
    heartbeat; workers beat every few seconds), and the runs it is executing.
``tickwork_dead_letter_size`` (gauge)
    Runs in the dead-letter list (state dead).
``tickwork_store_up`` (gauge), ``tickwork_store_outages_total``,
``tickwork_store_reconnects_total`` (counters)
    *This process's* view of the database: 1 while its last call was answered; how many
    times it lost the database; how many lost connections it replaced (a restart or
    failover shows as reconnects even when no call failed). Exported even when the store
    cannot be read.
``tickwork_node_silent{node, kind}`` (gauge)
    1 for a node whose heartbeats stopped: unseen for three of its heartbeat intervals,
    at least 5 s (dead, stalled, or cut off from the database).
``tickwork_node_store_up{node, kind}`` (gauge),
``tickwork_node_store_outages_total{node, kind}``,
``tickwork_node_store_reconnects_total{node, kind}`` (counters)
    The same three as each scheduler and worker process saw them at its last heartbeat
    (counters restart with the process).
``tickwork_node_clock_offset_seconds{node, kind}``,
``tickwork_node_clock_offset_bound_seconds{node, kind}`` (gauges)
    How far each node's wall clock was from the database's at its last heartbeat
    (positive: ahead), and the error bound of that reading (half the round trip). Alert on
    ``abs(tickwork_node_clock_offset_seconds) > 1``: such a node fires nothing early, but
    its logs and its handlers' host time are off (:mod:`tickwork.skew`).
``tickwork_tenant_running{tenant}``, ``tickwork_tenant_due_backlog{tenant}``,
``tickwork_tenant_held{tenant}`` (gauges)
    Per tenant: runs running now, due runs waiting for a worker, and those of them a limit
    keeps from starting now (:attr:`~tickwork.records.TenantStatus.held`).
``tickwork_tenant_max_running{tenant}``, ``tickwork_tenant_rate{tenant}``,
``tickwork_tenant_weight{tenant}`` (gauges)
    Its limits: max_running and rate (runs per second) where set, and its weight. Alert on
    ``tickwork_tenant_held > 0`` for a tenant that should never wait on its limit.
``tickwork_tenants`` (gauge), ``tickwork_tenants_other_running``,
``tickwork_tenants_other_due_backlog``, ``tickwork_tenants_other_held`` (gauges)
    *Cardinality*: one series per tenant that has limits or runs running or due now (a
    tenant with neither has none), at most :data:`TENANT_SERIES` (1,000) tenants. Beyond
    that, the 1,000 with the most runs running and due (ties by name) keep their series and
    the rest are summed into the three ``tickwork_tenants_other_*`` gauges (0 while every
    tenant has its own), so ``sum(tickwork_tenant_running) +
    tickwork_tenants_other_running`` is always every tenant's; ``tickwork_tenants`` counts
    them all.
``tickwork_scrape_error`` (gauge)
    1 when the store could not be read at this scrape (the series read from it are then
    absent).

Times are by the store's clock, so node clocks do not skew the ages. The answer is the
classic text format (0.0.4), where ``tickwork_runs`` (gauge) and ``tickwork_runs_total``
(counter) are two families; OpenMetrics would fold them into one name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from tickwork.client import Client
from tickwork.errors import TickworkError
from tickwork.job import FINISHED_RUN_STATES, RunState
from tickwork.records import TenantStatus

log = logging.getLogger("tickwork.web")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Seconds: the trigger lag histogram's upper bounds (5 ms to 5 min, then +Inf)."""
FINAL_STATES = tuple(s for s in RunState if s in FINISHED_RUN_STATES)
TENANT_SERIES = 1000
"""Tenants with their own series at most; the rest are summed (see the module docstring)."""


class StoreCollector(Collector):
    """Reads the store at every scrape (see the module docstring for the series)."""

    def __init__(
        self,
        client: Client,
        rescues: Callable[[], int] | None = None,
        tenant_series: int = TENANT_SERIES,
    ) -> None:
        self.client = client
        self.rescues = rescues
        self.tenant_series = tenant_series
        self._lock = threading.Lock()
        self._retained: dict[str, int] | None = None
        self._totals: dict[str, int] = {}

    def collect(self) -> Iterator[Metric]:
        yield from _store_health(self.client.store_health())
        try:
            stats = self.client.run_stats()
            cluster = self.client.cluster()
            tenants = self.client.list_tenants()
        except TickworkError as exc:
            log.warning("metrics: cannot read the store: %s", exc)
            yield _gauge("tickwork_scrape_error", "1 when the store could not be read.", 1)
            return
        yield _gauge("tickwork_scrape_error", "1 when the store could not be read.", 0)

        runs = GaugeMetricFamily("tickwork_runs", "Runs in each state now.", labels=["state"])
        for state in RunState:
            runs.add_metric([state.value], stats.by_state.get(state.value, 0))
        yield runs

        totals = CounterMetricFamily(
            "tickwork_runs",
            "Runs that reached a final state (growth of the retained count; see the docs).",
            labels=["state"],
        )
        for name, total in self._count_finished(stats.by_state).items():
            totals.add_metric([name], total)
        yield totals

        yield _gauge(
            "tickwork_due_backlog",
            "Queued or failed runs whose time has come (waiting for a worker).",
            stats.due_backlog,
        )
        oldest = (
            max(0.0, (stats.now - stats.oldest_due_at).total_seconds())
            if stats.oldest_due_at is not None
            else 0.0
        )
        yield _gauge(
            "tickwork_oldest_due_age_seconds",
            "How long the oldest due run has waited for a worker.",
            oldest,
        )
        yield _lag_histogram(stats.recent_lag_ms)
        yield _gauge(
            "tickwork_dead_letter_size",
            "Runs in the dead-letter list (state dead).",
            stats.by_state.get(RunState.DEAD.value, 0),
        )

        if self.rescues is not None:
            rescues = CounterMetricFamily(
                "tickwork_rescues",
                "Runs whose lease expired, rescued by this process's reaper.",
            )
            rescues.add_metric([], self.rescues())
            yield rescues

        leader = cluster.leader
        yield _gauge(
            "tickwork_leader",
            "1 while a scheduler holds an unexpired leader lease.",
            1 if leader else 0,
        )
        if leader is not None:
            yield _gauge("tickwork_leader_epoch", "The leader's fencing epoch.", leader.epoch)
            info = GaugeMetricFamily(
                "tickwork_leader_info", "The leader's node id.", labels=["holder"]
            )
            info.add_metric([leader.holder], 1)
            yield info

        seen = GaugeMetricFamily(
            "tickwork_node_last_seen_seconds",
            "Seconds since each node's last heartbeat (store clock).",
            labels=["node", "kind"],
        )
        running = GaugeMetricFamily(
            "tickwork_node_running", "Runs each node executes now.", labels=["node", "kind"]
        )
        silent = GaugeMetricFamily(
            "tickwork_node_silent",
            "1 for a node whose heartbeats stopped (unseen for 3 of its beats, at least 5 s).",
            labels=["node", "kind"],
        )
        node_up = GaugeMetricFamily(
            "tickwork_node_store_up",
            "1 while the node reached the database at its last heartbeat.",
            labels=["node", "kind"],
        )
        outages = CounterMetricFamily(
            "tickwork_node_store_outages",
            "Times each node lost the database (since it started).",
            labels=["node", "kind"],
        )
        reconnects = CounterMetricFamily(
            "tickwork_node_store_reconnects",
            "Lost database connections each node replaced (since it started).",
            labels=["node", "kind"],
        )
        offset = GaugeMetricFamily(
            "tickwork_node_clock_offset_seconds",
            "Each node's wall clock minus the database's at its last heartbeat.",
            labels=["node", "kind"],
        )
        bound = GaugeMetricFamily(
            "tickwork_node_clock_offset_bound_seconds",
            "The error bound of that offset: half the round trip it was measured over.",
            labels=["node", "kind"],
        )
        for node in cluster.nodes:
            labels = [node.id, node.kind]
            skew = node.clock
            if skew is not None:
                offset.add_metric(labels, skew.offset)
                bound.add_metric(labels, skew.bound)
            age = max(0.0, (cluster.now - node.last_seen_at).total_seconds())
            seen.add_metric(labels, age)
            running.add_metric(labels, node.running)
            silent.add_metric(labels, 1 if node.silent(cluster.now) else 0)
            health = node.info.get("store")
            if isinstance(health, dict):
                node_up.add_metric(labels, 1 if health.get("up", True) else 0)
                outages.add_metric(labels, _number(health.get("outages")))
                reconnects.add_metric(labels, _number(health.get("reconnects")))
        yield from (seen, running, silent, node_up, outages, reconnects, offset, bound)
        yield from _tenant_metrics(tenants, self.tenant_series)

    def _count_finished(self, by_state: dict[str, int]) -> dict[str, int]:
        """Monotonic totals from the retained counts of final states (see the docstring)."""
        with self._lock:
            current = {s.value: by_state.get(s.value, 0) for s in FINAL_STATES}
            if self._retained is None:
                self._totals = dict(current)
            else:
                for state, count in current.items():
                    self._totals[state] += max(0, count - self._retained.get(state, 0))
            self._retained = current
            return dict(self._totals)


def _tenant_metrics(tenants: list[TenantStatus], cap: int) -> Iterator[Metric]:
    """Each tenant's runs and limits; past ``cap`` tenants, the busiest ``cap`` keep their
    series and the rest are summed (see the module docstring)."""
    ranked = sorted(tenants, key=lambda t: (-(t.running + t.due), t.tenant))
    shown, rest = ranked[:cap], ranked[cap:]
    labelled = [
        ("tickwork_tenant_running", "Runs of each tenant in state running now.", "running"),
        ("tickwork_tenant_due_backlog", "Each tenant's due runs waiting for a worker.", "due"),
        ("tickwork_tenant_held", "Each tenant's due runs a limit keeps from starting now.", "held"),
    ]
    for name, doc, attribute in labelled:
        family = GaugeMetricFamily(name, doc, labels=["tenant"])
        for status in shown:
            family.add_metric([status.tenant], getattr(status, attribute))
        yield family
    cap_doc = f"beyond the {cap} busiest, which have their own series"
    yield _gauge("tickwork_tenants", "Tenants with limits or runs running or due now.", len(ranked))
    for name, doc, attribute in labelled:
        other = name.replace("tickwork_tenant_", "tickwork_tenants_other_")
        total = sum(getattr(status, attribute) for status in rest)
        yield _gauge(other, f"{doc[:-1]}, summed over the tenants {cap_doc}.", total)
    max_running = GaugeMetricFamily(
        "tickwork_tenant_max_running", "Each tenant's max_running, where set.", labels=["tenant"]
    )
    rate = GaugeMetricFamily(
        "tickwork_tenant_rate",
        "Each tenant's rate in runs per second, where set.",
        labels=["tenant"],
    )
    weight = GaugeMetricFamily(
        "tickwork_tenant_weight", "Each tenant's share when tenants compete.", labels=["tenant"]
    )
    for status in shown:
        limits = status.limits
        if limits.max_running is not None:
            max_running.add_metric([status.tenant], limits.max_running)
        if limits.rate is not None:
            rate.add_metric([status.tenant], limits.rate)
        weight.add_metric([status.tenant], limits.weight)
    yield from (max_running, rate, weight)


def _store_health(health: dict[str, Any]) -> Iterator[Metric]:
    yield _gauge(
        "tickwork_store_up",
        "1 while this process's last database call was answered.",
        1 if health["up"] else 0,
    )
    outages = CounterMetricFamily("tickwork_store_outages", "Times this process lost the database.")
    outages.add_metric([], health["outages"])
    yield outages
    reconnects = CounterMetricFamily(
        "tickwork_store_reconnects", "Lost database connections this process replaced."
    )
    reconnects.add_metric([], health["reconnects"])
    yield reconnects


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _lag_histogram(sample_ms: list[float]) -> HistogramMetricFamily:
    seconds = sorted(max(0.0, ms / 1000) for ms in sample_ms)
    buckets: list[tuple[str, float]] = []
    i = 0
    for bound in LAG_BUCKETS:
        while i < len(seconds) and seconds[i] <= bound:
            i += 1
        buckets.append((_bound(bound), i))
    buckets.append(("+Inf", len(seconds)))
    return HistogramMetricFamily(
        "tickwork_trigger_lag_seconds",
        "Start minus scheduled time of the latest first attempts (a recent sample, "
        "recomputed at each scrape).",
        buckets=buckets,
        sum_value=sum(seconds),
    )


def _bound(value: float) -> str:
    return f"{value:g}" if value < 1 else f"{value:.1f}"


class Metrics:
    """One app's metrics: its own registry (never the global one, so apps do not collide),
    read by ``collector`` at every scrape."""

    def __init__(self, collector: StoreCollector) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)

    def render(self) -> bytes:
        return generate_latest(self.registry)
