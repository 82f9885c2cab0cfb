"""DST policies and calendars through every interface: ``tickwork calendars``, ``submit``,
``next``, ``show`` and ``explain`` in real processes; the HTTP API; ``app.schedule``. Bad
input gets exit 2 / a 4xx / a typed exception, and changes nothing."""

from __future__ import annotations

import re
import warnings

import pytest
from cli_support import assert_error, ok, tickwork
from fastapi.testclient import TestClient

from tickwork import App
from tickwork.calendar import make_calendar
from tickwork.client import Client
from tickwork.errors import InvalidCalendar, UnknownCalendar, ValidationError
from tickwork.schedule import Cron, DstWarning
from tickwork.store import Store


def test_calendars_create_list_show_update_and_delete(store: Store) -> None:
    said = ok("calendars", "create", "de-by", "--country", "de", "--subdiv", "by",
              "--add", "2030-12-24", "--db", store.url)  # fmt: skip
    assert said.out.strip() == (
        "created calendar de-by: public holidays of DE-BY, weekend SAT,SUN, 1 day(s) added"
    )
    [listed] = ok("calendars", "--json", "--db", store.url).json()
    assert (listed["name"], listed["country"], listed["added"]) == ("de-by", "DE", ["2030-12-24"])
    shown = ok("calendars", "show", "de-by", "--db", store.url).out
    assert "  jobs       none" in shown
    updated = ok("calendars", "update", "de-by", "--remove", "2030-12-24", "--db", store.url)
    assert "jobs re-planned: none" in updated.out
    assert store.get_calendar("de-by").calendar.removed[0].isoformat() == "2030-12-24"
    ok("calendars", "delete", "de-by", "--db", store.url)
    assert store.list_calendars() == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["create", "xx", "--country", "ZZ"], "unknown country 'ZZ'"),
        (["create", "xx", "--country", "DE", "--subdiv", "QQ"], "unknown region 'QQ' of DE"),
        (["create", "xx", "--add", "2030-02-30"], "add '2030-02-30' is not a date"),
        (["create", "Bad Name"], "calendar name 'Bad Name'"),
        (["create", "de-by"], "calendar 'de-by' exists"),
        (["update", "de-by", "--add", "tomorrow"], "add 'tomorrow' is not a date"),
        (["update", "de-by", "--country", "ZZ"], "unknown country 'ZZ'"),
    ],
)
def test_bad_calendar_input_exits_2_and_changes_nothing(
    store: Store, argv: list[str], message: str
) -> None:
    before = store.create_calendar(make_calendar("de-by", country="DE"))
    assert_error(tickwork("calendars", *argv, "--db", store.url), 2, message)
    assert store.list_calendars() == [before]


def test_unknown_calendar_show_and_delete_of_one_in_use_exit_1(store: Store) -> None:
    assert_error(tickwork("calendars", "show", "nope", "--db", store.url), 1, "not found")
    store.create_calendar(make_calendar("de-by", country="DE"))
    job = Client(store).schedule("shell", name="x", cron="0 9 * * *", calendar="de-by",
                                 args={"argv": ["true"]}).job  # fmt: skip
    result = tickwork("calendars", "delete", "de-by", "--db", store.url)
    assert_error(result, 1, f"cannot delete calendar 'de-by': 1 job(s) use it ({job.id})")
    assert store.get_calendar("de-by")


