"""The testing kit used the way a user would: tasks on ``tickwork_app``, time moved and work
run by ``tickwork_kit`` (the pytest plugin's fixtures), on every store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from tests import ledger

from tickwork import App, Discard, Retry
from tickwork.errors import InvalidArgs, UnknownTask
from tickwork.job import RunState
from tickwork.schedule import DstWarning
from tickwork.tasks.task import Context
from tickwork.testing import FakeClock, TickworkTestKit


@pytest.fixture
def tickwork_store_url(store_url: str) -> str:
    """The plugin's fixtures on each store of the suite (SQLite, PostgreSQL)."""
    return store_url


def test_drain_runs_what_is_due_now_inline_sync_and_async(
    tickwork_app: App, tickwork_kit: TickworkTestKit
) -> None:
    seen: list[str] = []

    @tickwork_app.task
    def greet(ctx: Context, who: str) -> dict[str, str]:
        seen.append(who)
        return {"greeted": who}

    @tickwork_app.task
    async def shout(ctx: Context, who: str) -> str:
        await asyncio.sleep(0)
        return who.upper()

    tickwork_app.submit(greet, args={"who": "ada"})
    tickwork_app.submit(shout, args={"who": "bob"})
    tickwork_app.submit(greet, args={"who": "later"}, delay=timedelta(minutes=5))

    done = tickwork_kit.drain()

    assert [(d.task, d.outcome, d.result) for d in done] == [
        ("greet", "succeeded", {"greeted": "ada"}),
        ("shout", "succeeded", {"value": "BOB"}),
    ]
    assert seen == ["ada"]  # the delayed one is not due yet
    assert tickwork_app.client.get_run(done[0].run_id).state is RunState.SUCCEEDED
    tickwork_kit.advance(minutes=5, drain=True)
    assert seen == ["ada", "later"]


def test_a_retrying_task_is_retried_by_moving_the_clock_until_it_succeeds(
    tickwork_app: App, tickwork_kit: TickworkTestKit, tickwork_clock: FakeClock
) -> None:
    calls: list[int] = []

    @tickwork_app.task(max_attempts=5, backoff=(10, 60))
    def charge(ctx: Context, amount: int) -> None:
        calls.append(ctx.attempt)
        if ctx.attempt == 2:
            raise Retry(after=30, reason="rate limited")
        if ctx.attempt < 3:
            raise ConnectionError("gateway down")

    start = tickwork_clock.now()
    tickwork_app.submit(charge, args={"amount": 5})
    done = tickwork_kit.drain()

    assert [(d.attempt, d.outcome) for d in done] == [
        (1, "failed"),
        (2, "failed"),
        (3, "succeeded"),
    ]
    assert calls == [1, 2, 3]
    assert "ConnectionError: gateway down" in (done[0].error or "")
    assert done[1].error == "rate limited"
    # The first wait is the job's backoff (full jitter up to 10 s), the second the Retry's.
    assert start <= done[1].at <= start + timedelta(seconds=10)
    assert done[2].at == done[1].at + timedelta(seconds=30)
    assert tickwork_app.client.get_run(done[0].run_id).state is RunState.SUCCEEDED


def test_a_task_failing_every_attempt_ends_dead_and_drain_stops(
    tickwork_app: App, tickwork_kit: TickworkTestKit
) -> None:
    @tickwork_app.task(max_attempts=3)
    def broken(ctx: Context) -> None:
        raise ValueError("always")

    tickwork_app.submit(broken)
    done = tickwork_kit.drain()

    assert [d.outcome for d in done] == ["failed", "failed", "dead"]
    assert tickwork_app.client.dead_runs().items[0].id == done[0].run_id
    assert tickwork_kit.drain() == []  # nothing left: dead runs are not retried


def test_drain_without_retries_leaves_the_retry_waiting(
    tickwork_app: App, tickwork_kit: TickworkTestKit
) -> None:
    @tickwork_app.task(max_attempts=2)
    def broken(ctx: Context) -> None:
        raise ValueError("nope")

    tickwork_app.submit(broken)
    [done] = tickwork_kit.drain(retries=False)
    assert done.outcome == "failed"
    assert done.retry_at is not None
    assert tickwork_app.client.get_run(done.run_id).state is RunState.FAILED


