"""What a search for slots costs (issue 23): a rule that cannot fire, a rare one, and the
searches that spend their whole budget.

    python benchmarks/slot_search.py [--repeat K]

CPU time (``time.process_time``) per call, the best and the worst of K runs, each run in
a fresh process state for the caches that matter (holidays, offset changes, the days an
expression names are warm after the first run: the worst is the cold one). No database:
the search is pure domain code (:mod:`tickwork.search`). Before issue 23 the first three
refused rules took 37 s, 49 s and about two hours of CPU on this machine (the last
estimated from one year of its slots), the first ending in a 500.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from tickwork.budget import SEARCH_BUDGET
from tickwork.calendar import Calendar, make_calendar
from tickwork.client import upcoming
from tickwork.cron import DstRepeat
from tickwork.errors import NeverFires
from tickwork.explain import slot_before
from tickwork.job import DEFAULT_MISFIRE_GRACE, Job, JobState, MisfirePolicy, OverlapPolicy
from tickwork.retry import RetryPolicy
from tickwork.schedule import Cron

NOW = datetime(2026, 5, 1, tzinfo=UTC)
WEEKDAYS = make_calendar("x")
DE = make_calendar("de", country="DE")


def rule(expr: str, calendar: Calendar = WEEKDAYS, tz: str = "UTC", **rules: Any) -> Cron:
    return Cron(expr, tz, calendar=calendar.name, calendar_def=calendar, **rules)


def refused(schedule: Cron) -> Callable[[], object]:
    def call() -> object:
        try:
            schedule.first_slot(NOW)
        except NeverFires as exc:
            return exc.why[:40]
        raise AssertionError(f"{schedule.expr} fired")

    return call


def closed_for_decades() -> Cron:
    years = SEARCH_BUDGET // 200 + 10
    days = (date(2027, 1, 1) + timedelta(days=k) for k in range(366 * years))
    return rule("0 9 * * *", make_calendar("closed", add=[d.isoformat() for d in days]))


def job(schedule: Cron) -> Job:
    return Job(
        1, "t", None, "t", {}, schedule, JobState.ACTIVE, None, "default", 0, RetryPolicy(),
        None, MisfirePolicy.ONCE, DEFAULT_MISFIRE_GRACE, OverlapPolicy.ALLOW, None, NOW, NOW,
    )  # fmt: skip


def at(year: int, month: int, day: int, hour: int = 0) -> datetime:
    return datetime(year, month, day, hour, tzinfo=UTC)


def cases() -> list[tuple[str, Callable[[], object]]]:
    second_pass = datetime(2026, 10, 25, 0, 59, 59, tzinfo=UTC)  # 02:59:59 CEST, Berlin
    per_second = Cron("* * * * * *", "Europe/Berlin", dst_repeat=DstRepeat.ONCE)
    closed = closed_for_decades()
    leap = rule("0 9 29 2 *")
    moved = rule("* * * * * 6", on_holiday="next-business-day")
    dense_back = rule("*/10 * * LW 2 0", on_holiday="previous-business-day")
    friday_night = at(2026, 5, 1, 23)
    every_minute = rule("0-59 0-23 * * *", tz="Europe/Berlin")
    every_second = rule("* * * * * *")
    mon5 = rule("0 0 * 2 MON#5")
    nth23 = rule("0 9 * * *", DE, business_day=23)
    feb_last = rule("0 9 * 2 *", DE, business_day=-23)
    every_second_de = rule("* * * * * *", DE)

    def days_off(schedule: Cron) -> Callable[[], object]:
        return lambda: sum(1 for _ in schedule.fires(friday_night))

    return [
        ("refused: 0 9 * 2 * business_day 23", refused(rule("0 9 * 2 *", business_day=23))),
        ("refused: 0 9 * * 6 business days", refused(rule("0 9 * * 6"))),
        ("refused: * * * * 6 business days", refused(rule("* * * * 6"))),
        ("refused: * * * * * 6 (6 fields)", refused(rule("* * * * * 6"))),
        ("refused: 0 9 * 2 * business_day -23, DE", refused(feb_last)),
        ("rare: 0 9 29 2 * from 2096 (to 2104)", lambda: leap.first_slot(at(2096, 3, 1))),
        ("rare: 0 0 * 2 MON#5 from 2072 (to 2112)", lambda: mon5.first_slot(at(2072, 3, 1))),
        ("rare: 0 9 * * * business_day 23, DE", lambda: nth23.first_slot(NOW)),
        ("rare: 0 9 25 12 * DE (to 2102)", lambda: rule("0 9 25 12 *", DE).first_slot(NOW)),
        ("rare: * * * * * 6 next-business-day", lambda: moved.first_slot(NOW)),
        ("upcoming 1000: 0 9 29 2 * business days", lambda: len(upcoming(leap, NOW, 1000))),
        ("upcoming 1000: * * * * * * DE", lambda: len(upcoming(every_second_de, NOW, 1000))),
        ("slot before: 0 9 29 2 *", lambda: slot_before(job(leap), at(2035, 1, 1))),
        ("slot before: */10 * * LW 2 0 previous", lambda: slot_before(job(dense_back), NOW)),
        ("whole budget: days, closed 60 years", lambda: closed.search(at(2026, 12, 31, 10))),
        ("whole budget: slots, an every-second rule", lambda: per_second.search(second_pass)),
        ("whole budget: slots, days off (UTC)", days_off(every_second)),
        ("whole budget: slots, days off (Berlin)", days_off(every_minute)),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    width = 48
    print(f"{'search':<{width}} {'best ms':>9} {'worst ms':>9}  answer")
    for name, call in cases():
        times: list[float] = []
        answer: object = None
        for _ in range(options.repeat):
            began = time.process_time()
            answer = call()
            times.append((time.process_time() - began) * 1000)
        shown = answer.slot if hasattr(answer, "slot") else answer
        print(f"{name:<{width}} {min(times):>9.1f} {max(times):>9.1f}  {shown}")


if __name__ == "__main__":
    main()
