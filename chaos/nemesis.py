"""The faults of the nemesis run, each a pair: inject it, then heal it.

A nemesis's ``inject`` returns whatever ``heal`` needs (which node it hit, say), and the
names of its targets for the report. The run holds the fault for ``hold`` seconds (the
mode's fault window unless the nemesis needs a particular length, such as outliving a
lease) between the two.

========================  =================================================================
``kill-worker``           SIGKILL a worker; restart it at the heal
``stop-worker``           SIGSTOP a worker past its run lease, then SIGCONT
``sigterm-worker``        SIGTERM a worker with runs in flight (grace 2 s); restart it
``blackhole-worker``      a worker's link drops every packet, then comes back
``latency-worker``        300 ms each way on a worker's link
``kill-leader``           SIGKILL the leading scheduler; restart it
``stop-leader``           SIGSTOP the leader past its leader lease, then SIGCONT
``blackhole-leader``      300 ms on the leader's link for a second, then the link drops
                          every packet: most likely in the middle of a trigger transaction
                          (the fault that once froze failover)
``skew``                  the leader's wall clock 90 s ahead and a worker's 90 s behind,
                          while they run (libfaketime; their monotonic clocks untouched)
``terminate-backends``    ``pg_terminate_backend`` of every session of the database
``pg-restart``            PostgreSQL's primary stops (fast) and starts again
``promote``               the primary dies; the synchronous standby is promoted (last:
                          afterwards there is no standby)
========================  =================================================================
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaos import pg
from chaos.cluster import Cluster, Node

LATENCY_S = 0.3
SKEW_S = 90.0
PRE_BLACKHOLE_LATENCY_S = 1.0
"""Seconds of latency on the leader's link before the black hole: a trigger transaction
then spans several round trips, and the black hole most likely lands inside one."""
MID_TRIGGER_WAIT_S = 5.0
"""Seconds to wait for the leader to be inside a trigger transaction before the black hole."""
LEASE_ROW_HELD = """
    SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
    WHERE c.relname = 'tickwork_leases' AND l.mode = 'RowShareLock' AND l.granted
      AND l.pid <> pg_backend_pid()
"""
"""A trigger transaction is open: only the leader's trigger takes the lease row FOR SHARE."""
PG_DOWN_MAX_S = 10.0
"""Seconds PostgreSQL stays down at most in ``pg-restart`` (the slots' misfire grace is
60 s, and the checker expects no misfire)."""

Injected = tuple[Any, list[str]]


@dataclass(frozen=True)
class Nemesis:
    name: str
    inject: Callable[[Cluster], Injected]
    heal: Callable[[Cluster, Any], None]
    hold: Callable[[Cluster, float], float] = lambda cluster, window: window
    """Seconds to hold the fault, given the mode's fault window."""
    leader: bool = False
    """A fault of the leader: slots may wait at most leader lease + renew + 2 s meanwhile."""
    database: bool = False
    """A fault of the database itself, away for every node at once: no run whose handler
    returned may execute again (the checker's ``rerun``)."""


def _rotating(cluster: Cluster, counter: list[int]) -> Node:
    workers = cluster.workers()
    node = workers[counter[0] % len(workers)]
    counter[0] += 1
    return node


_turn = [0]


def leader_of(cluster: Cluster, timeout: float = 15.0) -> Node:
    deadline = time.monotonic() + timeout
    while True:
        node = cluster.leader()
        if node is not None:
            return node
        if time.monotonic() > deadline:
            raise RuntimeError(f"no scheduler leads within {timeout:g} s")
        time.sleep(0.1)


# -- process faults --------------------------------------------------------------------------


def _kill(node: Node) -> Injected:
    node.kill()
    return node, [node.name]


def _restart(cluster: Cluster, node: Node) -> None:
    node.start()


def _stop(node: Node) -> Injected:
    node.signal(signal.SIGSTOP)
    return node, [node.name]


def _cont(cluster: Cluster, node: Node) -> None:
    node.signal(signal.SIGCONT)


def _sigterm(node: Node) -> Injected:
    node.terminate()
    return node, [node.name]


# -- network faults --------------------------------------------------------------------------


def _blackhole(node: Node) -> Injected:
    node.link.blackhole()
    return node, [node.name]


