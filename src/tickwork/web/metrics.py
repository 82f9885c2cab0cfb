"""Prometheus metrics at ``/metrics``, read from the store at scrape time.

The API process executes nothing, so it counts nothing as it happens: every scrape asks
the client for :meth:`~tickwork.client.Client.run_stats`,
:meth:`~tickwork.client.Client.run_totals`, :meth:`~tickwork.client.Client.cluster` and
:meth:`~tickwork.client.Client.list_tenants` and reports what the store holds then (why
the counters live in the store: ``docs/observability.md``). The series
(all of them cluster-wide, over every tenant; ``/metrics`` needs an admin key unless the
API is open):

``tickwork_runs{state}`` (gauge)
    Runs in each state now: queued, running, succeeded, failed, dead, cancelled.
``tickwork_runs_finished_total{task, queue, outcome}`` (counter; succeeded, dead, cancelled)
    Runs that finished so, since the store was made. Kept in the store, not counted by
    this process (:meth:`~tickwork.client.Client.run_totals`): the leader's fold adds the
    runs that finished (once a minute, a few seconds behind), the pruner first adds those
    it deletes that no fold has read, and nothing ever subtracts, so it only grows, across
    pruning and restarts, and every API replica answers the same.
``tickwork_runs_total{state}`` (counter)
    The same, summed over tasks and queues.
``tickwork_attempts_failed_total{task, queue}`` (counter)
    Attempts that failed and will be retried, counted by the store as they fail.
``tickwork_run_duration_seconds{queue}`` (histogram)
    How long attempts ran, from the claim to the outcome written, for every attempt that
    ended by its outcome (succeeded, dead, or failed and retried; one whose lease expired
    on its last attempt, to its rescue). Cumulative, kept in the store like the
    counters: ``rate()`` and ``histogram_quantile`` over it are sound.
``tickwork_start_lag_seconds{queue}`` (histogram)
    Start minus scheduled time of first attempts that the scheduler triggered (not those
    asked for by hand), of tenants and tasks *without* a limit: how late the scheduler and
    the workers are. Counted when that first attempt ends. Cumulative, as above.
``tickwork_limited_start_lag_seconds{queue}`` (histogram)
    The same for runs of a tenant or a task that has a limit (``max_running`` or
    ``rate``): a limit holds such runs back on purpose, so their wait is kept apart and
    never raises the lag an alert watches.
``tickwork_due_backlog`` (gauge)
    Queued or failed runs whose time has come: waiting for a worker now.
``tickwork_oldest_due_age_seconds`` (gauge)
    How long the oldest of those of tenants and tasks without a limit has waited (0 with
    none): the backlog's lag.
``tickwork_limited_due_backlog`` (gauge)
    Of the due backlog, the runs of a tenant or task that has a limit (those a limit
    holds now are ``tickwork_tenant_held``).
``tickwork_rescues_total`` (counter)
    Lease expirations rescued by the reaper running *in this process*: only when the API
    is served by ``tickwork run``, whose scheduler rescues. A standalone ``tickwork api``
    has no reaper and does not export it (the scheduler logs one ``rescue`` line per run).
``tickwork_leader`` (gauge), ``tickwork_leader_epoch`` (gauge), ``tickwork_leader_info{holder}``
    1 while a scheduler holds an unexpired leader lease (else 0), its fencing epoch, and
    its node id as a label.
``tickwork_node_last_seen_seconds{node, kind}`` (gauge), ``tickwork_node_running{node, kind}``
    Seconds since each registered node (scheduler, worker, run) was last seen (its
    heartbeat; workers beat every few seconds), and the runs it is executing. A silent
    node (below) keeps only ``tickwork_node_last_seen_seconds`` and
    ``tickwork_node_silent``: its other gauges, the readings of a process that may be
    gone, go away, and it goes entirely once the store forgets it (a day unseen).
``tickwork_dead_letter_size`` (gauge)
    Runs in the dead-letter list (state dead).
``tickwork_unserved_runs{task, queue}`` (gauge), ``tickwork_unserved_runs_other`` (gauge)
    Due runs that no live worker would claim now: none of the workers that take the
    queue has the task (or, for ``shell``, runs shell commands), so they wait, queued,
    spending no attempt (``tickwork queues`` says why). A series only for a task and queue
    with such runs, at most :data:`UNSERVED_SERIES` (1,000) of them, the most waiting
    first; the rest are summed into ``tickwork_unserved_runs_other`` (0 while every pair
    has its own). Alert on ``tickwork_unserved_runs > 0`` for a few minutes: a worker was
    started without ``--app`` (or without ``--allow-shell``), or a deploy added a task
    before any worker had it.
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

Cardinality is bounded: no series is labelled by a run, a job or a tenant beyond the
1,000 above. ``task`` and ``queue`` are names from code and configuration; the store keeps
its own series for the first :data:`~tickwork.records.TOTALS_SERIES` (1,000) pairs of task
and queue and the first :data:`~tickwork.records.HISTOGRAM_QUEUES` (100) queues, and
counts any later one as ``(other)``.

Times are by the store's clock, so node clocks do not skew the ages. The answer is the
classic text format (0.0.4), where ``tickwork_runs`` (gauge) and ``tickwork_runs_total``
(counter) are two families; OpenMetrics would fold them into one name.
"""

