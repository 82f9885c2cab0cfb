"""Every query parameter a dashboard page reads goes through the JSON API's checks (one
definition each, in ``tickwork.web.params``): a value the API answers 422 is a 4xx page on
the dashboard that names the parameter and says what is wrong, in the API's words; never a
500. On both stores: PostgreSQL text cannot hold a NUL, SQLite's can."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest
from api_support import bearer
from fastapi.testclient import TestClient

from tickwork.client import Client
from tickwork.job import MAX_NAME_LENGTH
from tickwork.web.app import create_app

BAD_TEXT = {
    "nul": "a\x00b",
    "escape": "\x1b[31mred",
    "delete": "a\x7fb",
    "too long": "x" * 5000,
}
"""Values no query text may hold (the API's 422s): the NUL the issue found, another C0
control, DEL, and a value past every length limit."""

PAGES = {
    "/jobs": ("task", "q", "after"),
    "/fragments/jobs": ("task", "q", "after"),
    "/runs": ("task", "queue", "tenant", "since", "until", "after", "count"),
    "/fragments/runs": ("task", "queue", "tenant", "since", "until", "after"),
    "/bulk/retry": ("task", "queue", "tenant", "since", "until"),
    "/bulk/cancel": ("task", "queue", "tenant", "since", "until"),
    "/dead": ("after",),
    "/fragments/dead": ("after",),
    "/activity": ("queue",),
    "/fragments/activity": ("queue",),
}
"""Each page with the query parameters it reads that are free text or a cursor (states,
ranges and windows are choices, refused by name already)."""

SAME_AS_API = [
    ("/jobs", "task", "/api/v1/jobs", "task"),
    ("/jobs", "q", "/api/v1/jobs", "search"),
    ("/jobs", "after", "/api/v1/jobs", "after"),
    ("/runs", "task", "/api/v1/runs", "task"),
    ("/runs", "queue", "/api/v1/runs", "queue"),
    ("/runs", "tenant", "/api/v1/runs", "tenant"),
    ("/runs", "since", "/api/v1/runs", "since"),
    ("/runs", "until", "/api/v1/runs", "until"),
    ("/runs", "after", "/api/v1/runs", "after"),
    ("/dead", "after", "/api/v1/dead", "after"),
    ("/activity", "queue", "/api/v1/minutes", "queue"),
]
"""(page, its parameter, the API endpoint, the API's name for it)."""


@pytest.fixture
def admin(client: Client, admin_key: str) -> Iterator[TestClient]:
    with TestClient(create_app(client, open_access=False), headers=bearer(admin_key)) as web:
        yield web


def page_message(answer_text: str) -> str:
    """The error page's message (``<p class="note error">``), unescaped."""
    found = re.search(r'<p class="note error"[^>]*>(.*?)</p>', answer_text, re.DOTALL)
    assert found, answer_text[:2000]
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip()


@pytest.mark.parametrize("value", BAD_TEXT.values(), ids=BAD_TEXT.keys())
@pytest.mark.parametrize(
    ("path", "name"), [(path, name) for path, names in PAGES.items() for name in names]
)
def test_a_bad_query_value_is_a_4xx_page_naming_the_parameter(
    admin: TestClient, path: str, name: str, value: str
) -> None:
    answer = admin.get(path, params={name: value})

    assert answer.status_code == 400, answer.text[:2000]
    assert answer.headers["content-type"].startswith("text/html")
    assert page_message(answer.text).lower().startswith(f"{name}: ")


@pytest.mark.parametrize("value", BAD_TEXT.values(), ids=BAD_TEXT.keys())
@pytest.mark.parametrize("pair", SAME_AS_API, ids=[f"{p}?{n}" for p, n, _, _ in SAME_AS_API])
def test_the_dashboard_refuses_what_the_api_refuses_in_the_same_words(
    admin: TestClient, pair: tuple[str, str, str, str], value: str
) -> None:
    path, name, endpoint, field = pair
    api = admin.get(endpoint, params={field: value})
    page = admin.get(path, params={name: value})

    assert api.status_code == 422, api.text
    assert api.json()["error"]["field"] == field
    assert page.status_code == 400, page.text[:2000]
    said_by_api = api.json()["error"]["message"].partition(": ")[2]
    said_by_page = page_message(page.text).partition(": ")[2]
    assert said_by_page.rstrip(".").lower() == said_by_api.rstrip(".").lower()


def test_the_issues_two_cases_are_400_pages_that_say_what_was_wrong(admin: TestClient) -> None:
    activity = admin.get("/activity?queue=%00")
    jobs = admin.get("/jobs?task=%00")

    for answer, name in ((activity, "queue"), (jobs, "task")):
        assert answer.status_code == 400, answer.text[:2000]
        message = page_message(answer.text)
        assert message.lower().startswith(f"{name}: ")
        assert "control character" in message
        assert "U+0000" in message


def test_a_control_character_in_the_api_is_named_too(admin: TestClient) -> None:
    answer = admin.get("/api/v1/jobs", params={"task": "a\x1bb"})

    assert answer.status_code == 422
    assert answer.json()["error"] == {
        "code": "unprocessable",
        "message": "task: holds a control character (U+001B)",
        "field": "task",
    }


def test_a_name_at_the_length_limit_still_filters(admin: TestClient, client: Client) -> None:
    client.submit("http", args={"url": "https://example.com/"}, queue="q" * MAX_NAME_LENGTH)

    answer = admin.get("/runs", params={"queue": "q" * MAX_NAME_LENGTH})

    assert answer.status_code == 200


def test_an_empty_filter_from_the_form_means_no_filter(admin: TestClient) -> None:
    for path in (
        "/jobs?state=&task=&q=",
        "/runs?state=&task=&queue=&since=&until=",
        "/activity?queue=",
    ):
        assert admin.get(path).status_code == 200, path


def test_a_bad_notice_on_the_runs_page_is_refused_like_any_parameter(admin: TestClient) -> None:
    answer = admin.get("/runs", params={"done": "nonsense", "count": "3"})

    assert answer.status_code == 400
    assert page_message(answer.text).startswith("Done must be one of retry, cancel")


def test_explain_at_a_slot_past_the_apis_limit_says_so_on_the_job_page(
    admin: TestClient, client: Client
) -> None:
    job = client.submit("http", args={"url": "https://example.com/"}, cron="0 9 * * *").job

    api = admin.get(f"/api/v1/jobs/{job.id}/explain", params={"at": "2030" + "0" * 200})
    page = admin.get(f"/jobs/{job.id}", params={"at": "2030" + "0" * 200})

    assert api.status_code == 422
    assert page.status_code == 200  # the job page still shows, the explain box says why
    assert "at: string should have at most 100 characters" in html.unescape(page.text).lower()
