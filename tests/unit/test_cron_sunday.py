"""Day-of-week ranges ending in Sunday (issue 16, item 4): ``WED-SUN`` and ``3-7`` are
Wednesday to Saturday plus Sunday, as in Debian cron, where Sunday is both 0 and 7."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwork import cron
from tickwork.errors import InvalidCron
from tickwork.schedule import Cron

MONDAY = datetime(2026, 1, 5, tzinfo=UTC)
NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


def weekdays_fired(dow: str, *, seconds: bool = False) -> set[int]:
    """Cron's numbers (0 = Sunday) of the days ``0 9 * * DOW`` fires on in two weeks."""
    expr = f"0 0 9 * * {dow}" if seconds else f"0 9 * * {dow}"
    days = set()
    for fire in cron.iterate(Cron(expr).expr, "UTC", MONDAY):
        if fire >= MONDAY + timedelta(days=14):
            break
        assert (fire.hour, fire.minute) == (9, 0)
        days.add(fire.isoweekday() % 7)
    return days


def debian_days(terms: list[tuple[int, int, int]]) -> set[int]:
    """Debian cron's expansion, written out: each ``first-last/step`` sets the bits
    ``first, first+step, ... <= last`` over 0..7, and bit 7 is Sunday (bit 0)."""
    bits = {bit for first, last, step in terms for bit in range(first, last + 1, step)}
    return {bit % 7 for bit in bits}


@pytest.mark.parametrize(
    ("dow", "days"),
    [
        ("WED-SUN", {3, 4, 5, 6, 0}),
        ("wed-sun", {3, 4, 5, 6, 0}),
        ("Sat-Sun", {6, 0}),
        ("3-7", {3, 4, 5, 6, 0}),
        ("5-7", {5, 6, 0}),
        ("1-7", set(range(7))),
        ("0-7", set(range(7))),
        ("7", {0}),
        ("MON-SUN/2", {1, 3, 5, 0}),
        ("1-7/2", {1, 3, 5, 0}),
        ("*/2", {0, 2, 4, 6}),
        ("*/7", {0}),
        ("MON-FRI,SAT-SUN", set(range(7))),
        ("SUN-SAT", set(range(7))),
        ("SUN-SUN", {0}),
        ("3-WED/2", {3}),  # one value, spelt two ways: not 3/2
    ],
)
def test_ranges_ending_in_sunday_fire_as_debian_cron_does(dow: str, days: set[int]) -> None:
    assert weekdays_fired(dow) == days


def test_six_fields_read_the_day_of_week_the_same_way() -> None:
    assert weekdays_fired("THU-SUN", seconds=True) == {4, 5, 6, 0}


def test_the_expression_keeps_sunday_as_seven_and_says_so() -> None:
    schedule = Cron("0 9 * * WED-SUN")
    assert schedule.expr == "0 9 * * WED-7"
    assert cron.explain(schedule.expr) == "At 09:00 on Wednesday through Sunday"


@pytest.mark.parametrize(
    ("dow", "reason"),
    [
        ("FRI-MON", "bad day-of-week field 'FRI-MON'"),
        (
            "3-0",
            "bad day-of-week field '3-0' (a range ending on Sunday ends in 7 or SUN, e.g. 3-7)",
        ),
        ("1-8", "bad day-of-week field '1-8'"),
        ("WED-SUN/0", "bad day-of-week field 'WED-SUN/0'"),
        ("WED-FUNDAY", "bad day-of-week field 'WED-FUNDAY'"),
    ],
)
def test_truly_invalid_day_of_week_fields_keep_a_clear_error(dow: str, reason: str) -> None:
    with pytest.raises(InvalidCron) as caught:
        Cron(f"0 9 * * {dow}")
    assert caught.value.reason == reason


DAY = st.integers(min_value=0, max_value=7)


@st.composite
def dow_terms(draw: st.DrawFn) -> tuple[str, tuple[int, int, int]]:
    """One term of a day-of-week field, spelt in numbers or names, and what it means."""
    if draw(st.booleans()):
        step = draw(st.integers(min_value=1, max_value=8))
        return (f"*/{step}" if step > 1 else "*"), (0, 7, step)
    first = draw(DAY)
    last = draw(st.integers(min_value=first, max_value=7))
    step = draw(st.integers(min_value=1, max_value=8))

    def spell(day: int, *, at_end: bool) -> str:
        if day == 7:
            # SUN-SUN is Sunday alone: only a range from Monday on reads SUN as 7.
            names = ["7", "SUN", "sun"] if first > 0 else ["7"]
            return draw(st.sampled_from(names)) if at_end else "7"
        if day == 0 and at_end:
            return "SUN" if first == 0 else "0"
        return draw(st.sampled_from([str(day), NAMES[day], NAMES[day].lower()]))

    if first == last and step == 1:
        return spell(first, at_end=False), (first, first, 1)
    text = f"{spell(first, at_end=False)}-{spell(last, at_end=True)}"
    return (f"{text}/{step}" if step > 1 else text), (first, last, step)


@given(st.lists(dow_terms(), min_size=1, max_size=3))
def test_any_day_of_week_list_fires_on_debians_days(
    terms: list[tuple[str, tuple[int, int, int]]],
) -> None:
    field = ",".join(text for text, _ in terms)
    assert weekdays_fired(field) == debian_days([meaning for _, meaning in terms]), field
