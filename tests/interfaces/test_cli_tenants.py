"""``tickwork tenants``, ``tenants set`` and ``tenants unset`` in real processes; bad input
exits 2 with one line on stderr and changes nothing."""

from __future__ import annotations

from datetime import datetime

import pytest
from cli_support import assert_error, ok, tickwork

from tickwork.client import Client
from tickwork.job import JobSpec
from tickwork.schedule import Once
from tickwork.store import Store


def test_set_list_and_unset_a_tenants_max_running(store: Store) -> None:
    now: datetime = store.now()
    store.submit_many([JobSpec(task="t", schedule=Once(at=now), tenant="acme")] * 3, now=now)
    said = ok("tenants", "set", "acme", "--max-running", "2", "--db", store.url)
    assert said.out.strip() == "tenant acme: max_running 2 (0 running now)"
    store.claim("w", limit=10)
    [entry] = ok("tenants", "--json", "--db", store.url).json()
    assert entry == {
        "tenant": "acme", "max_running": 2, "rate": None, "burst": None, "weight": 1.0,
        "running": 2, "due": 1, "at_limit": True,
    }  # fmt: skip
    table = ok("tenants", "--db", store.url).out.splitlines()
    assert table[0].split() == ["TENANT", "MAX", "RUNNING", "RUNNING", "QUEUED+DUE", "HELD"]
    assert table[1].split() == ["acme", "2", "2", "1", "at", "max_running"]
    ok("tenants", "unset", "acme", "--max-running", "--db", store.url)
    assert Client(store).tenant("acme").limits.max_running is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["set", "acme", "--max-running", "0"], "max_running must be a whole number"),
        (["set", "acme", "--max-running", "-2"], "max_running must be a whole number"),
        (["set", "acme", "--max-running", "abc"], "'--max-running'"),
        (["set", "acme"], "nothing to set"),
        (["set", "acme", "--rate", "5"], "No such option"),
        (["unset", "acme"], "nothing to unset"),
    ],
)
def test_bad_input_exits_2_and_changes_nothing(store: Store, argv: list[str], message: str) -> None:
    store.set_tenant_limits("acme", max_running=3)
    assert_error(tickwork("tenants", *argv, "--db", store.url), 2, message)
    assert store.tenant_limits("acme").max_running == 3


def test_explain_says_a_due_run_waits_for_its_tenants_max_running(store: Store) -> None:
    now = store.now()
    client = Client(store)
    client.set_tenant_limits("acme", max_running=1)
    spec = JobSpec(task="t", schedule=Once(at=now), tenant="acme")
    first, second = store.submit_many([spec, spec], now=now)
    assert len(store.claim("w", limit=10)) == 1
    waiting = first if store.get_run(first.run.id).state == "queued" else second  # type: ignore[union-attr]
    text = ok("explain", str(waiting.job.id), "--db", store.url).out
    assert "waiting: tenant acme is at max_running 1 (1 running)" in text
