import math

import pytest

from tickwork.stats import percentile


def test_a_percentile_is_the_nearest_rank() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0
    assert percentile([float(n) for n in range(1, 101)], 99) == 99.0
    assert percentile([float(n) for n in range(1, 151)], 99) == 149.0
    assert percentile([7.0], 50) == 7.0


def test_a_percentile_is_always_a_measured_value_whatever_the_order() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 40) == 2.0
    assert percentile(values, 41) == 3.0
    assert percentile(values, 100) == 5.0
    assert percentile(iter(values), 95) == 5.0


def test_an_empty_sample_has_no_percentile() -> None:
    assert percentile([], 50) is None


@pytest.mark.parametrize("percent", [-1, 101, math.nan])
def test_a_percent_outside_0_to_100_is_refused(percent: float) -> None:
    with pytest.raises(ValueError, match="percent must be from 0 to 100"):
        percentile([1.0], percent)
