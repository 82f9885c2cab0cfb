"""The budget of one search for slots, in steps (:mod:`tickwork.search` says what a step
is). Here, apart from the search, since the search (:mod:`tickwork.search`) and the fire
times it walks (:mod:`tickwork.cron`) both spend it, and the search reads cron's."""

from __future__ import annotations

from datetime import date

SEARCH_BUDGET = 10_000
"""Steps one search for slots may take: each candidate day, month, day stepped over to find
a business day, or fire time examined is one. The 29th of February on a business day,
eight years ahead, takes 11; a rule the weekend rules out is told in none; a search that
spends them all takes 10 ms (days) to 0.2 s (fire times of a DST policy) of CPU here
(``benchmarks/slot_search.py``). What needs most is an every-second rule in a repeated
hour: 3,600 for the hour's second pass."""


class Exhausted(Exception):
    """A search spent its budget (control flow inside :mod:`tickwork.search` and
    :mod:`tickwork.cron`, caught at the edge of every search)."""


class Budget:
    """What one search may still spend (``left`` steps), shared by everything that search
    does; ``reached`` is how far (a local date) it got."""

    __slots__ = ("left", "reached", "spent")

    def __init__(self, steps: int | None = None) -> None:
        self.left = SEARCH_BUDGET if steps is None else steps
        self.spent = 0
        self.reached: date | None = None

    def spend(self, steps: int = 1) -> None:
        """Spend ``steps``; Exhausted once more was spent than there was."""
        self.spent += steps
        self.left -= steps
        if self.left < 0:
            raise Exhausted

    @property
    def exhausted(self) -> bool:
        return self.left < 0
