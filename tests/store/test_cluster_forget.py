"""Conformance: forgetting a gone node from the cluster view (``tickwork cluster forget``),
and refusing to forget one that is alive or only briefly silent."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tickwork.errors import NodeAlive, NodeNotFound
from tickwork.records import NODE_GONE_AFTER
from tickwork.store import Store

SECOND = timedelta(seconds=1)


def test_a_node_silent_past_the_bound_is_forgotten_from_the_cluster(
    store: Store, t0: datetime
) -> None:
    store.register_node("worker-a", "worker", "host-a", 11, now=t0)
    store.register_node("worker-b", "worker", "host-b", 12, now=t0)
    later = t0 + NODE_GONE_AFTER + SECOND
    store.node_heartbeat("worker-b", now=later)

    forgotten = store.forget_node("worker-a", now=later)

    assert forgotten.id == "worker-a"
    assert forgotten.host == "host-a"
    assert [n.id for n in store.list_nodes(now=later)] == ["worker-b"]


def test_a_live_or_lately_silent_node_is_not_forgotten(store: Store, t0: datetime) -> None:
    store.register_node("worker-a", "worker", "host-a", 11, now=t0)

    with pytest.raises(NodeAlive, match="cannot forget node 'worker-a'"):
        store.forget_node("worker-a", now=t0 + SECOND)
    silent = t0 + timedelta(seconds=30)  # silent (past 3 beats), not yet dead
    (node,) = store.list_nodes(now=silent)
    assert node.silent(silent)
    with pytest.raises(NodeAlive):
        store.forget_node("worker-a", now=silent)
    assert [n.id for n in store.list_nodes(now=silent)] == ["worker-a"]


def test_forgetting_an_unknown_node_raises_node_not_found(store: Store, t0: datetime) -> None:
    with pytest.raises(NodeNotFound, match="node 'ghost' not found"):
        store.forget_node("ghost", now=t0)
