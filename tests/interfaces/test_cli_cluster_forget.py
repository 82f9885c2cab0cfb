"""``tickwork cluster forget NODE`` in real processes: a gone node goes, a live one is
refused (exit 1) and stays; the listing still answers ``tickwork cluster``."""

from __future__ import annotations

from datetime import timedelta

from cli_support import assert_error, ok, tickwork

from tickwork.records import NODE_GONE_AFTER
from tickwork.store import Store


def test_cluster_forget_removes_a_gone_node_and_refuses_a_live_one(store: Store) -> None:
    now = store.now()
    store.register_node("worker-old", "worker", "host-a", 11, now=now - 2 * NODE_GONE_AFTER)
    store.register_node("worker-live", "worker", "host-b", 12)

    refused = tickwork("cluster", "forget", "worker-live", "--db", store.url)
    assert_error(refused, 1, "cannot forget node 'worker-live'")
    gone = ok("cluster", "forget", "worker-old", "--db", store.url)

    assert "forgot node worker-old (worker on host-a, pid 11" in gone.out
    listed = ok("cluster", "--db", store.url, "--json").json()["nodes"]
    assert [n["id"] for n in listed] == ["worker-live"]
    assert_error(tickwork("cluster", "forget", "ghost", "--db", store.url), 1, "not found")


def test_cluster_forget_of_a_lately_silent_node_is_refused(store: Store) -> None:
    store.register_node(
        "worker-quiet", "worker", "host-a", 11, now=store.now() - timedelta(seconds=20)
    )

    assert_error(
        tickwork("cluster", "forget", "worker-quiet", "--db", store.url), 1, "silent for 60 s"
    )
    assert [n["id"] for n in ok("cluster", "--db", store.url, "--json").json()["nodes"]] == [
        "worker-quiet"
    ]
