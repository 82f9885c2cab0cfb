"""Which candidate runs a claim may take under tenants' and tasks' limits, and in which
order tenants share a claim: the rules, in Python.

SQLite's limited claim runs them as they are: under the write lock it counts the limited
tenants' and tasks' running runs, and hands :func:`pick_within_limits` a way to fetch
candidates in claim order. A tenant or task that fills up is added to ``full`` and the
store fetches again without it, so a throttled tenant never holds back another's runs:
the batch fills from those with room. PostgreSQL's runs the same rules as one statement
(``claim_limited`` in its queries.sql, which names the function each step follows), so a
claim is one round trip; the conformance tests (tests/store/test_tenants.py) hold both to
the same figures. The tenants' statuses (``TenantStatus.starts``) use :func:`refill_all`.

A tenant's ``rate`` is a token bucket kept in its row (tokens, refilled_at by the store's
clock), and a task's the same way: the claim refills it (:func:`refill`), gives the tenant
(or task) room for as many runs as whole tokens, and spends one token per run it claims,
all while it holds the row, so every worker on every host draws on one bucket and the rate
is never exceeded.

Fair share (:func:`fair_order`): when runs of more than one tenant are claimable, a claim
walks the tenants in name order from where this claimer's last claim stopped (a cursor,
round-robin) and reads each one's first runs in claim order; it then interleaves them by
weighted rank, ``rank / weight`` (start-time fair queuing with a per-claim virtual clock):
with weights 1 and 3, the batch goes A B B B A B B B ... Each claim costs one index probe
per tenant visited, at most a batch's worth, however many tenants have runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime

from tickwork.records import bucket_size

TENANT = "tenant"
TASK = "task"
Key = tuple[str, str]
"""What a limit is on: ``(TENANT, name)`` or ``(TASK, name)``."""
Candidates = Callable[[list[int], list[Key], int], Sequence[tuple[int, str, str]]]
"""``(taken, full, want) -> [(run_id, tenant, task), ...]``: up to ``want`` claimable
runs in claim order, none in ``taken`` and none of a tenant or task in ``full``."""


def pick_within_limits(candidates: Candidates, room: dict[Key, int], limit: int) -> list[int]:
    """The ids of up to ``limit`` runs to claim, in claim order. ``room`` maps each limited
    tenant and task to how many more of its runs may run now (its ``max_running`` less its
    running runs); one not in it is unlimited. A run is taken only if both its tenant and
    its task have room. Fetches at most once more than there are limits that fill up."""
    taken: list[int] = []
    left = dict(room)
    full = sorted(k for k, n in left.items() if n <= 0)
    while len(taken) < limit:
        want = limit - len(taken)
        rows = candidates(list(taken), list(full), want)
        refused = False
        for run_id, tenant, task in rows:
            keys = [k for k in ((TENANT, tenant), (TASK, task)) if k in left]
            if any(left[k] <= 0 for k in keys):
                refused = True
                continue
            taken.append(run_id)
            for k in keys:
                left[k] -= 1
                if left[k] == 0:
                    full.append(k)
        if len(rows) < want or not refused:
            break
    return taken


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


FairRow = tuple[int, str, str, int, int, float]
"""``(run_id, tenant, task, walk position, rank in its tenant (0 first), weight)``."""


def share(limit: int, weight: float, weights: float, *, walk_full: bool) -> int:
    """How many of its runs a claim reads for a tenant of ``weight`` among visited tenants
    whose weights sum to ``weights``: twice its share of the batch (so a tenant with few
    runs leaves room the others fill), at least 1, at most the batch. Once the walk is full
    (a batch's worth of tenants, each with a due run), its share once: at least 1 each of
    ``limit`` tenants fills the batch, so reading twice as many runs (and locking them)
    would buy nothing."""
    factor = 1 if walk_full else 2
    return max(1, min(limit, math.ceil(factor * limit * weight / weights)))


def fair_order(rows: Sequence[FairRow], limit: int) -> list[tuple[int, str, str]]:
    """Up to ``limit`` of ``rows`` interleaved by weighted rank, ``rank / weight``, then by
    the tenant's position in the walk."""
    ordered = sorted(rows, key=lambda r: (r[4] / r[5], r[3], r[4]))
    return [(r[0], r[1], r[2]) for r in ordered[:limit]]
