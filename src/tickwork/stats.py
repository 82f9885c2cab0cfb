"""Percentiles, one rule for every figure tickwork reports: the dashboard's lag, ``tickwork
bench``, the benchmarks and the chaos checker.

Nearest rank, no interpolation, so every figure is a value that was measured: the smallest
value with at least ``percent`` % of the sample at or below it, ``sorted(values)[ceil(percent
/ 100 * n) - 1]``. Of 4 values p50 is the 2nd; of 150, p99 is the 149th; below 100 values
p99 is the largest.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], percent: float) -> float | None:
    """The nearest-rank ``percent`` percentile (0 to 100) of ``values``; None for none."""
    if not 0 <= percent <= 100:
        raise ValueError(f"percent must be from 0 to 100, got {percent!r}")
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(percent * len(ordered) / 100))
    return ordered[rank - 1]
