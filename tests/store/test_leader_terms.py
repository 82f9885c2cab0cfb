"""Conformance: the history of leadership terms, written when the lease is taken at a new
epoch, closed when the next term starts, read by ``explain``, pruned by retention."""

from __future__ import annotations

from datetime import datetime, timedelta

from tickwork.store import Store
from tickwork.store.base import KEEP_LEADER_TERMS, LeaderTerm

TTL = timedelta(seconds=10)
S = timedelta(seconds=1)
EVER = timedelta(days=3650)


def test_a_takeover_after_a_lapse_records_both_terms_and_the_gap(
    store: Store, t0: datetime
) -> None:
    first = store.acquire_leadership("a", TTL, now=t0)
    assert first is not None
    store.renew_leadership("a", first.epoch, TTL, now=t0 + 5 * S)  # expires at t0 + 15 s
    second = store.acquire_leadership("b", TTL, now=t0 + 20 * S)
    assert second is not None

    terms = store.leader_terms(since=t0 - EVER, until=t0 + 30 * S, now=t0 + 21 * S)

    assert terms == [
        LeaderTerm(first.epoch, "a", t0, t0 + 15 * S),
        LeaderTerm(second.epoch, "b", t0 + 20 * S, None),
    ]


def test_renewals_and_a_holders_reacquire_write_no_new_term(store: Store, t0: datetime) -> None:
    lease = store.acquire_leadership("a", TTL, now=t0)
    assert lease is not None
    store.renew_leadership("a", lease.epoch, TTL, now=t0 + 2 * S)
    again = store.acquire_leadership("a", TTL, now=t0 + 4 * S)
    assert again is not None
    assert again.epoch == lease.epoch

    terms = store.leader_terms(since=t0 - EVER, until=t0 + 5 * S, now=t0 + 5 * S)

    assert terms == [LeaderTerm(lease.epoch, "a", t0, None)]


def test_a_lapsed_term_ends_at_its_lease_expiry_before_anyone_takes_over(
    store: Store, t0: datetime
) -> None:
    lease = store.acquire_leadership("a", TTL, now=t0)
    assert lease is not None

    terms = store.leader_terms(since=t0, until=t0 + 60 * S, now=t0 + 60 * S)

    assert terms == [LeaderTerm(lease.epoch, "a", t0, t0 + TTL)]


def test_a_resigned_term_ends_when_it_was_given_up(store: Store) -> None:
    now = store.now()
    lease = store.acquire_leadership("a", TTL)
    assert lease is not None
    store.resign_leadership("a", lease.epoch)
    after = store.now()
    taken = store.acquire_leadership("b", TTL)
    assert taken is not None

    terms = store.leader_terms(since=now - EVER, until=after + TTL)

    assert [(t.epoch, t.holder) for t in terms] == [(lease.epoch, "a"), (taken.epoch, "b")]
    ended = terms[0].ended_at
    assert ended is not None
    assert now <= ended <= after


def test_terms_are_read_from_the_one_started_before_the_window(store: Store, t0: datetime) -> None:
    epochs = []
    for k in range(4):  # terms of 10 s, each after a 20 s gap
        lease = store.acquire_leadership(f"n{k}", TTL, now=t0 + k * 30 * S)
        assert lease is not None
        epochs.append(lease.epoch)

    terms = store.leader_terms(since=t0 + 35 * S, until=t0 + 65 * S, now=t0 + 100 * S)

    assert [t.epoch for t in terms] == epochs[1:3]


def test_prune_deletes_terms_past_retention_but_keeps_the_latest(
    store: Store, t0: datetime
) -> None:
    count = KEEP_LEADER_TERMS + 3
    for k in range(count):
        assert store.acquire_leadership(f"n{k % 2}", TTL, now=t0 + k * 20 * S) is not None
    end = t0 + count * 20 * S

    store.prune(timedelta(hours=1), now=end + timedelta(minutes=30))
    assert len(store.leader_terms(since=t0 - EVER, until=end, now=end)) == count

    store.prune(timedelta(hours=1), now=end + timedelta(days=2))
    kept = store.leader_terms(since=t0 - EVER, until=end, now=end)
    assert len(kept) == KEEP_LEADER_TERMS
    assert kept[-1].holder == f"n{(count - 1) % 2}"