def test_submit_takes_the_rules_warns_of_dst_changes_and_show_marks_them(store: Store) -> None:
    result = tickwork("submit", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
                      "--dst-gap", "skip", "--dst-repeat", "twice", "--db", store.url,
                      "shell", "--", "true")  # fmt: skip
    assert result.code == 0, result.err
    *warned, unserved = result.err.strip().splitlines()
    assert "no live worker runs shell tasks" in unserved  # no worker runs here
    assert len(warned) == 2  # one spring-forward, one fall-back within the year
    assert all(
        line.startswith("tickwork: warning: '30 2 * * *' in Europe/Berlin: ") for line in warned
    )
    assert "does not exist on" in warned[0]
    assert "skipped (--dst-gap skip)" in warned[0]
    job = store.get_job(int(result.last_line))
    assert isinstance(job.schedule, Cron)
    assert (job.schedule.dst_gap, job.schedule.dst_repeat) == ("skip", "twice")
    detail = ok("show", str(job.id), "--json", "--db", store.url).json()
    assert set(detail["upcoming"][0]) == {"at", "run", "note"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dst-gap", "later"], "dst_gap must be one of run-after, skip, got 'later'"),
        (["--calendar", "nope"], "unknown calendar 'nope'"),
        (
            ["--calendar", "de-by", "--business-days-only", "--on-holiday", "skip"],
            "business_days_only is short for on_holiday=skip",
        ),
        (["--on-holiday", "skip"], "on_holiday needs a calendar"),
        (["--calendar", "de-by", "--business-day", "0"], "business_day must be 1 to 23"),
    ],
)
def test_bad_schedule_rules_exit_2_and_submit_nothing(
    store: Store, argv: list[str], message: str
) -> None:
    store.create_calendar(make_calendar("de-by", country="DE"))
    result = tickwork(
        "submit", "--cron", "0 9 * * *", *argv, "--db", store.url, "shell", "--", "true"
    )
    assert_error(result, 2, message)
    assert store.list_jobs().items == []


def test_bad_rule_on_an_interval_is_refused() -> None:
    result = tickwork("submit", "--every", "1h", "--dst-gap", "skip", "shell", "--", "true")
    assert_error(result, 2, "dst_gap applies only to a cron schedule")


def test_next_honours_the_calendar_and_says_what_moved(store: Store) -> None:
    store.create_calendar(make_calendar("de-by", country="DE", subdiv="BY"))
    out = ok("next", "0 9 25 * *", "--tz", "Europe/Berlin", "--calendar", "de-by",
             "--on-holiday", "previous-business-day", "--from", "2030-11-30T00:00:00Z",
             "-n", "2", "--db", store.url).out.splitlines()  # fmt: skip
    assert out[:2] == [
        "2030-12-24T09:00:00+01:00  <- moved to the previous business day, 2030-12-24: "
        "2030-12-25 is a holiday in calendar de-by (Christmas Day)",
        "2031-01-24T09:00:00+01:00  <- moved to the previous business day, 2031-01-24: "
        "2031-01-25 is a Saturday, a weekend day in calendar de-by",
    ]
    last = ok("next", "@monthly", "--tz", "Europe/Berlin", "--calendar", "de-by",
              "--business-day", "-1", "--from", "2030-12-01T00:00:00Z", "-n", "1",
              "--json", "--db", store.url).json()  # fmt: skip
    assert last == ["2030-12-31T00:00:00+01:00"]


def test_explain_says_a_future_slot_on_a_holiday_will_not_run(store: Store) -> None:
    store.create_calendar(make_calendar("de-by", country="DE", subdiv="BY"))
    job = Client(store).schedule("shell", name="x", cron="0 9 * * *", tz="Europe/Berlin",
                                 calendar="de-by", args={"argv": ["true"]}).job  # fmt: skip
    out = ok("explain", str(job.id), "--at", "2030-12-25T09:00:00", "--db", store.url).out
    assert out.strip().endswith(
        "will not run at 2030-12-25T09:00:00+01:00 (Europe/Berlin): skipped: 2030-12-25 is a "
        "holiday in calendar de-by (Christmas Day)."
    )


# -- the HTTP API -----------------------------------------------------------------------------


