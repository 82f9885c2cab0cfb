"""Which candidate runs a claim may take under tenants' ``max_running``, decided in
Python, identically for every store.

A store's limited claim path holds its limited tenants (PostgreSQL: their rows locked
``FOR UPDATE``; SQLite: the write lock), counts their running runs, and hands
:func:`pick_within_limits` a way to fetch candidates in claim order. A tenant that fills
up is added to ``full`` and the store fetches again without it, so a throttled tenant
never holds back another's runs: the batch fills from the tenants with room.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Candidates = Callable[[list[int], list[str], int], Sequence[tuple[int, str]]]
"""``(taken, full, want) -> [(run_id, tenant), ...]``: up to ``want`` claimable runs in
claim order, none in ``taken`` and none of a tenant in ``full``."""


def pick_within_limits(candidates: Candidates, room: dict[str, int], limit: int) -> list[int]:
    """The ids of up to ``limit`` runs to claim, in claim order. ``room`` maps each limited
    tenant to how many more of its runs may run now (its ``max_running`` less its running
    runs); a tenant not in it is unlimited. Fetches at most once more than there are
    limited tenants that fill up."""
    taken: list[int] = []
    left = dict(room)
    full = sorted(t for t, n in left.items() if n <= 0)
    while len(taken) < limit:
        want = limit - len(taken)
        rows = candidates(list(taken), list(full), want)
        refused = False
        for run_id, tenant in rows:
            n = left.get(tenant)
            if n is None:
                taken.append(run_id)
            elif n > 0:
                taken.append(run_id)
                left[tenant] = n - 1
                if n == 1:
                    full.append(tenant)
            else:
                refused = True
        if len(rows) < want or not refused:
            break
    return taken
