"""Retry policy: exponential backoff with a cap and full jitter.

Attempt n (1-based) failed; the retry waits a random time in ``[0, min(cap, base * 2**(n-1))]``
("full jitter", as in the AWS architecture blog's analysis: it spreads a thundering herd of
failures evenly). With the defaults (base 1 s, cap 300 s) the upper bounds are::

    after attempt 1: up to   1 s        after attempt 6: up to  32 s
    after attempt 2: up to   2 s        after attempt 8: up to 128 s
    after attempt 3: up to   4 s        after attempt 9: up to 256 s
    after attempt 4: up to   8 s        after attempt 10 and later: up to 300 s (the cap)

and the mean wait is half the bound. ``max_attempts=3`` (the default) means one first try
and two retries; the third failure makes the run ``dead``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import timedelta

from tickwork.errors import ValidationError

DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_BACKOFF_BASE = 1.0
"""Seconds: the bound on the wait after the first failed attempt."""
DEFAULT_BACKOFF_CAP = 300.0
"""Seconds: no wait is ever drawn from a range wider than this."""
MAX_ATTEMPTS_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff_base: float = DEFAULT_BACKOFF_BASE
    backoff_cap: float = DEFAULT_BACKOFF_CAP

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or isinstance(self.max_attempts, bool):
            raise ValidationError(
                f"max_attempts must be an integer, got {self.max_attempts!r}", field="max_attempts"
            )
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS_LIMIT:
            raise ValidationError(
                f"max_attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}, got {self.max_attempts}",
                field="max_attempts",
            )
        if not (math.isfinite(self.backoff_base) and math.isfinite(self.backoff_cap)):
            raise ValidationError("backoff must be a finite number of seconds", field="backoff")
        if self.backoff_base < 0 or self.backoff_cap < 0:
            raise ValidationError("backoff must not be negative", field="backoff")
        if self.backoff_cap < self.backoff_base:
            raise ValidationError(
                f"backoff cap {self.backoff_cap:g} s is below its base {self.backoff_base:g} s",
                field="backoff",
            )

    def bound(self, attempt: int) -> float:
        """The widest wait (seconds) after attempt ``attempt`` (1-based) failed."""
        exponent = min(max(attempt, 1) - 1, 64)
        return min(self.backoff_cap, self.backoff_base * 2.0**exponent)

    def backoff(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        """A full-jitter wait after attempt ``attempt`` failed."""
        draw = (rng or _RNG).uniform(0.0, self.bound(attempt))
        return timedelta(seconds=draw)

    def exhausted(self, attempt: int) -> bool:
        """Whether attempt ``attempt`` was the last one allowed."""
        return attempt >= self.max_attempts


_RNG = random.Random()