def _blackhole_leader(cluster: Cluster) -> Injected:
    """300 ms on the leader's link, then the black hole, the moment a trigger transaction
    holds the lease row (FOR SHARE): its session is left idle in transaction, the state
    that once froze failover for as long as TCP took to give up."""
    node = leader_of(cluster)
    node.set_latency(LATENCY_S)
    time.sleep(PRE_BLACKHOLE_LATENCY_S)
    deadline = time.monotonic() + MID_TRIGGER_WAIT_S
    caught = False
    while not caught and time.monotonic() < deadline:
        caught = bool(cluster.sql(LEASE_ROW_HELD))
    node.link.blackhole()
    return node, [node.name, "mid-trigger" if caught else "between triggers"]


def _unblackhole(cluster: Cluster, node: Node) -> None:
    node.link.heal()
    node.set_latency(0.0)


def _slow(node: Node) -> Injected:
    node.set_latency(LATENCY_S)
    return node, [node.name]


def _fast(cluster: Cluster, node: Node) -> None:
    node.set_latency(0.0)


# -- clocks ----------------------------------------------------------------------------------


def _skew(cluster: Cluster) -> Injected:
    leader = leader_of(cluster)
    worker = _rotating(cluster, _turn)
    leader.skew(+SKEW_S)
    worker.skew(-SKEW_S)
    return (leader, worker), [f"{leader.name}+{SKEW_S:g}s", f"{worker.name}-{SKEW_S:g}s"]


def _unskew(cluster: Cluster, nodes: tuple[Node, Node]) -> None:
    for node in nodes:
        node.skew(0)


# -- the database ----------------------------------------------------------------------------


def _terminate(cluster: Cluster) -> Injected:
    assert cluster.primary is not None
    ended = cluster.primary.terminate_backends("chaos")
    return None, [f"{ended} sessions"]


def _pg_stop(cluster: Cluster) -> Injected:
    assert cluster.primary is not None
    cluster.primary.stop("fast")
    return None, ["primary"]


def _pg_start(cluster: Cluster, _: object) -> None:
    assert cluster.primary is not None
    cluster.primary.start()
    cluster.primary.wait_ready()


def _promote(cluster: Cluster) -> Injected:
    assert cluster.primary is not None
    assert cluster.standby is not None
    pg.fail_over(cluster.primary, cluster.standby)
    cluster.primary, cluster.standby = cluster.standby, None
    return None, ["primary -> standby"]


def _nothing(cluster: Cluster, _: object) -> None:
    pass


def _instant(cluster: Cluster, window: float) -> float:
    return 0.0


def _past_run_lease(cluster: Cluster, window: float) -> float:
    return max(window, cluster.timings.run_lease + 2.0)


def _past_leader_lease(cluster: Cluster, window: float) -> float:
    return max(window, cluster.timings.leader_lease + 3.0)


def _past_failover_bound(cluster: Cluster, window: float) -> float:
    """Long enough that a failover slower than its bound (lease + renew + 2 s) shows."""
    t = cluster.timings
    return max(window, t.leader_lease + t.leader_renew + 2.0 + 3.0)


ALL: tuple[Nemesis, ...] = (
    Nemesis("kill-worker", lambda c: _kill(_rotating(c, _turn)), _restart),
    Nemesis("stop-worker", lambda c: _stop(_rotating(c, _turn)), _cont, _past_run_lease),
    Nemesis("sigterm-worker", lambda c: _sigterm(_rotating(c, _turn)), _restart),
    Nemesis("blackhole-worker", lambda c: _blackhole(_rotating(c, _turn)), _unblackhole),
    Nemesis("latency-worker", lambda c: _slow(_rotating(c, _turn)), _fast),
    Nemesis("kill-leader", lambda c: _kill(leader_of(c)), _restart, leader=True),
    Nemesis("stop-leader", lambda c: _stop(leader_of(c)), _cont, _past_leader_lease, True),
    Nemesis("blackhole-leader", _blackhole_leader, _unblackhole, _past_failover_bound, True),
    Nemesis("skew", _skew, _unskew),
    Nemesis("terminate-backends", _terminate, _nothing, _instant, database=True),
    Nemesis("pg-restart", _pg_stop, _pg_start, lambda c, w: min(w, PG_DOWN_MAX_S), database=True),
    Nemesis("promote", _promote, _nothing, _instant, database=True),
)
BY_NAME = {n.name: n for n in ALL}