from __future__ import annotations

import logging
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
from tickwork.records import (
    DURATION,
    FAILED_ATTEMPT,
    LAG,
    LIMITED_LAG,
    Histogram,
    RunTotals,
    TenantStatus,
    Unserved,
)
from tickwork.stats import DURATION_BOUNDS, LAG_BOUNDS

log = logging.getLogger("tickwork.web")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
FINAL_STATES = tuple(s for s in RunState if s in FINISHED_RUN_STATES)
TENANT_SERIES = 1000
"""Tenants with their own series at most; the rest are summed (see the module docstring)."""
UNSERVED_SERIES = 1000
"""Pairs of task and queue with their own ``tickwork_unserved_runs`` at most; the rest are
summed into ``tickwork_unserved_runs_other``."""


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

    def collect(self) -> Iterator[Metric]:
        yield from _store_health(self.client.store_health())
        try:
            stats = self.client.run_stats()
            totals = self.client.run_totals()
            cluster = self.client.cluster()
            tenants = self.client.list_tenants()
            unserved = self.client.unserved(cluster=cluster)
        except TickworkError as exc:
            log.warning("metrics: cannot read the store: %s", exc)
            yield _gauge("tickwork_scrape_error", "1 when the store could not be read.", 1)
            return
        yield _gauge("tickwork_scrape_error", "1 when the store could not be read.", 0)

        runs = GaugeMetricFamily("tickwork_runs", "Runs in each state now.", labels=["state"])
        for state in RunState:
            runs.add_metric([state.value], stats.by_state.get(state.value, 0))
        yield runs
        yield from _totals(totals)

        yield _gauge(
            "tickwork_due_backlog",
            "Queued or failed runs whose time has come (waiting for a worker).",
            stats.due_backlog,
        )
        oldest = (
            max(0.0, (stats.now - stats.open_oldest_due_at).total_seconds())
            if stats.open_oldest_due_at is not None
            else 0.0
        )
        yield _gauge(
            "tickwork_oldest_due_age_seconds",
            "How long the oldest due run of a tenant and task without a limit has waited.",
            oldest,
        )
        yield _gauge(
            "tickwork_limited_due_backlog",
            "Due runs of a tenant or task that has a limit (it may hold them on purpose).",
            stats.limited_due,
        )
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
            age = max(0.0, (cluster.now - node.last_seen_at).total_seconds())
            seen.add_metric(labels, age)
            if node.silent(cluster.now):
                # Its last readings describe a process that may be gone: only its silence
                # is news (until the store forgets the node).
                silent.add_metric(labels, 1)
                continue
            silent.add_metric(labels, 0)
            skew = node.clock
            if skew is not None:
                offset.add_metric(labels, skew.offset)
                bound.add_metric(labels, skew.bound)
            running.add_metric(labels, node.running)
            health = node.info.get("store")
            if isinstance(health, dict):
                node_up.add_metric(labels, 1 if health.get("up", True) else 0)
                outages.add_metric(labels, _number(health.get("outages")))
                reconnects.add_metric(labels, _number(health.get("reconnects")))
        yield from (seen, running, silent, node_up, outages, reconnects, offset, bound)
        yield from _tenant_metrics(tenants, self.tenant_series)
        yield from _unserved_metrics(unserved, UNSERVED_SERIES)


