"""``tickwork cluster`` and ``tickwork keys create|list|revoke`` in real processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cli_support import assert_error, ok, snapshot, submit, tickwork

from tickwork.client import Client
from tickwork.job import Run
from tickwork.store import Store
from tickwork.testing import wait_until


def test_cluster_shows_the_leader_and_the_nodes(store: Store) -> None:
    store.register_node("sched-a", "scheduler", "host-a", 101, {"version": "1"})
    store.register_node("work-b", "worker", "host-b", 202, {"concurrency": 4})
    store.node_heartbeat("work-b", running=3)
    lease = store.acquire_leadership("sched-a", timedelta(minutes=5))
    assert lease is not None

    view = ok("cluster", "--db", store.url, "--json").json()

    assert set(view) == {"leader", "nodes", "now"}
    assert view["leader"]["holder"] == "sched-a"
    assert view["leader"]["epoch"] == lease.epoch
    assert datetime.fromisoformat(view["leader"]["expires_at"]) == lease.expires_at
    nodes = {node["id"]: node for node in view["nodes"]}
    assert set(nodes) == {"sched-a", "work-b"}
    worker = nodes["work-b"]
    assert (worker["kind"], worker["host"], worker["pid"], worker["running"]) == (
        "worker", "host-b", 202, 3
    )  # fmt: skip
    assert worker["info"] == {"concurrency": 4}
    assert datetime.fromisoformat(worker["last_seen_at"]) <= datetime.fromisoformat(view["now"])

    lines = ok("cluster", "--db", store.url).out.strip().splitlines()
    assert lines[0].startswith(f"leader: sched-a, epoch {lease.epoch}, lease expires ")
    assert lines[1].split() == [
        "NODE", "KIND", "HOST", "PID", "STARTED", "LAST", "SEEN", "STATUS", "RUNNING", "STORE",
        "CLOCK",
    ]  # fmt: skip
    rows = {line.split()[0]: line for line in lines[2:]}
    assert "scheduler (leader)" in rows["sched-a"]
    assert rows["work-b"].split()[-4:] == ["up", "3", "-", "-"]
    assert re.search(r" s ago ", rows["work-b"])


def test_cluster_marks_a_node_whose_heartbeats_stopped_as_silent(store: Store) -> None:
    # Beats every 0.1 s by its own account: silent once unseen for 5 s (the floor).
    store.register_node("quiet", "worker", "host-q", 303, {"beat": 0.1})
    store.register_node("alive", "worker", "host-a", 404, {"beat": 0.1, "store": {
        "up": True, "outages": 2, "reconnects": 5}})  # fmt: skip
    later = store.now() + timedelta(seconds=6)
    store.node_heartbeat("alive", now=later)

    with Client(store) as client:
        view = client.cluster()
    nodes = {node.id: node for node in view.nodes}
    assert nodes["quiet"].silent(later)
    assert not nodes["alive"].silent(later)
    assert not nodes["quiet"].silent(nodes["quiet"].last_seen_at + timedelta(seconds=4.9))

    # By the store's clock now, nobody is silent yet; six seconds on, "quiet" is.
    listed = ok("cluster", "--db", store.url, "--json").json()["nodes"]
    assert {n["id"]: n["silent"] for n in listed} == {"quiet": False, "alive": False}
    lines = ok("cluster", "--db", store.url).out.strip().splitlines()
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert rows["alive"][-5:] == ["up", "0", "up", "2/5", "-"]


def test_cluster_shows_each_nodes_clock_against_the_stores(store: Store) -> None:
    near, fast = {"offset": -0.004, "bound": 0.001}, {"offset": 5.012, "bound": 0.002}
    store.register_node("near", "worker", "host-a", 1, {"clock": near})
    store.register_node("fast", "worker", "host-b", 2, {"clock": fast})

    nodes = {n["id"]: n for n in ok("cluster", "--db", store.url, "--json").json()["nodes"]}
    assert nodes["fast"]["info"]["clock"] == {"offset": 5.012, "bound": 0.002}
    lines = ok("cluster", "--db", store.url).out.strip().splitlines()
    rows = {line.split()[0]: line for line in lines[2:]}
    assert rows["near"].endswith(" -0.00 s ±0.001")
    assert rows["fast"].endswith(" +5.01 s ±0.002 OFF")


def test_cluster_without_a_leader_or_nodes_says_so(store: Store) -> None:
    assert ok("cluster", "--db", store.url, "--json").json()["leader"] is None
    out = ok("cluster", "--db", store.url).out
    assert out.startswith("leader: none")
    assert "nodes: none registered" in out


KEY = re.compile(r"tw_[a-z0-9]{8}_[A-Za-z0-9_-]{43}")


def test_keys_create_prints_the_key_alone_and_it_authenticates(store: Store) -> None:
    created = ok("keys", "create", "--tenant", "acme", "--label", "ci", "--db", store.url)
    admin = ok("keys", "create", "--tenant", "ops", "--admin", "--db", store.url)

    key = created.out.removesuffix("\n")
    assert KEY.fullmatch(key), created.out
    assert "cannot be shown again" in created.err
    client = Client(store)
    record = client.authenticate(key)
    assert record is not None
    assert (record.tenant, record.admin, record.label) == ("acme", False, "ci")
    admin_record = client.authenticate(admin.out.strip())
    assert admin_record is not None
    assert admin_record.admin


def test_keys_list_shows_prefixes_never_secrets(store: Store) -> None:
    key = ok("keys", "create", "--tenant", "acme", "--db", store.url).out.strip()
    prefix = key.split("_")[1]

    listed = ok("keys", "list", "--db", store.url, "--json")
    table = ok("keys", "list", "--db", store.url)

    (entry,) = listed.json()
    assert set(entry) == {"id", "prefix", "tenant", "admin", "label", "created_at", "revoked_at"}
    assert (entry["prefix"], entry["tenant"], entry["admin"]) == (prefix, "acme", False)
    secret = key.split("_", 2)[2]
    for out in (listed.out, table.out):
        assert secret not in out
        assert not re.search(r"[0-9a-f]{64}", out)  # no sha256 either
    header, row = table.out.strip().splitlines()
    assert header.split() == ["ID", "PREFIX", "TENANT", "ADMIN", "LABEL", "CREATED", "REVOKED"]
    assert row.split()[:4] == [str(entry["id"]), prefix, "acme", "no"]


def test_keys_revoke_by_prefix_id_or_whole_key(store: Store) -> None:
    keys = [ok("keys", "create", "--tenant", "acme", "--db", store.url).out.strip()]
    keys += [ok("keys", "create", "--tenant", "acme", "--db", store.url).out.strip()]
    keys += [ok("keys", "create", "--tenant", "acme", "--db", store.url).out.strip()]
    client = Client(store)
    by_id = client.authenticate(keys[1])
    assert by_id is not None

    for name in (keys[0].split("_")[1], str(by_id.id), keys[2]):
        out = ok("keys", "revoke", name, "--db", store.url).out
        assert out.startswith("revoked API key ")

    assert [client.authenticate(key) for key in keys] == [None, None, None]
    listed = ok("keys", "list", "--db", store.url, "--json").json()
    assert all(entry["revoked_at"] for entry in listed)
    ok("keys", "revoke", str(by_id.id), "--db", store.url)  # again: idempotent


def test_keys_revoke_ends_the_dashboard_sessions_of_the_key(store: Store) -> None:
    key = ok("keys", "create", "--tenant", "acme", "--db", store.url).out.strip()
    client = Client(store)
    signed_in = client.sign_in(key)
    assert signed_in is not None
    assert client.authenticate_session(signed_in.token) is not None

    out = ok("keys", "revoke", key, "--db", store.url).out

    assert "its dashboard sessions ended" in out
    assert client.authenticate_session(signed_in.token) is None


def test_keys_bad_input_exits_2_and_unknown_keys_exit_1(store: Store) -> None:
    before = snapshot(store)

    assert_error(tickwork("keys", "create", "--db", store.url), 2, "Missing option '--tenant'")
    assert_error(tickwork("keys", "create", "--tenant", "", "--db", store.url), 2, "tenant")
    assert_error(
        tickwork("keys", "create", "--tenant", "a", "--label", " x", "--db", store.url), 2, "label"
    )
    assert_error(tickwork("keys", "revoke", "nope", "--db", store.url), 1, "'nope' not found")
    assert_error(tickwork("keys", "revoke", "999", "--db", store.url), 1, "'999' not found")

    assert snapshot(store) == before


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_running_node_shows_in_cluster_and_its_runs_in_explain(
    store: Store, tmp_path: Path
) -> None:
    job = submit(store, every="1s", name="tick")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    with (tmp_path / "run.log").open("w") as log:
        node = subprocess.Popen(
            [sys.executable, "-m", "tickwork", "run", "--allow-shell", "--db", store.url],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:

            def led_and_ran() -> tuple[dict[str, Any], list[Run]] | None:
                view: dict[str, Any] = ok("cluster", "--db", store.url, "--json").json()
                done = [r for r in store.list_runs(job_id=job.id).items if r.finished_at]
                return (view, done) if view["leader"] and view["nodes"] and done else None

            view, done = wait_until(
                led_and_ran, 60, 0.5, what="tickwork run led, registered and ran a slot"
            )
        finally:
            node.send_signal(signal.SIGTERM)
            node.wait(timeout=60)

    assert view["leader"]["holder"] in {n["id"] for n in view["nodes"]}
    assert {n["pid"] for n in view["nodes"]} == {node.pid}
    slot = done[-1].scheduled_for
    text = ok("explain", str(job.id), "--at", slot.isoformat(), "--db", store.url).out
    shown = slot.isoformat(timespec="seconds")
    assert f"was triggered for {shown}: run {done[-1].id} is succeeded" in text
    # A clean stop deregisters the node and gives the lease up.
    after = ok("cluster", "--db", store.url, "--json").json()
    assert (after["leader"], after["nodes"]) == (None, [])
