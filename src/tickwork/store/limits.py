"""Which candidate runs a claim may take under tenants' and tasks' ``max_running``,
decided in Python, identically for every store.

A store's limited claim path holds its limited tenants and tasks (PostgreSQL: their rows
locked ``FOR UPDATE``; SQLite: the write lock), counts their running runs, and hands
:func:`pick_within_limits` a way to fetch candidates in claim order. A tenant or task
that fills up is added to ``full`` and the store fetches again without it, so a
throttled tenant never holds back another's runs: the batch fills from those with room.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
