"""Retry policy: the docstring's worked numbers, full jitter, exhaustion, validation."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.errors import ValidationError
from tickwork.retry import RetryPolicy


@pytest.mark.parametrize(
    ("attempt", "bound"),
    [(1, 1), (2, 2), (3, 4), (4, 8), (6, 32), (8, 128), (9, 256), (10, 300), (11, 300)],
)
def test_default_bounds_are_the_docstring_numbers(attempt: int, bound: float) -> None:
    assert RetryPolicy().bound(attempt) == bound


def test_bound_stays_at_the_cap_for_huge_attempt_numbers() -> None:
    assert RetryPolicy(max_attempts=1000).bound(1000) == 300
    assert RetryPolicy().bound(10**9) == 300


def test_bound_of_a_custom_policy_doubles_from_its_base_up_to_its_cap() -> None:
    policy = RetryPolicy(backoff_base=5, backoff_cap=60)
    assert [policy.bound(n) for n in range(1, 7)] == [5, 10, 20, 40, 60, 60]


@settings(deadline=None)
@given(
    attempt=st.integers(min_value=1, max_value=2000),
    base=st.floats(min_value=0, max_value=100),
    extra=st.floats(min_value=0, max_value=10_000),
    seed=st.integers(),
)
def test_jittered_wait_is_between_zero_and_the_bound(
    attempt: int, base: float, extra: float, seed: int
) -> None:
    policy = RetryPolicy(backoff_base=base, backoff_cap=base + extra)
    wait = policy.backoff(attempt, random.Random(seed))
    assert timedelta(0) <= wait <= timedelta(seconds=policy.bound(attempt))


def test_jitter_is_full_spreading_waits_over_the_whole_range() -> None:
    rng = random.Random(20260329)
    waits = [RetryPolicy().backoff(10, rng).total_seconds() for _ in range(10_000)]
    assert min(waits) < 10
    assert max(waits) > 290
    assert 140 < sum(waits) / len(waits) < 160  # the mean is half the 300 s bound


def test_zero_backoff_retries_at_once() -> None:
    assert RetryPolicy(backoff_base=0, backoff_cap=0).backoff(5) == timedelta(0)


def test_default_policy_is_exhausted_by_the_third_attempt() -> None:
    policy = RetryPolicy()
    assert [policy.exhausted(n) for n in (1, 2, 3, 4)] == [False, False, True, True]


def test_single_attempt_policy_is_exhausted_by_the_first() -> None:
    assert RetryPolicy(max_attempts=1).exhausted(1)


@pytest.mark.parametrize("max_attempts", [0, -1, 1001])
def test_max_attempts_out_of_range_is_rejected(max_attempts: int) -> None:
    with pytest.raises(ValidationError, match="max_attempts must be between 1 and 1000") as c:
        RetryPolicy(max_attempts=max_attempts)
    assert c.value.field == "max_attempts"


@pytest.mark.parametrize("max_attempts", [2.0, True, "3", None])
def test_max_attempts_that_is_not_an_integer_is_rejected(max_attempts: object) -> None:
    with pytest.raises(ValidationError, match="max_attempts must be an integer") as c:
        RetryPolicy(max_attempts=max_attempts)  # type: ignore[arg-type]
    assert c.value.field == "max_attempts"


def test_negative_backoff_is_rejected() -> None:
    with pytest.raises(ValidationError, match="must not be negative"):
        RetryPolicy(backoff_base=-1)


def test_cap_below_base_is_rejected() -> None:
    with pytest.raises(ValidationError, match="cap 5 s is below its base 10 s"):
        RetryPolicy(backoff_base=10, backoff_cap=5)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_backoff_that_is_not_a_finite_number_is_rejected(value: float) -> None:
    with pytest.raises(ValidationError, match="finite"):
        RetryPolicy(backoff_base=1.0, backoff_cap=value)