def test_a_cron_job_fires_at_the_right_instants_across_both_dst_changes(
    tickwork_app: App, tickwork_kit: TickworkTestKit, tickwork_clock: FakeClock
) -> None:
    @tickwork_app.task
    def nightly(ctx: Context) -> None:
        pass

    tickwork_clock.set(datetime(2030, 3, 29, 12, tzinfo=UTC))
    with pytest.warns(DstWarning, match=r"02:30 .* on 20\d\d-\d\d-\d\d"):  # names each date
        tickwork_app.schedule(nightly, cron="30 2 * * *", tz="Europe/Berlin")
    tickwork_kit.advance(days=3)

    # 02:30 in Berlin: CET (UTC+1), then on 31 March 02:30 does not exist (the clocks jump
    # from 02:00 to 03:00) and the slot fires at the jump, then CEST (UTC+2).
    assert [s.at for s in tickwork_kit.submitted(nightly)] == [
        datetime(2030, 3, 30, 1, 30, tzinfo=UTC),
        datetime(2030, 3, 31, 1, 0, tzinfo=UTC),
        datetime(2030, 4, 1, 0, 30, tzinfo=UTC),
    ]

    tickwork_clock.set(datetime(2030, 10, 26, 12, tzinfo=UTC))
    tickwork_kit.drain()
    before = len(tickwork_kit.submitted(nightly))
    tickwork_kit.advance(days=2)
    # 27 October: 02:30 happens twice (CEST, then CET again); the job runs once.
    autumn = [s.at for s in tickwork_kit.submitted(nightly)][before:]
    assert autumn == [
        datetime(2030, 10, 27, 0, 30, tzinfo=UTC),
        datetime(2030, 10, 28, 1, 30, tzinfo=UTC),
    ]


def test_advance_fires_every_interval_slot_and_an_outage_follows_the_misfire_policy(
    tickwork_app: App, tickwork_kit: TickworkTestKit
) -> None:
    @tickwork_app.task
    def poll(ctx: Context) -> None:
        pass

    tickwork_app.schedule(poll, every=timedelta(minutes=10), name="live")
    runs = tickwork_kit.advance(hours=1)
    assert len(runs) == 6
    tickwork_kit.assert_submitted(poll, count=6)

    tickwork_app.schedule(poll, every=timedelta(minutes=10), name="down", misfire="skip")
    down = tickwork_app.client.list_jobs().items[0]
    start = tickwork_kit.now()
    queued = tickwork_kit.advance(hours=1, outage=True)
    # The scheduler was down for the hour: of the down job's six slots only the last,
    # on time at the end, runs; five are in its slot ledger.
    assert [r.scheduled_for for r in queued if r.job_id == down.id] == [start + timedelta(hours=1)]
    skipped = tickwork_app.client.slot_ledger(down.id)
    assert sum(s.count for s in skipped) == 5


def test_assertions_on_what_was_submitted(
    tickwork_app: App, tickwork_kit: TickworkTestKit, tickwork_clock: FakeClock
) -> None:
    @tickwork_app.task
    def send(ctx: Context, to: str, subject: str = "") -> None:
        pass

    @tickwork_app.task
    def other(ctx: Context) -> None:
        pass

    def signup(email: str) -> None:  # the code under test
        tickwork_app.submit(send, args={"to": email, "subject": "welcome"}, delay=3600)

    signup("ada@example.com")
    later = tickwork_clock.now() + timedelta(hours=1)

    [found] = tickwork_kit.assert_submitted(send, args={"to": "ada@example.com"}, at=later)
    assert (found.state, found.run_id) == ("scheduled", None)
    tickwork_kit.assert_not_submitted(send, args={"to": "bob@example.com"})
    tickwork_kit.assert_not_submitted(other)
    tickwork_kit.assert_not_submitted("send", at=later + timedelta(seconds=1))
    tickwork_kit.assert_submitted(
        "send", at=later + timedelta(seconds=1), within=timedelta(seconds=1)
    )

    with pytest.raises(AssertionError, match=r"found 0; 'send' was submitted 1 times:\n.*ada@"):
        tickwork_kit.assert_submitted(send, args={"to": "bob@example.com"})
    with pytest.raises(AssertionError, match="expected no 'send'"):
        tickwork_kit.assert_not_submitted(send)
    with pytest.raises(AssertionError, match="2 times, found 1"):
        tickwork_kit.assert_submitted(send, count=2)

    tickwork_kit.advance(hours=1)
    [found] = tickwork_kit.submitted(send)
    assert found.state == "queued"
    assert found.run_id is not None


def test_drain_fails_the_test_when_a_task_resubmits_itself_for_ever(
    tickwork_app: App, tickwork_kit: TickworkTestKit
) -> None:
    @tickwork_app.task
    def again(ctx: Context) -> None:
        tickwork_app.submit(again)

    tickwork_app.submit(again)
    with pytest.raises(AssertionError, match="drain ran 5 attempts and more are due"):
        tickwork_kit.drain(limit=5)


def test_the_kit_refuses_to_share_a_store_with_a_leading_scheduler(
    tickwork_app: App, tickwork_kit: TickworkTestKit, tickwork_clock: FakeClock
) -> None:
    tickwork_app.store.acquire_leadership("elsewhere", timedelta(hours=1), now=tickwork_clock.now())
    with pytest.raises(AssertionError, match="another scheduler leads this store"):
        tickwork_kit.drain()


