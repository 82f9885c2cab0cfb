"""Fault injection's rates: parsing the flag, the environment variable, and the draw."""

from __future__ import annotations

import pytest

from tickwork.config import Config
from tickwork.errors import ValidationError
from tickwork.faults import CRASH_AFTER_HANDLER, FAIL, STALL_PAST_LEASE, FaultRates


def test_the_flags_rates_are_parsed_by_fault_name() -> None:
    rates = FaultRates.parse("crash-after-handler=0.05, stall-past-lease=0.02,fail=0.1")
    assert rates == FaultRates(crash_after_handler=0.05, stall_past_lease=0.02, fail=0.1)
    assert rates.describe() == "crash-after-handler=0.05,stall-past-lease=0.02,fail=0.1"
    assert FaultRates.parse("fail=1") == FaultRates(fail=1.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "names no fault"),
        ("boom=0.1", "'boom=0.1' is not FAULT=RATE"),
        ("fail", "'fail' is not FAULT=RATE"),
        ("fail=often", "fail's rate 'often' is not a number"),
        ("fail=-0.1", "fail must be a probability from 0 to 1"),
        ("fail=nan", "fail must be a probability from 0 to 1"),
        ("fail=0.1,fail=0.2", "fail is given twice"),
        ("fail=0.6,crash-after-handler=0.5", "the rates add up to 1.1"),
    ],
)
def test_bad_rates_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        FaultRates.parse(text)
    assert caught.value.field == "inject_faults"


def test_a_draw_lands_on_at_most_one_fault_in_proportion() -> None:
    rates = FaultRates(crash_after_handler=0.05, stall_past_lease=0.02, fail=0.1)
    assert rates.pick(0.0) == CRASH_AFTER_HANDLER
    assert rates.pick(0.049) == CRASH_AFTER_HANDLER
    assert rates.pick(0.06) == STALL_PAST_LEASE
    assert rates.pick(0.1) == FAIL
    assert rates.pick(0.17) is None
    assert rates.pick(0.999) is None
    assert FaultRates().pick(0.0) is None


def test_the_environment_variable_sets_the_workers_faults() -> None:
    config = Config.from_env({"TICKWORK_INJECT_FAULTS": "fail=0.5"})
    assert config.inject_faults == FaultRates(fail=0.5)
    assert Config.from_env({}).inject_faults is None
    assert Config(inject_faults="crash-after-handler=0.1").inject_faults == FaultRates(0.1)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="inject-faults"):
        Config.from_env({"TICKWORK_INJECT_FAULTS": "fail=2"})
