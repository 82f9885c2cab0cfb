"""``tickwork next``, run as users run it: the installed console script, in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("tickwork")
"""The console script that `pip install` put beside this interpreter."""
# Colours would put escape codes around 'error:'; these variables force them on.
FORCING_COLOUR = ("FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE", "TTY_INTERACTIVE")


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def tickwork(*argv: str, command: tuple[str, ...] = (str(SCRIPT),), **env: str) -> Result:
    environ = {k: v for k, v in os.environ.items() if k not in FORCING_COLOUR}
    environ.update(env)
    done = subprocess.run(
        [*command, *argv], capture_output=True, text=True, timeout=60, env=environ, check=False
    )
    return Result(done.returncode, done.stdout, done.stderr)


def test_console_script_is_installed() -> None:
    assert SCRIPT.is_file(), f"{SCRIPT} missing: pip install -e . creates it"


# -- output ----------------------------------------------------------------------------------


def test_prints_the_next_fire_times_in_the_zone_then_plain_english() -> None:
    # Berlin falls back at 03:00 CEST: every 30 minutes runs through both passes.
    result = tickwork(
        "next", "*/30 * * * *", "--tz", "Europe/Berlin", "--from", "2026-10-25T00:00:00Z", "-n", "6"
    )
    assert result.code == 0
    assert result.err == ""
    # Each time a DST change touches is marked with what the (default) policy does there.
    assert result.lines == [
        "2026-10-25T02:30:00+02:00  <- 02:30 happens twice on 2026-10-25 (DST ends): runs "
        "again at the second pass (--dst-repeat twice)",
        "2026-10-25T02:00:00+01:00  <- 02:00 CET is the second pass of a repeated hour on "
        "2026-10-25 (DST ends): runs again (--dst-repeat twice)",
        "2026-10-25T02:30:00+01:00  <- 02:30 CET is the second pass of a repeated hour on "
        "2026-10-25 (DST ends): runs again (--dst-repeat twice)",
        "2026-10-25T03:00:00+01:00",
        "2026-10-25T03:30:00+01:00",
        "2026-10-25T04:00:00+01:00",
        "Every 30th minute of every hour (Europe/Berlin)",
    ]


def test_fixed_time_in_the_spring_gap_shows_once_right_after_it() -> None:
    result = tickwork(
        "next",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--from",
        "2026-03-07T00:00:00Z",
        "-n",
        "3",
    )
    assert result.lines == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T03:00:00-04:00  <- 02:30 does not exist on 2026-03-08 (DST starts): runs "
        "right after the gap, at 03:00 EDT (--dst-gap run-after)",
        "2026-03-09T02:30:00-04:00",
        "At 02:30 every day (America/New_York)",
    ]


def test_default_is_five_times_in_utc() -> None:
    result = tickwork("next", "0 9 * * MON-FRI", "--from", "2026-01-01T00:00:00+01:00")
    assert result.code == 0
    assert result.lines == [
        "2026-01-01T09:00:00+00:00",
        "2026-01-02T09:00:00+00:00",
        "2026-01-05T09:00:00+00:00",
        "2026-01-06T09:00:00+00:00",
        "2026-01-07T09:00:00+00:00",
        "At 09:00 on Monday through Friday (UTC)",
    ]


def test_a_day_of_week_range_ending_in_sunday_runs_through_sunday() -> None:
    # 2026-01-01 is a Thursday: Debian cron reads WED-SUN as Wednesday .. Saturday, Sunday.
    result = tickwork("next", "0 9 * * WED-SUN", "--from", "2026-01-01T10:00:00Z", "-n", "5")
    assert result.code == 0, result.err
    assert result.lines == [
        "2026-01-02T09:00:00+00:00",
        "2026-01-03T09:00:00+00:00",
        "2026-01-04T09:00:00+00:00",
        "2026-01-07T09:00:00+00:00",
        "2026-01-08T09:00:00+00:00",
        "At 09:00 on Wednesday through Sunday (UTC)",
    ]


def test_times_are_strictly_after_from() -> None:
    result = tickwork("next", "@hourly", "--from", "2026-01-01T10:00:00Z", "-n", "1")
    assert result.lines[0] == "2026-01-01T11:00:00+00:00"


def test_six_fields_show_seconds() -> None:
    result = tickwork("next", "*/20 * * * * *", "--from", "2026-01-01T10:00:00Z", "-n", "2")
    assert result.lines[:2] == ["2026-01-01T10:00:20+00:00", "2026-01-01T10:00:40+00:00"]


def test_json_prints_only_the_list_of_times() -> None:
    result = tickwork("next", "@daily", "--from", "2026-01-01T12:00:00Z", "-n", "2", "--json")
    assert result.code == 0
    assert result.err == ""
    assert json.loads(result.out) == ["2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00"]


def test_one_thousand_times_are_allowed() -> None:
    result = tickwork("next", "* * * * *", "--from", "2026-01-01T00:00:00Z", "-n", "1000")
    assert result.code == 0
    assert len(result.lines) == 1001
    assert result.lines[999] == "2026-01-01T16:40:00+00:00"  # minute 1000


def test_without_from_the_times_start_now() -> None:
    before = datetime.now(UTC)
    result = tickwork("next", "* * * * *", "-n", "1", "--json")
    after = datetime.now(UTC)
    (first,) = json.loads(result.out)
    fire = datetime.fromisoformat(first)
    assert before < fire <= after + timedelta(minutes=1)


def test_long_explanation_is_not_wrapped_on_a_narrow_terminal() -> None:
    result = tickwork(
        "next",
        "0 0 1,15 JAN,APR,JUL,OCT MON-FRI",
        "-n",
        "1",
        "--from",
        "2026-01-01T00:00:00Z",
        COLUMNS="20",
    )
    assert result.code == 0
    assert len(result.lines) == 2
    assert result.lines[1].endswith("(UTC)")


def test_the_times_end_at_the_calendars_end() -> None:
    result = tickwork(
        "next",
        "0 0 * * *",
        "--tz",
        "Pacific/Kiritimati",
        "-n",
        "5",
        "--json",
        "--from",
        "9999-12-27T00:00:00Z",
    )

    assert result.code == 0, result.err
    assert json.loads(result.out) == [
        "9999-12-28T00:00:00+14:00",
        "9999-12-29T00:00:00+14:00",
        "9999-12-30T00:00:00+14:00",
    ]


def test_python_dash_m_tickwork_runs_the_same_cli() -> None:
    result = tickwork(
        "next",
        "@daily",
        "--from",
        "2026-01-01T12:00:00Z",
        "-n",
        "1",
        "--json",
        command=(sys.executable, "-m", "tickwork"),
    )
    assert result.code == 0
    assert json.loads(result.out) == ["2026-01-02T00:00:00+00:00"]


# -- bad input: exit 2, one line on stderr, nothing on stdout --------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["61 * * * *"], "invalid cron expression '61 * * * *': bad minute field '61'"),
        (["* * * *"], "invalid cron expression '* * * *': expected 5 fields"),
        (["@reboot"], "unknown nickname '@reboot'"),
        (["0 0 31 2 *"], "day-of-month '31' never occurs in month '2'"),
        (["* * * * *", "--tz", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
        (
            ["* * * * *", "--from", "2026-01-01T09:00:00"],
            "--from '2026-01-01T09:00:00' has no UTC offset",
        ),
        (["* * * * *", "--from", "tomorrow"], "--from 'tomorrow' is not an ISO-8601 time"),
        (["* * * * *", "--from", "9999-12-31T00:00:00Z"], "is out of range"),
        (["* * * * *", "-n", "0"], "'-n' / '--count'"),
        (["* * * * *", "-n", "1001"], "'-n' / '--count'"),
        (["* * * * *", "-n", "many"], "'-n' / '--count'"),
        (["0 9 * * 3-0"], "bad day-of-week field '3-0' (a range ending on Sunday ends in 7"),
        ([], "Missing argument 'EXPR'"),
        (["* * * * *", "--zone", "UTC"], "No such option: --zone"),
    ],
    ids=[
        "bad-field",
        "field-count",
        "nickname",
        "impossible-day",
        "zone",
        "naive-from",
        "garbage-from",
        "from-out-of-range",
        "n-zero",
        "n-too-many",
        "n-not-a-number",
        "backwards-to-sunday",
        "no-expr",
        "unknown-option",
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_problem(argv: list[str], message: str) -> None:
    result = tickwork("next", *argv)
    assert result.code == 2
    assert result.out == ""
    assert len(result.err.splitlines()) == 1, result.err
    assert result.err.startswith("tickwork: error: ")
    assert message in result.err
    assert "Traceback" not in result.err


def test_unknown_command_exits_2_with_one_line() -> None:
    result = tickwork("nxt", "* * * * *")
    assert result.code == 2
    assert result.err == "tickwork: error: No such command 'nxt'. Did you mean 'next'?\n"


def test_help_lists_the_next_command() -> None:
    result = tickwork("--help")
    assert result.code == 0
    assert "next" in result.out


def test_no_arguments_shows_help_and_exits_2() -> None:
    result = tickwork()
    assert result.code == 2
    assert "Usage: tickwork" in result.out + result.err