def test_the_docs_dst_example_runs_each_slot_at_its_time_with_drain(
    tickwork_app: App, tickwork_kit: TickworkTestKit, tickwork_clock: FakeClock
) -> None:
    sent: list[tuple[datetime, datetime]] = []

    @tickwork_app.task
    def nightly_report(ctx: Context) -> None:
        sent.append((ctx.scheduled_for, tickwork_clock.now()))

    tickwork_clock.set(datetime(2030, 3, 29, 12, tzinfo=UTC))
    with pytest.warns(DstWarning, match=r"02:30 .* on 20\d\d-\d\d-\d\d"):  # names each date
        tickwork_app.schedule(nightly_report, cron="30 2 * * *", tz="Europe/Berlin")
    tickwork_kit.advance(days=3, drain=True)

    slots = [
        datetime(2030, 3, 30, 1, 30, tzinfo=UTC),
        datetime(2030, 3, 31, 1, 0, tzinfo=UTC),
        datetime(2030, 4, 1, 0, 30, tzinfo=UTC),
    ]
    assert sent == [(slot, slot) for slot in slots]  # each ran at its own slot, not at the end
    tickwork_kit.assert_submitted(nightly_report, count=3)


def test_advance_applies_the_overlap_policy_slot_by_slot(
    tickwork_app: App, tickwork_kit: TickworkTestKit
) -> None:
    @tickwork_app.task
    def sync_feed(ctx: Context) -> None:
        pass

    job = tickwork_app.schedule(sync_feed, every=timedelta(minutes=10), overlap="forbid")
    tickwork_kit.advance(hours=1)  # no worker: the first run is still queued at every slot

    [queued] = tickwork_kit.submitted(sync_feed)
    assert queued.state == "queued"
    fates = [(s.fate.value, s.count) for s in tickwork_app.client.slot_ledger(job.id)]
    assert sum(count for _, count in fates) == 5
    assert {fate for fate, _ in fates} == {"overlap"}  # skipped on time, not as misfires

    tickwork_kit.advance(minutes=10, drain=True)
    assert [s.state for s in tickwork_kit.submitted(sync_feed)] == ["succeeded", "succeeded"]


# -- ctx.transaction() and perform -----------------------------------------------------------


def test_a_handlers_transaction_commits_its_write_with_the_completion_and_rolls_back_with_it(
    tickwork_app: App, tickwork_kit: TickworkTestKit, tickwork_clock: FakeClock
) -> None:
    table = ledger.Ledger(tickwork_app.config.db_url)
    seen: list[tuple[str, list[tuple[int, int]]]] = []

    @tickwork_app.task(max_attempts=2)
    def pay(ctx: Context) -> None:
        with ctx.transaction() as conn:
            ledger.insert(conn, ctx.run_id, ctx.attempt)
            # Inside the block the run is still running and the row not yet visible.
            seen.append((tickwork_app.client.get_run(ctx.run_id).state.value, table.rows()))
            if ctx.attempt == 1:
                raise RuntimeError("card declined")

    tickwork_app.submit(pay)
    first, second = tickwork_kit.drain()

    assert first.outcome == "failed"
    assert "RuntimeError: card declined" in (first.error or "")
    run = tickwork_app.client.get_run(second.run_id)
    assert (second.attempt, second.outcome) == (2, "succeeded")
    assert run.state is RunState.SUCCEEDED
    # The first attempt's write rolled back with its failure; the second's landed with the
    # completion, at the kit's time (as its other writes).
    assert table.rows() == [(run.id, 2)]
    assert run.finished_at == tickwork_clock.now()
    # Inside each block the run was still running and no row of it visible to others.
    assert seen == [("running", []), ("running", [])]


def test_a_run_cancelled_during_its_transaction_lands_neither_write_nor_completion(
    tickwork_app: App, tickwork_kit: TickworkTestKit, backend: str
) -> None:
    if backend == "sqlite":
        pytest.skip("SQLite's block holds the write lock: no other session can cancel meanwhile")
    table = ledger.Ledger(tickwork_app.config.db_url)

    @tickwork_app.task
    def pay(ctx: Context) -> None:
        with ctx.transaction() as conn:
            ledger.insert(conn, ctx.run_id, 1)
            tickwork_app.client.cancel_run(ctx.run_id)  # another session takes the run

    tickwork_app.submit(pay)
    [done] = tickwork_kit.drain()

    assert done.outcome == "lost"
    assert "LeaseLost" in (done.error or "")
    assert table.rows() == []
    assert tickwork_app.client.get_run(done.run_id).state is RunState.CANCELLED


