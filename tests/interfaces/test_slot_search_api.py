"""A rule that cannot fire gets a quick 400 naming it, over HTTP, the CLI and Python; and no
random cron rule with a calendar, business-day rule or DST policy ties up ``submit``,
``next`` (the job's upcoming slots) or ``explain``, or gets a 5xx (issue 23).

The property test times each answer: the issue asks for it (the bound is the point), and
the bound is generous, :data:`ANSWER_BOUND`, for a machine shared by several test runs.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime
from typing import Any

import pytest
from api_support import bearer, counts, error_of
from cli_support import assert_error, tickwork
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickwork.calendar import make_calendar
from tickwork.client import Client, upcoming
from tickwork.errors import NeverFires, ValidationError
from tickwork.schedule import Cron
from tickwork.store import Store

ANSWER_BOUND = 2.0
"""Seconds any one answer may take in the property test (typically a few milliseconds)."""
HTTP_ARGS = {"url": "https://example.com/"}

pytestmark = pytest.mark.timeout(120)

ISSUE_EXAMPLES = [
    (
        {"cron": "0 9 * 2 *", "calendar": "x", "business_day": 23},
        "cron '0 9 * 2 *' with calendar 'x' (the 23rd business day of the month) never fires",
    ),
    (
        {"cron": "0 9 * * 6", "calendar": "x"},
        "cron '0 9 * * 6' with calendar 'x' (business days only) never fires",
    ),
    (
        {"cron": "* * * * 6", "calendar": "x"},
        "cron '* * * * 6' with calendar 'x' (business days only) never fires",
    ),
]


@pytest.mark.timeout(30)  # today: 46 s to two hours each, in a request thread
@pytest.mark.parametrize(("schedule", "message"), ISSUE_EXAMPLES)
def test_the_issues_examples_answer_400_at_once_and_write_nothing(
    web: TestClient, admin_key: str, client: Client, schedule: dict[str, Any], message: str
) -> None:
    assert web.put("/api/v1/calendars/x", json={}, headers=bearer(admin_key)).status_code == 201
    before = counts(client)
    began = time.monotonic()

    answer = web.post(
        "/api/v1/jobs",
        json={"task": "http", "args": HTTP_ARGS, "schedule": schedule},
        headers=bearer(admin_key),
    )

    took = time.monotonic() - began
    assert answer.status_code == 400, answer.text
    error = error_of(answer)
    assert (error["code"], error["field"]) == ("never_fires", "schedule")
    assert error["message"].startswith(message)
    assert counts(client) == before
    assert took < ANSWER_BOUND * 5


@pytest.mark.timeout(30)
def test_the_cli_refuses_a_rule_that_cannot_fire_with_one_line(
    store_url: str, store: Store
) -> None:
    store.create_calendar(make_calendar("x"))
    submitted = tickwork(
        "submit", "--db", store_url, "--cron", "0 9 * * 6", "--calendar", "x", "shell", "--", "true"
    )
    listed = tickwork("next", "* * * * 6", "--calendar", "x", "--db", store_url)

    assert_error(submitted, 2, "cron '0 9 * * 6' with calendar 'x' (business days only) never")
    assert_error(listed, 2, "cron '* * * * 6' with calendar 'x' (business days only) never")
    assert store.list_jobs().items == []


@pytest.mark.timeout(30)
def test_python_refuses_a_rule_that_cannot_fire_with_a_typed_error(
    client: Client, store: Store
) -> None:
    store.create_calendar(make_calendar("x"))
    with pytest.raises(NeverFires, match=r"the 23rd business day of the month\) never fires"):
        client.submit("http", args=HTTP_ARGS, cron="0 9 * 2 *", calendar="x", business_day=23)
    with pytest.raises(NeverFires):
        client.schedule("http", name="weekly", args=HTTP_ARGS, cron="0 9 * * 6", calendar="x")
    assert store.list_jobs().items == []


@pytest.mark.timeout(30)
def test_a_calendar_edit_that_would_strand_a_job_is_refused_naming_it(
    web: TestClient, admin_key: str, client: Client, store: Store, store_url: str
) -> None:
    created = web.put("/api/v1/calendars/x", json={"weekend": "SUN"}, headers=bearer(admin_key))
    assert created.status_code == 201
    saturday = client.submit("http", args=HTTP_ARGS, cron="0 9 * * 6", calendar="x").job
    daily = client.submit("http", args=HTTP_ARGS, cron="0 9 * * *", calendar="x").job

    refused = web.patch(
        "/api/v1/calendars/x", json={"weekend": "SAT,SUN"}, headers=bearer(admin_key)
    )

    assert refused.status_code == 409, refused.text
    error = error_of(refused)
    assert error["code"] == "calendar_strands_jobs"
    assert f"job {saturday.id} (cron '0 9 * * 6'" in error["message"]
    assert f"job {daily.id} " not in error["message"]
    assert store.get_calendar("x").calendar.weekend == frozenset({6})
    assert store.get_job(saturday.id) == saturday
    cli = tickwork("calendars", "update", "x", "--weekend", "SAT,SUN", "--db", store_url)
    assert_error(cli, 1, f"job {saturday.id} (cron '0 9 * * 6'")
    assert store.get_calendar("x").calendar.weekend == frozenset({6})


# -- random rules: every answer is quick and none is a 5xx ------------------------------------

FIELDS_5 = st.tuples(
    st.sampled_from(["0", "*", "*/7", "5,35", "59", "0-30/10"]),
    st.sampled_from(["9", "*", "2", "1-3", "*/5", "23"]),
    st.sampled_from(["*", "1", "13", "29", "30", "31", "L", "LW", "1-7", "15-21"]),
    st.sampled_from(["*", "2", "2,4", "1-6", "12", "*/3", "FEB"]),
    st.sampled_from(["*", "6", "0", "6,0", "SAT-SUN", "1-5", "5", "MON#5", "6L", "FRI#2"]),
)
EXPRESSIONS = st.one_of(
    FIELDS_5.map(" ".join),
    st.tuples(st.sampled_from(["*", "0", "*/10", "30"]), FIELDS_5).map(
        lambda t: " ".join((t[0], *t[1]))
    ),
)
WEEKENDS = st.sets(st.sampled_from(["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]), max_size=6)
DATES = st.dates(date(2026, 1, 1), date(2031, 12, 31)).map(date.isoformat)


@st.composite
def calendars(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {"weekend": ",".join(sorted(draw(WEEKENDS))) or "none"}
    country = draw(st.sampled_from([None, None, "DE", "US", "LK"]))
    if country is not None:
        body["country"] = country
    added = draw(st.lists(DATES, max_size=30, unique=True))
    removed = draw(st.lists(DATES.filter(lambda d: d not in added), max_size=6, unique=True))
    return {**body, "add": added, "remove": removed}


@st.composite
def schedules(draw: st.DrawFn) -> dict[str, Any]:
    schedule: dict[str, Any] = {
        "cron": draw(EXPRESSIONS),
        "tz": draw(st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Tehran"])),
    }
    for key, values in (("dst_gap", ["skip", "run-after"]), ("dst_repeat", ["once", "twice"])):
        value = draw(st.sampled_from([None, *values]))
        if value is not None:
            schedule[key] = value
    rule = draw(st.sampled_from(["none", "skip", "next", "previous", "nth", "only"]))
    if rule != "none":
        schedule["calendar"] = "cal"
    if rule in ("skip", "next", "previous"):
        schedule["on_holiday"] = {"skip": "skip", "next": "next-business-day"}.get(
            rule, "previous-business-day"
        )
    elif rule == "only":
        schedule["business_days_only"] = True
    elif rule == "nth":
        parts = schedule["cron"].split()
        parts[-3], parts[-1] = "*", "*"
        schedule["cron"] = " ".join(parts)
        schedule["business_day"] = draw(st.integers(1, 23) | st.integers(-23, -1))
    return schedule


INSTANTS = st.datetimes(datetime(2026, 1, 1), datetime(2040, 12, 31)).map(
    lambda t: t.replace(tzinfo=UTC).isoformat()
)
EXAMPLES = 40
"""Generated rules per backend; each one is a calendar, a submit, a job read and an explain."""
_made = iter(range(10**9))


def timed(call: Any, *args: Any, **kwargs: Any) -> Any:
    began = time.monotonic()
    result = call(*args, **kwargs)
    took = time.monotonic() - began
    assert took < ANSWER_BOUND, f"{took:.2f} s for {args!r} {kwargs!r}"
    return result


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calendar=calendars(), schedule=schedules(), explain_at=INSTANTS)
def test_random_rules_are_answered_quickly_and_never_with_a_5xx(
    *,
    web: TestClient,
    admin_key: str,
    client: Client,
    calendar: dict[str, Any],
    schedule: dict[str, Any],
    explain_at: str,
) -> None:
    name = f"cal{next(_made)}"
    made = timed(web.put, f"/api/v1/calendars/{name}", json=calendar, headers=bearer(admin_key))
    assert made.status_code == 201, made.text
    if "calendar" in schedule:
        schedule = {**schedule, "calendar": name}
    body = {"task": "http", "args": HTTP_ARGS, "schedule": schedule}

    answer = timed(web.post, "/api/v1/jobs", json=body, headers=bearer(admin_key))

    assert answer.status_code < 500, answer.text
    if answer.status_code >= 400:
        assert answer.status_code in (400, 422), answer.text
        assert error_of(answer)["message"]
    else:
        job_id = answer.json()["id"]
        shown = timed(web.get, f"/api/v1/jobs/{job_id}?n=20", headers=bearer(admin_key))
        assert shown.status_code == 200, shown.text
        assert shown.json()["next_fire_times"], shown.text
        for when in (None, explain_at):
            params = {"at": when} if when else {}
            explained = timed(
                web.get, f"/api/v1/jobs/{job_id}/explain", params=params, headers=bearer(admin_key)
            )
            assert explained.status_code < 500, explained.text
    # The same rule from Python: submit, and the times `tickwork next` lists. A rule the
    # API refused raises a typed error; one it took is taken and listed.
    rules = {k: v for k, v in schedule.items() if k not in ("cron", "tz")}
    outcome: object
    try:
        submitted = timed(
            client.submit, "http", args=HTTP_ARGS, cron=schedule["cron"], tz=schedule["tz"], **rules
        )
        parsed = submitted.job.schedule
        assert isinstance(parsed, Cron)
        outcome = timed(upcoming, parsed, datetime(2026, 6, 1, tzinfo=UTC), 50)
    except ValidationError as exc:
        outcome = exc
    assert isinstance(outcome, ValidationError) == (answer.status_code >= 400), outcome
    if isinstance(outcome, NeverFires):
        assert error_of(answer)["code"] == "never_fires"


def test_a_job_near_the_calendars_end_is_explained_and_shown(
    web: TestClient, admin_key: str
) -> None:
    assert web.put("/api/v1/calendars/x", json={}, headers=bearer(admin_key)).status_code == 201
    spec = {"cron": "0 9 * 12 *", "calendar": "x", "business_day": -1}
    body = {"task": "http", "args": HTTP_ARGS, "schedule": spec}
    answer = web.post("/api/v1/jobs", json=body, headers=bearer(admin_key))
    assert answer.status_code == 201, answer.text
    job_id = answer.json()["id"]
    shown = web.get(f"/api/v1/jobs/{job_id}?n=100", headers=bearer(admin_key))
    assert shown.status_code == 200, shown.text
    for at in ("9999-12-01T00:00:00Z", "9999-12-29T12:00:00Z"):
        explained = web.get(
            f"/api/v1/jobs/{job_id}/explain", params={"at": at}, headers=bearer(admin_key)
        )
        assert explained.status_code == 200, explained.text
