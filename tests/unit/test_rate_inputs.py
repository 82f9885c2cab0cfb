"""Rates as people type them (``20/s``, ``30/m``, ``100/h``, a bare number per second) and
as every face shows them."""

from __future__ import annotations

import pytest

from tickwork.errors import ValidationError
from tickwork.inputs import parse_rate
from tickwork.records import format_rate


@pytest.mark.parametrize(
    ("text", "per_second"),
    [("20/s", 20.0), ("30/m", 0.5), ("1.5/s", 1.5), ("100/h", 100 / 3600), ("20", 20.0),
     (" 7 / m ", 7 / 60), (".5/s", 0.5), (5, 5.0), (0.25, 0.25)],
)  # fmt: skip
def test_a_rate_is_read_as_runs_per_second(text: str | float, per_second: float) -> None:
    assert parse_rate(text) == pytest.approx(per_second)


RANGE = "from 0.00001/s"


@pytest.mark.parametrize(
    ("text", "message"),
    [("0", RANGE), ("0/s", RANGE), ("-1/s", RANGE), ("2000000/s", RANGE), ("0.000009", RANGE),
     ("abc", "such as 20/s"), ("20/d", "such as 20/s"), ("", "such as 20/s"),
     ("1e3", "such as 20/s"), ("20/s/s", "such as 20/s"), (True, RANGE),
     (float("nan"), RANGE), (float("inf"), RANGE), ("9" * 400, RANGE), (1e-310, RANGE)],
)  # fmt: skip
def test_a_bad_rate_is_refused_naming_the_field(text: str | float, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        parse_rate(text, field="limits.rate")
    assert caught.value.field == "limits.rate"


@pytest.mark.parametrize(
    ("per_second", "shown"),
    [(20.0, "20/s"), (1.5, "1.5/s"), (0.5, "30/m"), (100 / 3600, "100/h"), (1 / 80, "45/h"),
     (0.001, "0.001/s"), (1e6, "1000000/s")],
)  # fmt: skip
def test_a_rate_is_shown_in_the_largest_unit_that_keeps_it_whole(
    per_second: float, shown: str
) -> None:
    assert format_rate(per_second) == shown
    assert parse_rate(shown) == pytest.approx(per_second)
