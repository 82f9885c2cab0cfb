"""``tickwork tenants``, ``tenants set`` and ``tenants unset`` in real processes; bad input
exits 2 with one line on stderr and changes nothing."""

from __future__ import annotations

from datetime import datetime

import pytest
from cli_support import assert_error, ok, submit, tickwork

from tickwork.client import Client
from tickwork.job import JobSpec
from tickwork.records import TenantLimits
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
        "running": 2, "due": 1, "held": 1, "at_limit": True,
    }  # fmt: skip
    table = ok("tenants", "--db", store.url).out.splitlines()
    assert table[0].split() == [
        "TENANT", "MAX", "RUNNING", "RATE", "BURST", "WEIGHT", "RUNNING", "DUE", "HELD"
    ]  # fmt: skip
    assert table[1].split() == ["acme", "2", "-", "-", "1", "2", "1", "1"]
    said = ok("tenants", "unset", "acme", "--max-running", "--db", store.url)
    assert said.out.strip() == "tenant acme: no limits (2 running now)"
    assert Client(store).tenant("acme").limits.max_running is None


def test_set_changes_only_the_limits_it_names_and_shows_rates_as_written(store: Store) -> None:
    ok("tenants", "set", "acme", "--max-running", "5", "--db", store.url)
    said = ok("tenants", "set", "acme", "--rate", "30/m", "--weight", "2", "--db", store.url)
    assert said.out.strip() == "tenant acme: max_running 5, rate 30/m, weight 2 (0 running now)"
    ok("tenants", "set", "acme", "--burst", "4", "--db", store.url)
    assert store.tenant_limits("acme") == TenantLimits("acme", 5, 0.5, 4, 2.0)
    ok("tenants", "set", "globex", "--rate", "20", "--db", store.url)  # a bare number: per second
    rows = {
        line.split()[0]: line.split() for line in ok("tenants", "--db", store.url).out.splitlines()
    }
    assert rows["acme"][1:5] == ["5", "30/m", "4", "2"]
    assert rows["globex"][1:5] == ["-", "20/s", "20", "1"]  # the bucket: one second's worth
    shown = ok("tenants", "show", "acme", "--json", "--db", store.url).json()
    assert (shown["rate"], shown["burst"], shown["weight"]) == (0.5, 4, 2.0)


def test_unsetting_the_rate_clears_its_burst_and_leaves_the_rest(store: Store) -> None:
    store.set_tenant_limits("acme", max_running=3, rate=20.0, burst=40, weight=3.0)
    said = ok("tenants", "unset", "acme", "--rate", "--db", store.url)
    assert said.out.strip() == "tenant acme: max_running 3, weight 3 (0 running now)"
    assert store.tenant_limits("acme") == TenantLimits("acme", 3, None, None, 3.0)
    ok("tenants", "unset", "acme", "--max-running", "--weight", "--db", store.url)
    assert ok("tenants", "--json", "--db", store.url).json() == []  # no row is left


def test_show_of_a_tenant_nothing_names_exits_1_saying_so(store: Store) -> None:
    result = tickwork("tenants", "show", "nobody", "--db", store.url)
    assert_error(result, 1, "tenant 'nobody' not found: no job, run or limit names it")


def test_show_of_a_tenant_with_jobs_but_no_limits_is_a_row(store: Store) -> None:
    submit(store, every="1h", tenant="quiet")
    table = ok("tenants", "show", "quiet", "--db", store.url).out.splitlines()
    assert table[1].split() == ["quiet", "-", "-", "-", "1", "0", "0", "0"]


def test_set_on_a_tenant_nothing_names_warns_and_sets(store: Store) -> None:
    submit(store, every="1h", tenant="acme")
    typo = tickwork("tenants", "set", "acmee", "--max-running", "5", "--db", store.url)
    assert typo.code == 0
    assert typo.err.startswith("tickwork: warning: tenant 'acmee' had no job, run or limit")
    assert store.tenant_limits("acmee").max_running == 5
    known = tickwork("tenants", "set", "acme", "--max-running", "5", "--db", store.url)
    assert known.code == 0
    assert known.err == ""
    again = tickwork("tenants", "set", "acmee", "--max-running", "6", "--db", store.url)
    assert again.err == ""  # it has a limit now


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["set", "acme", "--max-running", "0"], "max_running must be a whole number"),
        (["set", "acme", "--max-running", "-2"], "max_running must be a whole number"),
        (["set", "acme", "--max-running", "abc"], "'--max-running'"),
        (["set", "acme", "--rate", "0/s"], "rate must be from 0.00001/s"),
        (["set", "acme", "--rate", "-5/m"], "rate must be from 0.00001/s"),
        (["set", "acme", "--rate", "fast"], "rate must be a number per second, minute or hour"),
        (["set", "acme", "--rate", "20/d"], "rate must be a number per second, minute or hour"),
        (["set", "acme", "--burst", "0"], "burst must be a whole number"),
        (["set", "acme", "--weight", "0"], "weight must be a number from 0.001 to 1000"),
        (["set", "acme", "--weight", "nan"], "weight must be a number from 0.001 to 1000"),
        (["set", "acme", "--weight", "heavy"], "'--weight'"),
        (["set", "acme", "--max-running", "2", "--rate", "x"], "rate must be a number"),
        (["set", "acme"], "nothing to set"),
        (["set", "acme", "--speed", "5"], "No such option"),
        (["unset", "acme"], "nothing to unset"),
        (["unset", "acme", "--speed"], "No such option"),
    ],
)
def test_bad_input_exits_2_and_changes_nothing(store: Store, argv: list[str], message: str) -> None:
    store.set_tenant_limits("acme", max_running=3)
    assert_error(tickwork("tenants", *argv, "--db", store.url), 2, message)
    assert store.tenant_limits("acme") == TenantLimits("acme", max_running=3)


def test_a_burst_without_a_rate_exits_2_and_changes_nothing(store: Store) -> None:
    store.set_tenant_limits("acme", max_running=3)
    assert_error(
        tickwork("tenants", "set", "acme", "--burst", "5", "--max-running", "4", "--db", store.url),
        2,
        "burst needs a rate",
    )
    assert store.tenant_limits("acme") == TenantLimits("acme", max_running=3)


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