def test_api_calendars_and_a_schedule_with_rules(
    web: TestClient, admin_key: str, acme_key: str, store: Store
) -> None:
    admin = {"Authorization": f"Bearer {admin_key}"}
    tenant = {"Authorization": f"Bearer {acme_key}"}
    body = {"country": "DE", "subdiv": "BY", "add": ["2030-12-24"]}
    assert web.put("/api/v1/calendars/de-by", json=body, headers=tenant).status_code == 403
    created = web.put("/api/v1/calendars/de-by", json=body, headers=admin)
    assert created.status_code == 201, created.text
    assert created.json()["added"] == ["2030-12-24"]
    assert [c["name"] for c in web.get("/api/v1/calendars", headers=tenant).json()] == ["de-by"]

    schedule = {"cron": "30 2 * * *", "tz": "Europe/Berlin", "calendar": "de-by",
                "on_holiday": "next-business-day", "dst_gap": "skip"}  # fmt: skip
    submitted = web.post("/api/v1/jobs", json={"task": "http", "args": {"url": "https://example.com"},
                         "schedule": schedule}, headers=tenant)  # fmt: skip
    assert submitted.status_code == 201, submitted.text
    shown = submitted.json()
    assert shown["schedule"]["calendar"] == "de-by"
    assert "calendar_def" not in shown["schedule"]
    assert any("does not exist on" in w for w in shown["warnings"])
    detail = web.get(f"/api/v1/jobs/{shown['id']}?n=30", headers=tenant).json()
    assert detail["next_fire_times"] == [u["at"] for u in detail["upcoming"] if u["run"]]

    patched = web.patch("/api/v1/calendars/de-by", json={"remove": ["2030-12-24"]}, headers=admin)
    assert patched.status_code == 200
    assert patched.json()["replanned"] == [shown["id"]]
    in_use = web.delete("/api/v1/calendars/de-by", headers=admin)
    assert in_use.status_code == 409
    assert f"1 job(s) use it ({shown['id']})" in in_use.text


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        ({"cron": "0 9 * * *", "calendar": "nope"}, "calendar"),
        ({"cron": "0 9 * * *", "dst_repeat": "thrice"}, "dst_repeat"),
        (
            {
                "cron": "0 9 * * *",
                "calendar": "de",
                "business_days_only": True,
                "on_holiday": "skip",
            },
            "business_days_only",
        ),
        ({"every": 60, "dst_gap": "skip"}, "dst_gap"),
    ],
)
def test_api_bad_rules_are_4xx_and_submit_nothing(
    web: TestClient, admin_key: str, store: Store, schedule: dict[str, object], field: str
) -> None:
    store.create_calendar(make_calendar("de", country="DE"))
    body = {"task": "http", "args": {"url": "https://example.com"}, "schedule": schedule}
    answer = web.post("/api/v1/jobs", json=body, headers={"Authorization": f"Bearer {admin_key}"})
    assert 400 <= answer.status_code < 500, answer.text
    assert field in answer.text
    assert store.list_jobs().items == []


def test_api_bad_calendar_is_400_and_writes_nothing(
    web: TestClient, admin_key: str, store: Store
) -> None:
    admin = {"Authorization": f"Bearer {admin_key}"}
    answer = web.put("/api/v1/calendars/xx", json={"country": "ZZ"}, headers=admin)
    assert answer.status_code == 400
    assert "unknown country 'ZZ'" in answer.text
    assert web.get("/api/v1/calendars/xx", headers=admin).status_code == 404
    assert store.list_calendars() == []


# -- Python -----------------------------------------------------------------------------------


def test_app_schedule_warns_of_dst_changes_with_a_dedicated_warning(store: Store) -> None:
    app = App(store.url)
    try:
        with pytest.warns(DstWarning) as caught:
            job = app.schedule("shell", cron="30 2 * * *", tz="Europe/Berlin", name="n",
                               args={"argv": ["true"]}, dst_gap="run-after")  # fmt: skip
        messages = [str(w.message) for w in caught]
        assert len(messages) == 2
        assert re.search(r"02:30 does not exist on \d{4}-03-\d\d \(DST starts\)", messages[0])
        assert job.id
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            app.schedule("shell", cron="0 9 * * *", tz="Europe/Berlin", name="quiet",
                         args={"argv": ["true"]})  # fmt: skip
    finally:
        app.close()


def test_app_schedule_bad_rules_raise_typed_errors_and_write_nothing(store: Store) -> None:
    app = App(store.url)
    try:
        with pytest.raises(UnknownCalendar):
            app.schedule("shell", cron="0 9 * * *", calendar="nope", args={"argv": ["true"]})
        with pytest.raises(ValidationError, match="business_days_only is short"):
            app.schedule("shell", cron="0 9 * * *", calendar="x", business_days_only=True,
                         business_day=-1, args={"argv": ["true"]})  # fmt: skip
        with pytest.raises(InvalidCalendar, match="unknown country"):
            app.client.create_calendar("x", country="XX")
        assert store.list_jobs().items == []
        assert store.list_calendars() == []
    finally:
        app.close()