def test_an_async_handlers_transaction_in_a_thread_completes_the_run(
    tickwork_app: App, tickwork_kit: TickworkTestKit
) -> None:
    table = ledger.Ledger(tickwork_app.config.db_url)

    @tickwork_app.task
    async def pay(ctx: Context) -> str:
        def write() -> None:
            with ctx.transaction() as conn:
                ledger.insert(conn, ctx.run_id, 7)

        await asyncio.to_thread(write)
        return "not recorded: the run succeeded in its transaction"

    tickwork_app.submit(pay)
    [done] = tickwork_kit.drain()

    assert (done.outcome, done.result) == ("succeeded", None)
    assert table.rows() == [(done.run_id, 7)]
    assert tickwork_app.client.get_run(done.run_id).result is None


def test_perform_calls_one_handler_with_a_context_and_submits_nothing(
    tickwork_app: App, tickwork_kit: TickworkTestKit, tickwork_clock: FakeClock
) -> None:
    @tickwork_app.task(max_attempts=4, queue="mail")
    def send(ctx: Context, to: str, cc: list[str]) -> dict[str, object]:
        return {
            "to": to,
            "cc": cc,
            "attempt": ctx.attempt,
            "of": ctx.max_attempts,
            "queue": ctx.queue,
            "tenant": ctx.tenant,
            "run": ctx.run_id,
        }

    done = tickwork_kit.perform(
        send, {"to": "ada@example.com", "cc": ("bob",)}, attempt=2, tenant="acme", run_id=41
    )

    assert done.outcome == "succeeded"
    assert done.result == {
        "to": "ada@example.com",
        "cc": ["bob"],
        "attempt": 2,
        "of": 4,
        "queue": "mail",
        "tenant": "acme",
        "run": 41,
    }
    assert (done.at, done.scheduled_for) == (tickwork_clock.now(), tickwork_clock.now())
    assert tickwork_app.client.list_jobs().items == []
    assert tickwork_app.client.list_runs().items == []
    assert tickwork_kit.executed == []


def test_perform_says_what_a_failure_would_become(
    tickwork_app: App, tickwork_kit: TickworkTestKit
) -> None:
    @tickwork_app.task(max_attempts=3)
    def charge(ctx: Context, order: int) -> None:
        if order == 1:
            raise Retry(after=30, reason="rate limited")
        if order == 2:
            raise Discard("no such order")
        raise ConnectionError("gateway down")

    retried = tickwork_kit.perform(charge, {"order": 1})
    assert (retried.outcome, retried.retry_after) == ("failed", timedelta(seconds=30))
    assert retried.error == "rate limited"
    assert tickwork_kit.perform(charge, {"order": 2}).outcome == "dead"
    assert tickwork_kit.perform("charge", {"order": 3}, attempt=2).outcome == "failed"
    last = tickwork_kit.perform(charge, {"order": 3}, attempt=3)
    assert last.outcome == "dead"
    assert "ConnectionError: gateway down" in (last.error or "")


def test_perform_refuses_what_a_submit_would(
    tickwork_app: App, tickwork_kit: TickworkTestKit
) -> None:
    @tickwork_app.task
    def send(ctx: Context, to: str) -> None:
        pass

    with pytest.raises(InvalidArgs, match="unexpected keyword argument 'too'"):
        tickwork_kit.perform(send, {"to": "x", "too": "y"})
    with pytest.raises(InvalidArgs, match="not JSON-serialisable"):
        tickwork_kit.perform(send, {"to": object()})
    with pytest.raises(UnknownTask, match="'nope'"):
        tickwork_kit.perform("nope")


def test_a_performed_handlers_transaction_commits_its_write_or_rolls_it_back(
    tickwork_app: App, tickwork_kit: TickworkTestKit
) -> None:
    table = ledger.Ledger(tickwork_app.config.db_url)

    @tickwork_app.task
    def pay(ctx: Context, amount: int) -> None:
        with ctx.transaction() as conn:
            ledger.insert(conn, ctx.run_id, amount)
            if amount < 0:
                raise ValueError("negative")

    assert tickwork_kit.perform(pay, {"amount": 5}, run_id=9).outcome == "succeeded"
    assert tickwork_kit.perform(pay, {"amount": -1}, run_id=10).outcome == "failed"
    assert table.rows() == [(9, 5)]


def test_a_page_walks_its_items(tickwork_app: App, tickwork_kit: TickworkTestKit) -> None:
    @tickwork_app.task(max_attempts=1)
    def broken(ctx: Context) -> None:
        raise ValueError("always")

    tickwork_app.submit(broken)
    [done] = tickwork_kit.drain()

    dead = tickwork_app.client.dead_runs()
    assert [run.id for run in dead] == [done.run_id]
    assert len(dead) == 1
