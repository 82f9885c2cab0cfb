"""Which candidate runs a claim may take under tenants' and tasks' limits, and in which
order tenants share a claim: the rules, in Python, written once (:func:`claim_fairly`).

SQLite's limited claim runs them as they are: under the write lock it counts the limited
tenants' and tasks' running runs, walks the tenants and hands :func:`claim_fairly` a way
to read each one's runs in claim order. PostgreSQL's runs the same rules as one statement
(``claim_limited`` in its queries.sql, which names the function each step follows), so a
claim is one round trip. tests/store/test_fair_share_oracle.py holds both to
:func:`claim_fairly` as the oracle, on random tenants, weights, limits, rates and runs;
the tenants' statuses (``TenantStatus.starts``) use :func:`refill_all`.

A tenant's ``rate`` is a token bucket kept in its row (tokens, refilled_at by the store's
clock), and a task's the same way: the claim refills it (:func:`refill`), gives the tenant
(or task) room for as many runs as whole tokens, and spends one token per run it claims,
all while it holds the row, so every worker on every host draws on one bucket and the rate
is never exceeded.

Fair share (:func:`claim_fairly`): when runs of more than one tenant are claimable, a claim
walks the tenants in name order from where this claimer's last claim stopped (a cursor,
round-robin) and reads each one's first runs in claim order; it then interleaves them by
weighted rank, ``rank / weight`` (start-time fair queuing with a per-claim virtual clock):
with weights 1 and 3, the batch goes A B B B A B B B ... Each claim costs one index probe
per tenant visited, at most a batch's worth, however many tenants have runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from tickwork.records import bucket_size

TENANT = "tenant"
TASK = "task"
Key = tuple[str, str]
"""What a limit is on: ``(TENANT, name)`` or ``(TASK, name)``."""


def names(keys: Sequence[Key], kind: str) -> list[str]:
    """The names of the ``kind`` (TENANT or TASK) among ``keys``."""
    return [name for k, name in keys if k == kind]


def refill(
    tokens: float | None,
    refilled_at: datetime | None,
    rate: float,
    bucket: int,
    now: datetime,
) -> float:
    """A token bucket's tokens at ``now``: ``tokens`` at ``refilled_at`` plus ``rate`` a
    second since, capped at ``bucket``; a bucket never refilled (None) is full. A clock
    that stepped back adds nothing. Rate 20/s, bucket 20, 3.5 tokens at t: 13.5 at t+0.5 s,
    20 at t+2 s."""
    if tokens is None or refilled_at is None:
        return float(bucket)
    elapsed = max(0.0, (now - refilled_at).total_seconds())
    return min(float(bucket), tokens + rate * elapsed)


Bucket = tuple[float, datetime]
"""A token bucket: its tokens at a time."""
BucketRow = tuple[str, float | None, int | None, float | None, datetime | None]
"""A tenant's or a task's ``(name, rate, burst, tokens, refilled_at)`` as its row keeps
them."""


def refill_all(rows: Sequence[BucketRow], now: datetime | None) -> dict[str, Bucket]:
    """The buckets of the tenants (or tasks) among ``rows`` with a rate, refilled to
    ``now``, by name. The time a bucket is written back never moves back (two claimers'
    clocks: one database, but transactions that began in another order than they took
    the row)."""
    found: dict[str, Bucket] = {}
    for name, rate, burst, tokens, refilled_at in rows:
        bucket = bucket_size(rate, burst)
        if rate is None or bucket is None or now is None:
            continue
        at = max(now, refilled_at) if refilled_at is not None else now
        found[name] = (refill(tokens, refilled_at, rate, bucket, now), at)
    return found


def spend(buckets: dict[str, Bucket], tenants: Sequence[str]) -> dict[str, Bucket]:
    """The buckets to write back after a claim started a run of each of ``tenants`` (one
    entry per run; or of tasks, with their buckets): a token each, for those with a
    bucket."""
    spent: dict[str, int] = {}
    for tenant in tenants:
        if tenant in buckets:
            spent[tenant] = spent.get(tenant, 0) + 1
    return {t: (buckets[t][0] - n, buckets[t][1]) for t, n in spent.items()}


def whole(tokens: float) -> int:
    """How many runs ``tokens`` let start (a float's 2.9999999 is 3)."""
    return max(0, math.floor(tokens + 1e-9))


def share(limit: int, weight: float, weights: float, *, walk_full: bool) -> int:
    """How many of its runs a claim reads for a tenant of ``weight`` among visited tenants
    whose weights sum to ``weights``: twice its share of the batch (so a tenant with few
    runs leaves room the others fill), at least 1, at most the batch. Once the walk is full
    (a batch's worth of tenants, each with a due run), its share once: at least 1 each of
    ``limit`` tenants fills the batch, so reading twice as many runs (and locking them)
    would buy nothing."""
    factor = 1 if walk_full else 2
    return max(1, min(limit, math.ceil(factor * limit * weight / weights)))


Run = tuple[int, str, str, tuple[int, Any, int]]
"""A claimable run as fair share sees it: ``(run_id, tenant, task, order)``, ``order`` its
place in claim order, ``(-priority, run_at, id)``."""
Read = Callable[[str, int, "str | None"], Sequence[Run]]
"""``(tenant, k, task) -> runs``: up to ``k`` of ``tenant``'s claimable runs in claim order,
of ``task``, or (None) of every task without a limit."""


def walk(tenants: Iterable[str], after: str, n: int) -> list[str]:
    """Fair share's walk: up to ``n`` of ``tenants`` (those with claimable runs) in name
    order from just past ``after`` round to it again."""
    ordered = sorted(set(tenants))
    return ([t for t in ordered if t > after] + [t for t in ordered if t <= after])[:n]


def claim_fairly(
    walked: Sequence[tuple[str, float]],
    room: dict[Key, int],
    read: Read,
    *,
    limit: int,
    limited_tasks: Iterable[str],
) -> list[tuple[int, str, int]]:
    """The limited claim's picks, as both stores make them: up to ``limit`` runs as
    ``(run_id, tenant, walk position)``, in the order fair share takes them.

    ``walked``: the walk's tenants and weights, in walk order (:func:`walk`, a batch's worth
    of tenants). ``room``: how many more runs each limited tenant and task may start now
    (its ``max_running`` less its running runs, no more than its whole tokens); a tenant
    not in it is unlimited, and so is a task not in ``limited_tasks`` (one in it but not in
    ``room`` has none: another claimer holds it).

    1. Each walked tenant with room reads ``k`` runs, its :func:`share` of the batch (no
       more than its room): its first in claim order, of tasks without a limit and of each
       limited task with room, no more than that room of each (``read``, a store's index
       probes, or the oracle's list).
    2. They are interleaved by weighted rank, ``rank / weight``, then walk position.
    3. In that order a run is taken while its tenant and its task have room, up to
       ``limit``.

    One pass, no read again: PostgreSQL's ``claim_limited`` is this as one statement,
    SQLite's claim calls this with its reads. tests/store/test_fair_share_oracle.py holds
    both to it, ``read`` over a list, on random tenants, limits and runs."""
    limited = sorted(set(limited_tasks))
    open_ = [
        (n, tenant, weight)
        for n, (tenant, weight) in enumerate(walked, 1)
        if room.get((TENANT, tenant), limit) > 0
    ]
    weights = sum(weight for _, _, weight in open_)
    rows: list[tuple[float, int, int, str, str]] = []
    for n, tenant, weight in open_:
        k = min(
            room.get((TENANT, tenant), limit),
            share(limit, weight, weights, walk_full=len(open_) >= limit),
        )
        runs = list(read(tenant, k, None))
        for task in limited:
            if room.get((TASK, task), 0) > 0:
                runs += read(tenant, min(k, room[TASK, task]), task)
        runs.sort(key=lambda r: r[3])
        rows += [(rank / weight, n, r[0], tenant, r[2]) for rank, r in enumerate(runs[:k])]
    rows.sort(key=lambda r: (r[0], r[1]))
    left = dict(room)
    for task in limited:
        left.setdefault((TASK, task), 0)
    taken: list[tuple[int, str, int]] = []
    for _, n, run_id, tenant, task in rows:
        if len(taken) == limit:
            break
        keys = [key for key in ((TENANT, tenant), (TASK, task)) if key in left]
        if any(left[key] <= 0 for key in keys):
            continue
        for key in keys:
            left[key] -= 1
        taken.append((run_id, tenant, n))
    return taken


def cursor(walked: Sequence[str], taken: Sequence[tuple[int, str, int]], after: str) -> str:
    """Where the next claim walks on from (round-robin): the tenant of the run taken last in
    the walk, or with none taken, past every tenant walked (all full); with none walked,
    where it was."""
    if taken:
        return max(taken, key=lambda t: t[2])[1]
    return walked[-1] if walked else after
