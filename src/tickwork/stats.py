"""Percentiles, one rule for every figure tickwork reports: the dashboard's lag, ``tickwork
bench``, the benchmarks and the chaos checker.

Nearest rank, no interpolation, so every figure is a value that was measured: the smallest
value with at least ``percent`` % of the sample at or below it, ``sorted(values)[ceil(percent
/ 100 * n) - 1]``. Of 4 values p50 is the 2nd; of 150, p99 is the 149th; below 100 values
p99 is the largest.
"""

from __future__ import annotations

import bisect
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


# -- lag histograms (the per-minute rollup) --------------------------------------------------

LAG_BUCKET_RATIO = 1.1
"""Each bucket of a lag histogram is 10 % wider than the one below: bucket 0 holds lags
under 1 ms, bucket ``i`` lags in [1.1**(i-1), 1.1**i) ms. A day of lag is bucket 193, so a
histogram stays a few dozen entries, and a percentile read from it (its bucket's upper
edge) is at most 10 % above the measured value."""


def lag_bucket(ms: float) -> int:
    """The histogram bucket of a start lag of ``ms`` milliseconds (a negative lag, a run
    started a hair before its slot by the store's clock, counts as 0)."""
    if ms < 1:
        return 0
    return math.floor(math.log(ms) / math.log(LAG_BUCKET_RATIO)) + 1


def bucket_percentile(histogram: dict[int, int], percent: float) -> float | None:
    """The nearest-rank ``percent`` percentile of a lag histogram ({bucket: count}), as
    the upper edge of the bucket that holds it, in ms; None for an empty histogram."""
    if not 0 <= percent <= 100:
        raise ValueError(f"percent must be from 0 to 100, got {percent!r}")
    total = sum(histogram.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(percent * total / 100))
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return float(LAG_BUCKET_RATIO**bucket)
    raise AssertionError("unreachable: the ranks add up to the total")


# -- cumulative histograms (/metrics) --------------------------------------------------------

LAG_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Seconds: the upper bounds of the start lag histograms' buckets (5 ms to 5 min, then
+Inf). Start lag is milliseconds when all is well: the low buckets are fine."""
DURATION_BOUNDS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
    3600.0,
)  # fmt: skip
"""Seconds: the upper bounds of the execution duration histogram's buckets (5 ms to an
hour, then +Inf)."""


def bound_of(seconds: float, bounds: tuple[float, ...]) -> float:
    """The upper bound of the bucket that holds ``seconds`` (``inf`` past the last)."""
    i = bisect.bisect_left(bounds, seconds)
    return bounds[i] if i < len(bounds) else math.inf