def _unserved_metrics(unserved: list[Unserved], cap: int) -> Iterator[Metric]:
    """The due runs no live worker would claim, by task and queue; past ``cap`` pairs, the
    most waiting keep their series and the rest are summed (see the module docstring)."""
    ranked = sorted(unserved, key=lambda u: (-u.due, u.task, u.queue))
    family = GaugeMetricFamily(
        "tickwork_unserved_runs",
        "Due runs no live worker would claim (none that takes the queue has the task).",
        labels=["task", "queue"],
    )
    for u in ranked[:cap]:
        family.add_metric([u.task, u.queue], u.due)
    yield family
    yield _gauge(
        "tickwork_unserved_runs_other",
        "Unserved due runs of the task and queue pairs past the series cap.",
        sum(u.due for u in ranked[cap:]),
    )


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


FAMILIES = (
    (DURATION, "tickwork_run_duration_seconds", DURATION_BOUNDS,
     "How long attempts ran, from the claim to the outcome (cumulative, per queue)."),
    (LAG, "tickwork_start_lag_seconds", LAG_BOUNDS,
     "Start minus slot of scheduled first attempts of tenants and tasks without a limit."),
    (LIMITED_LAG, "tickwork_limited_start_lag_seconds", LAG_BOUNDS,
     "Start minus slot of scheduled first attempts of a tenant or task that has a limit."),
)  # fmt: skip
"""The store's histograms (see RunTotals) as Prometheus families: name, bounds, help."""


def _totals(totals: RunTotals) -> Iterator[Metric]:
    """The store's cumulative totals as counters and histograms (see the docstring)."""
    finished = CounterMetricFamily(
        "tickwork_runs_finished",
        "Runs that finished, by task, queue and outcome (kept by the store: only grows).",
        labels=["task", "queue", "outcome"],
    )
    failed = CounterMetricFamily(
        "tickwork_attempts_failed",
        "Attempts that failed and will be retried, by task and queue.",
        labels=["task", "queue"],
    )
    by_state = dict.fromkeys((s.value for s in FINAL_STATES), 0)
    for (task, queue, outcome), n in sorted(totals.outcomes.items()):
        if outcome == FAILED_ATTEMPT:
            failed.add_metric([task, queue], n)
            continue
        finished.add_metric([task, queue, outcome], n)
        by_state[outcome] = by_state.get(outcome, 0) + n
    states = CounterMetricFamily(
        "tickwork_runs",
        "Runs that reached a final state (tickwork_runs_finished_total summed).",
        labels=["state"],
    )
    for state, n in by_state.items():
        states.add_metric([state], n)
    yield from (finished, states, failed)
    for name, family, bounds, doc in FAMILIES:
        histogram = HistogramMetricFamily(family, doc, labels=["queue"])
        for (kind, queue), found in sorted(totals.histograms.items()):
            if kind == name:
                histogram.add_metric([queue], _buckets(found, bounds), found.total)
        yield histogram


def _buckets(histogram: Histogram, bounds: tuple[float, ...]) -> list[tuple[str, float]]:
    """Cumulative ``le`` buckets at ``bounds`` (then +Inf). A stored bound that is not one
    of them (the bounds changed since) counts at the next bound up: never too low."""
    stored = sorted(histogram.buckets.items())
    buckets: list[tuple[str, float]] = []
    seen = i = 0
    for bound in bounds:
        while i < len(stored) and stored[i][0] <= bound:
            seen += stored[i][1]
            i += 1
        buckets.append((_bound(bound), seen))
    buckets.append(("+Inf", histogram.count))
    return buckets


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
