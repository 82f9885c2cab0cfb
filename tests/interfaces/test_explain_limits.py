"""``explain`` and the tenants' statuses say why a due run waits: its tenant's max_running
or its tenant's rate, or that no live worker has its task (every store, in process)."""

from __future__ import annotations

from tickwork.client import Client
from tickwork.job import JobSpec, RunState
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.store.base import TaskLimits


def live_worker(store: Store, *tasks: str) -> None:
    """A worker node, seen now, that has ``tasks`` (as a worker's heartbeat writes it)."""
    info = {"tasks": list(tasks), "queues": None, "allow_shell": False, "beat": 3.0}
    store.register_node("w-live", "worker", "host", 1, info)


def test_explain_says_a_due_run_waits_for_its_tenants_rate(store: Store) -> None:
    now = store.now()
    client = Client(store)
    client.set_tenant_limits("acme", rate=100 / 3600, burst=1)  # set as "100/h"
    live_worker(store, "t")
    spec = JobSpec(task="t", schedule=Once(at=now), tenant="acme")
    submitted = store.submit_many([spec, spec], now=now)
    assert len(store.claim("w", limit=10)) == 1
    [waiting] = [s for s in submitted if store.get_run(s.run.id).state is RunState.QUEUED]  # type: ignore[union-attr]
    text = client.explain(waiting.job.id).text
    assert "waiting: tenant acme's rate 100/h" in text  # as it was written, not 0.0277778/s
    status = client.tenant("acme")
    assert (status.starts, status.rate_held, status.held, status.due) == (0, True, 1, 1)


def test_a_tenant_with_tokens_left_holds_nothing_back(store: Store) -> None:
    now = store.now()
    client = Client(store)
    client.set_tenant_limits("acme", rate=0.01, burst=5)
    live_worker(store, "t")
    store.submit_many([JobSpec(task="t", schedule=Once(at=now), tenant="acme")] * 3, now=now)
    status = client.tenant("acme")
    assert (status.starts, status.rate_held, status.held) == (5, False, 0)
    assert "waiting" not in client.explain(store.list_runs().items[0].job_id).text


def test_explain_says_a_due_run_waits_for_its_tasks_rate(store: Store) -> None:
    now = store.now()
    client = Client(store)
    store.register_task_limits({"paced": TaskLimits(rate=1 / 60, burst=1)})
    live_worker(store, "paced")
    spec = JobSpec(task="paced", schedule=Once(at=now), tenant="acme")
    submitted = store.submit_many([spec, spec], now=now)
    assert len(store.claim("w", limit=10)) == 1
    [waiting] = [s for s in submitted if store.get_run(s.run.id).state is RunState.QUEUED]  # type: ignore[union-attr]
    assert "waiting: task paced's rate 1/m" in client.explain(waiting.job.id).text


def test_explain_says_a_due_run_waits_for_a_live_worker_with_its_task(store: Store) -> None:
    now = store.now()
    client = Client(store)
    client.set_tenant_limits("acme", max_running=1)
    live_worker(store, "other")
    spec = JobSpec(task="send_mail", schedule=Once(at=now), tenant="acme")
    job = store.submit(spec, now=now).job
    text = client.explain(job.id).text
    assert "waiting: no live worker has task send_mail (it stays queued" in text
    live_worker(store, "send_mail")  # the same node, now with the task
    assert "waiting" not in client.explain(job.id).text


def test_explain_names_every_condition_that_holds_a_run(store: Store) -> None:
    now = store.now()
    client = Client(store)
    client.set_tenant_limits("acme", max_running=1)
    spec = JobSpec(task="t", schedule=Once(at=now), tenant="acme")
    store.submit_many([spec, spec], now=now)
    assert len(store.claim("w", limit=10)) == 1
    [waiting] = store.list_runs(state=RunState.QUEUED).items
    text = client.explain(waiting.job_id).text
    assert "waiting: no live worker has task t (no worker is live)" in text
    assert "; waiting: tenant acme is at max_running 1 (1 running)" in text
