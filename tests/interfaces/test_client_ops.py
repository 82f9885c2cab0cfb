"""The Client calls the CLI and the HTTP API share, in process against every store:
tenant scoping, the commands, inspection and API keys."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from cli_support import dead_run, submit, trigger_at

from tickwork import auth
from tickwork.client import Client
from tickwork.errors import (
    ApiKeyNotFound,
    InvalidTransition,
    JobNotFound,
    RunNotFound,
    ValidationError,
)
from tickwork.job import JobState, RunState
from tickwork.records import Cluster, TenantLimits, to_json
from tickwork.store import Store


@pytest.fixture
def client(store: Store) -> Client:
    return Client(store)


def test_a_tenant_sees_and_acts_on_its_own_jobs_only(client: Client, store: Store) -> None:
    mine = submit(store, every="1h", tenant="acme")
    theirs = submit(store, every="1h", tenant="other")
    their_run = store.trigger_job(theirs.id)

    assert [job.id for job in client.list_jobs(tenant="acme").items] == [mine.id]
    assert [job.id for job in client.list_jobs().items] == [theirs.id, mine.id]
    for act in (client.cancel_job, client.pause_job, client.resume_job, client.trigger_job):
        with pytest.raises(JobNotFound):
            act(theirs.id, tenant="acme")
    for act_run in (client.cancel_run, client.retry_run):
        with pytest.raises(RunNotFound):
            act_run(their_run.id, tenant="acme")
    with pytest.raises(JobNotFound):
        client.explain(theirs.id, tenant="acme")
    with pytest.raises(JobNotFound):
        client.slot_ledger(theirs.id, tenant="acme")
    assert store.get_job(theirs.id).state is JobState.ACTIVE
    assert store.get_run(their_run.id).state is RunState.QUEUED


def test_list_jobs_filters_and_pages(client: Client, store: Store) -> None:
    made = [submit(store, every="1h").id for _ in range(3)]
    store.pause_job(made[0])

    first = client.list_jobs(limit=2)
    rest = client.list_jobs(limit=2, after=first.next_cursor)

    assert [job.id for job in first.items] == made[:0:-1]
    assert first.next_cursor == made[1]
    assert [job.id for job in rest.items] == [made[0]]
    assert rest.next_cursor is None
    assert [job.id for job in client.list_jobs(state="paused").items] == [made[0]]
    assert [job.id for job in client.list_jobs(state=JobState.ACTIVE).items] == made[:0:-1]
    assert client.list_jobs(task="http").items == []


@pytest.mark.parametrize(
    "kwargs",
    [{"state": "done"}, {"limit": 0}, {"limit": 1001}, {"after": 2**63}, {"limit": True}],
)
def test_list_jobs_rejects_bad_filters(client: Client, kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        client.list_jobs(**kwargs)  # type: ignore[arg-type]


def test_commands_change_state_and_refuse_what_the_state_forbids(
    client: Client, store: Store
) -> None:
    job = submit(store, every="1h")

    assert client.pause_job(job.id).state is JobState.PAUSED
    assert client.resume_job(job.id).state is JobState.ACTIVE
    run = client.trigger_job(job.id)
    assert (run.job_id, run.state) == (job.id, RunState.QUEUED)
    with pytest.raises(InvalidTransition):
        client.retry_run(run.id)
    assert client.cancel_run(run.id).state is RunState.CANCELLED
    assert client.cancel_job(job.id).state is JobState.CANCELLED
    with pytest.raises(InvalidTransition):
        client.trigger_job(job.id)
    with pytest.raises(InvalidTransition):
        client.pause_job(job.id)


def test_ids_out_of_any_store_range_are_bad_input(client: Client) -> None:
    for act in (client.get_job, client.cancel_job, client.trigger_job, client.retry_run):
        with pytest.raises(ValidationError, match="out of range"):
            act(2**63)
    with pytest.raises(JobNotFound):
        client.get_job(2**63 - 1)


def test_dead_runs_pages_the_dead_letter_list(client: Client, store: Store) -> None:
    job = submit(store, every="1h")
    dead = [dead_run(store, job.id).id for _ in range(3)]
    store.trigger_job(job.id)

    page = client.dead_runs(limit=2)

    assert [run.id for run in page.items] == dead[:0:-1]
    assert page.next_cursor is not None
    assert [run.id for run in client.dead_runs(after=page.next_cursor).items] == [dead[0]]
    assert client.retry_run(dead[0]).state is RunState.QUEUED
    assert [run.id for run in client.dead_runs().items] == dead[:0:-1]


def test_next_fire_times_of_a_recurring_job_follow_now(client: Client, store: Store) -> None:
    job = submit(store, every="90s")
    now = store.now()

    times = client.next_fire_times(job, 3)

    assert len(times) == 3
    assert now < times[0] <= now + timedelta(seconds=91)
    assert [b - a for a, b in itertools.pairwise(times)] == [timedelta(seconds=90)] * 2


def test_next_fire_times_of_one_off_and_finished_jobs(client: Client, store: Store) -> None:
    at = datetime(2031, 1, 1, 9, tzinfo=UTC)
    later = submit(store, at=at)
    done = submit(store)  # due now: triggered at submit, so queued with no slot left
    cancelled = submit(store, cron="0 * * * *")
    store.cancel_job(cancelled.id)

    assert client.next_fire_times(later) == [at]
    assert client.next_fire_times(done) == []
    assert client.next_fire_times(store.get_job(cancelled.id)) == []
    with pytest.raises(ValidationError):
        client.next_fire_times(later, 0)


def test_slot_ledger_and_explain(client: Client, store: Store) -> None:
    hour = store.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    job = submit(store, now=hour, cron="*/10 * * * *", misfire="skip")
    trigger_at(store, hour + timedelta(minutes=30, seconds=1))

    (skip,) = client.slot_ledger(job.id)

    assert (skip.fate, skip.count, skip.first_slot) == ("misfire", 2, hour + timedelta(minutes=10))
    skipped = client.explain(job.id, hour + timedelta(minutes=20))
    assert "misfire policy is 'skip'" in skipped.text
    assert skipped.slot == hour + timedelta(minutes=20)
    assert (skipped.fate, skipped.run) == ("misfire", None)
    ran = client.explain(job.id, (hour + timedelta(minutes=30)).isoformat())
    assert "was triggered for" in ran.text
    assert ran.run is not None
    assert ran.slot == ran.run.scheduled_for == hour + timedelta(minutes=30)
    assert ran.fate is None
    with pytest.raises(ValidationError):
        client.explain(job.id, "half past nine")
    with pytest.raises(ValidationError):
        client.explain(job.id, datetime(2030, 1, 1))  # naive


def test_cluster_and_run_stats(client: Client, store: Store) -> None:
    store.register_node("w1", "worker", "host", 7)
    lease = store.acquire_leadership("s1", timedelta(minutes=1))
    submit(store)  # one queued run, due now

    view = client.cluster()
    stats = client.run_stats()

    assert isinstance(view, Cluster)
    assert view.leader == lease
    assert [node.id for node in view.nodes] == ["w1"]
    assert stats.by_state["queued"] == 1
    assert client.run_stats(tenant="nobody").by_state["queued"] == 0
    encoded = to_json(view)
    assert encoded["leader"]["holder"] == "s1"
    assert encoded["nodes"][0]["kind"] == "worker"
    assert to_json(stats)["by_state"]["queued"] == 1


def test_api_keys_authenticate_until_revoked(client: Client, store: Store) -> None:
    record, key = client.create_api_key(tenant="acme", label="ci")
    admin, admin_key = client.create_api_key(tenant="ops", admin=True)

    assert client.authenticate(key) == record
    assert client.authenticate(admin_key) == admin
    assert admin.admin
    assert not record.admin
    assert client.authenticate(key[:-1] + ("x" if key[-1] != "x" else "y")) is None
    assert client.authenticate("not a key") is None
    assert client.authenticate("") is None
    assert [k.id for k in client.list_api_keys()] == [admin.id, record.id]
    assert "key_hash" not in to_json(record)

    revoked = client.revoke_api_key(record.prefix)
    assert revoked.revoked_at is not None
    assert client.authenticate(key) is None
    assert client.revoke_api_key(key).revoked_at == revoked.revoked_at  # idempotent
    client.revoke_api_key(f"tw_{admin.prefix}")
    assert client.authenticate(admin_key) is None
    with pytest.raises(ApiKeyNotFound):
        client.revoke_api_key("nope")


def test_api_keys_were_ever_created_even_when_all_are_revoked(client: Client) -> None:
    assert client.api_keys_exist() is False
    record, _ = client.create_api_key(tenant="acme")
    client.revoke_api_key(record.prefix)

    assert client.api_keys_exist() is True


def test_a_key_signs_in_to_a_session_that_its_token_names(client: Client) -> None:
    record, key = client.create_api_key(tenant="acme")

    signed_in = client.sign_in(key)

    assert signed_in is not None
    assert signed_in.key == record
    assert signed_in.token.startswith("tws_")
    assert key not in signed_in.token
    assert signed_in.session.expires_at - signed_in.session.created_at == auth.SESSION_LIFETIME
    assert signed_in.session.idle_timeout == auth.SESSION_IDLE_TIMEOUT
    assert client.authenticate_session(signed_in.token) == (signed_in.session, record)
    assert client.authenticate_session(key) is None  # a key is no session token
    assert client.authenticate(signed_in.token) is None  # and a session token is no key
    assert client.sign_in("tw_aaaaaaaa_" + "A" * 43) is None


def test_a_session_ends_when_signed_out_or_when_its_key_is_revoked(client: Client) -> None:
    record, key = client.create_api_key(tenant="acme")
    first, second = client.sign_in(key), client.sign_in(key)
    assert first is not None
    assert second is not None

    assert client.sign_out(first.token) is True
    assert client.sign_out(first.token) is False
    assert client.authenticate_session(first.token) is None
    assert client.authenticate_session(second.token) is not None

    client.revoke_api_key(record.prefix)

    assert client.authenticate_session(second.token) is None
    assert client.sign_in(key) is None


@pytest.mark.parametrize("token", ["", "tws_", "tws_" + "A" * 42, "tws_" + "A" * 43 + "\n", "x"])
def test_a_malformed_session_token_names_no_session(client: Client, token: str) -> None:
    assert client.authenticate_session(token) is None
    assert client.sign_out(token) is False


@pytest.mark.parametrize(
    "kwargs",
    [{"tenant": ""}, {"tenant": " acme"}, {"tenant": "a" * 201}, {"tenant": "a", "label": "x\n"}],
)
def test_create_api_key_rejects_a_bad_tenant_or_label(
    client: Client, store: Store, kwargs: dict[str, str]
) -> None:
    with pytest.raises(ValidationError):
        client.create_api_key(**kwargs)  # type: ignore[arg-type]
    assert store.list_api_keys() == []


def test_set_tenant_limits_takes_a_rate_as_text_and_refuses_a_bad_one(store: Store) -> None:
    client = Client(store)
    assert client.set_tenant_limits("acme", rate="30/m", burst=3).limits.rate == 0.5
    with pytest.raises(ValidationError, match="rate must be"):
        client.set_tenant_limits("acme", rate="fast", max_running=4)
    assert store.tenant_limits("acme") == TenantLimits("acme", rate=0.5, burst=3)
