"""The dashboard in a real browser: Debian's Chromium, driven by Playwright, against a real
``tickwork api`` process on a real store.

Never ``playwright install``: the tests drive ``/usr/bin/chromium`` (``apt-get install -y
chromium``). Without it they skip locally and fail under ``CI``, so a CI box without a
browser can never pass them silently.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest
from api_support import execute
from playwright.sync_api import Browser, ConsoleMessage, Locator, Page, expect, sync_playwright

from tickwork.client import Client
from tickwork.job import RunState
from tickwork.store import open_store

pytestmark = pytest.mark.slow  # a tickwork api process and a browser per test

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STARTUP_TIMEOUT = 30.0
"""Seconds ``tickwork api`` may take to print its ready line (a loaded CI box)."""
STOP_TIMEOUT = 20.0
EXPECT_TIMEOUT_MS = 10_000
"""How long an action waits for its element."""
LIVE_TIMEOUT_MS = 15_000
"""How long a test waits for the live refresh, which fires every 5 s."""
READY = re.compile(r"ready on (?P<url>http://\S+)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing: apt-get install -y chromium (never playwright install)"
        if os.environ.get("CI"):
            pytest.fail(f"the dashboard's browser tests need Chromium under CI: {reason}")
        pytest.skip(reason)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Server:
    """A ``tickwork api`` child process; its output is collected for failure messages."""

    process: subprocess.Popen[str]
    url: str = ""
    output: list[str] = field(default_factory=list)


@contextmanager
def tickwork_api(db_url: str) -> Iterator[Server]:
    """``python -m tickwork api --db URL --port 0`` until it says where it listens; SIGTERM
    after, and it must exit 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "tickwork", "api", "--db", db_url, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )
    server = Server(process)
    ready = threading.Event()
    reader = threading.Thread(target=_read, args=(process.stdout, server, ready), daemon=True)
    reader.start()
    try:
        if not ready.wait(STARTUP_TIMEOUT) or not server.url:
            raise AssertionError(f"tickwork api did not start: {''.join(server.output)}")
        yield server
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=STOP_TIMEOUT) == 0, "".join(server.output)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(timeout=STOP_TIMEOUT)
        if process.stdout is not None:
            process.stdout.close()


def _read(stream: IO[str] | None, server: Server, ready: threading.Event) -> None:
    assert stream is not None
    for line in stream:
        server.output.append(line)
        if not server.url and (match := READY.search(line)):
            server.url = match.group("url").rstrip(")")
            ready.set()
    ready.set()  # the process ended: stop waiting


@pytest.fixture
def client(store_url: str) -> Iterator[Client]:
    """The test's own client on the server's store, to set up records and check results."""
    opened = Client(open_store(store_url))
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def key(client: Client) -> str:
    """A key of the ``default`` tenant; with a key defined, the server requires one."""
    return client.create_api_key(tenant="default")[1]


@pytest.fixture
def server(store_url: str, key: str) -> Iterator[Server]:
    with tickwork_api(store_url) as running:
        yield running


@pytest.fixture
def console_errors() -> list[str]:
    """Errors the page logs (a script the CSP blocked, a failed request ...). The test
    fails if any is left at its end; a test that causes one on purpose removes it."""
    return []


@pytest.fixture
def page(browser: Browser, server: Server, console_errors: list[str]) -> Iterator[Page]:
    """A fresh browser profile on the server."""
    context = browser.new_context(base_url=server.url)
    context.set_default_timeout(EXPECT_TIMEOUT_MS)
    opened = context.new_page()

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            console_errors.append(message.text)

    opened.on("console", on_console)
    opened.on("pageerror", lambda exc: console_errors.append(str(exc)))
    try:
        yield opened
    finally:
        context.close()
    assert not console_errors, console_errors


def dead_run(client: Client) -> int:
    """A dead run made as a worker makes one: a job due now with one attempt, claimed,
    failed."""
    submitted = client.submit("http", args={"url": "https://example.com/"}, max_attempts=1)
    assert submitted.run is not None
    (claimed,) = client.store.claim("test-worker", limit=1)
    client.store.fail(claimed.id, claimed.fencing_token, "HTTP 503 from example.com")
    assert client.get_run(claimed.id).state is RunState.DEAD
    return claimed.id


def sign_in(page: Page, key: str) -> None:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login$"))
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()


def test_sign_in_open_a_job_and_retry_its_dead_run_with_the_button(
    page: Page, client: Client, key: str
) -> None:
    run_id = dead_run(client)
    job_id = client.get_run(run_id).job_id

    sign_in(page, key)
    expect(page.locator('[data-state="dead"] .value')).to_have_text("1")
    expect(page.locator("#leader")).to_contain_text("none")

    page.get_by_role("link", name="Jobs", exact=True).click()
    page.get_by_role("link", name=str(job_id), exact=True).click()
    expect(page).to_have_url(re.compile(rf"/jobs/{job_id}$"))
    expect(page.get_by_role("heading", name=f"Job {job_id}", level=1)).to_be_visible()
    run_row = page.locator(f'#runs tr[data-run-id="{run_id}"]')
    expect(run_row).to_contain_text("dead")
    expect(page.locator(f'[data-run-detail="{run_id}"]')).to_contain_text("HTTP 503")

    page.get_by_role("link", name="Dead letter").click()
    row = page.locator(f"#run-{run_id}")
    expect(row).to_contain_text("HTTP 503 from example.com")
    page.evaluate("window.__stayed = true")  # gone if the click reloaded the page
    row.get_by_role("button", name="Retry").click()

    expect(row).to_contain_text("Retried: queued")
    expect(row.get_by_role("button", name="Retry")).to_have_count(0)
    assert page.evaluate("window.__stayed === true")  # htmx swapped the row in place
    assert client.get_run(run_id).state is RunState.QUEUED

    page.goto(f"/jobs/{job_id}")
    expect(run_row).to_contain_text("queued")


def test_the_retry_button_works_without_javascript(
    browser: Browser, server: Server, client: Client, key: str
) -> None:
    run_id = dead_run(client)
    context = browser.new_context(base_url=server.url, java_script_enabled=False)
    context.set_default_timeout(EXPECT_TIMEOUT_MS)
    try:
        page = context.new_page()
        sign_in(page, key)
        page.goto("/dead")

        page.locator(f"#run-{run_id}").get_by_role("button", name="Retry").click()

        expect(page).to_have_url(re.compile(r"/dead$"))
        expect(page.locator(f"#run-{run_id}")).to_have_count(0)
        expect(page.get_by_text("The dead letter is empty.")).to_be_visible()
        assert client.get_run(run_id).state is RunState.QUEUED
    finally:
        context.close()


def test_the_overview_refreshes_itself(page: Page, client: Client, key: str) -> None:
    sign_in(page, key)
    dead = page.locator('[data-state="dead"] .value')
    expect(dead).to_have_text("0")
    page.evaluate("window.__stayed = true")  # gone if the page reloaded

    dead_run(client)

    # htmx re-fetches /fragments/overview every 5 s.
    expect(dead).to_have_text("1", timeout=LIVE_TIMEOUT_MS)
    assert page.evaluate("window.__stayed === true")
    expect(page.get_by_role("heading", name="Overview", level=1)).to_have_count(1)


def test_signing_out_returns_to_the_sign_in_form(page: Page, key: str) -> None:
    sign_in(page, key)

    page.get_by_role("button", name="Sign out").click()

    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto("/jobs")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Fjobs$"))


def test_a_key_revoked_while_the_page_is_open_leads_to_the_sign_in_form(
    page: Page, client: Client, key: str, console_errors: list[str]
) -> None:
    sign_in(page, key)

    client.revoke_api_key(key)

    # The next refresh answers 401 with HX-Redirect, and htmx leaves for the form.
    expect(page).to_have_url(re.compile(r"/login$"), timeout=LIVE_TIMEOUT_MS)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    console_errors[:] = [e for e in console_errors if "status of 401" not in e]


def test_a_retry_that_another_operator_beat_says_so_in_the_row(
    page: Page, client: Client, key: str, console_errors: list[str]
) -> None:
    run_id = dead_run(client)
    sign_in(page, key)
    page.goto("/dead")
    row = page.locator(f"#run-{run_id}")
    expect(row.get_by_role("button", name="Retry")).to_be_visible()

    client.retry_run(run_id)  # someone else, while this page is open
    row.get_by_role("button", name="Retry").click()

    # The 409 answer is the row with the reason, swapped in place (htmx's responseHandling).
    expect(row).to_contain_text("Not retried: it is queued.")
    # Chromium logs every 4xx answer; htmx itself logs none for this one (error: false).
    console_errors[:] = [e for e in console_errors if "status of 409" not in e]


def test_a_one_off_job_whose_run_died_is_shown_red_with_nothing_to_run_or_cancel(
    page: Page, client: Client, key: str
) -> None:
    job_id = client.get_run(dead_run(client)).job_id
    sign_in(page, key)

    page.goto("/jobs")
    badge = page.locator(f'#jobs tr[data-job-id="{job_id}"] .state')
    expect(badge).to_have_text("dead")
    page.goto(f"/jobs/{job_id}")
    job_badge = page.locator("#job-state .state")
    run_badge = page.locator("#runs .state-dead")

    expect(job_badge).to_have_text("dead")
    # Coloured as the dead run is (a failure), not as a success.
    assert colour(job_badge) == colour(run_badge)
    assert colour(job_badge) != colour(job_badge, ok=True)
    expect(page.get_by_role("button", name="Run now")).to_have_count(0)
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)


def test_a_name_with_a_right_to_left_override_does_not_reverse_the_list(
    page: Page, client: Client, key: str, store_url: str
) -> None:
    job_id = client.schedule("http", name="invoice", every=60, args={"url": "https://e.x/"}).job.id
    execute(  # submit refuses the control today; a row written before that holds it
        store_url,
        "UPDATE tickwork_jobs SET name = :name WHERE id = :id",
        name="invoice\u202efdp.exe",
        id=job_id,
    )
    sign_in(page, key)

    page.goto("/jobs")
    name = page.locator(f'#jobs tr[data-job-id="{job_id}"] bdi')

    expect(name).to_have_text("invoice[U+202E]fdp.exe")
    # Laid out left to right as written: "f" of "fdp" before "x" of "exe". An obeyed
    # override would draw "exe.pdf", with "x" first.
    assert char_left(name, "f") < char_left(name, "x")


def colour(locator: Locator, *, ok: bool = False) -> str:
    """The computed text colour of the element (``ok``: of a succeeded badge instead, made
    on the page for comparison)."""
    if ok:
        return str(
            locator.page.evaluate(
                """() => { const s = document.createElement("span");
                s.className = "state state-succeeded"; document.body.append(s);
                const c = getComputedStyle(s).color; s.remove(); return c; }"""
            )
        )
    return str(locator.evaluate("el => getComputedStyle(el).color"))


def char_left(locator: Locator, char: str) -> float:
    """Where the first ``char`` of the element's text is drawn (px from the left)."""
    return float(
        locator.evaluate(
            """(el, ch) => { const node = el.firstChild; const i = node.data.indexOf(ch);
            const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
            return r.getBoundingClientRect().left; }""",
            char,
        )
    )


def test_an_admin_sets_a_tenants_limits_from_the_tenants_page(page: Page, client: Client) -> None:
    admin = client.create_api_key(tenant="ops", admin=True)[1]
    client.set_tenant_limits("acme", max_running=2)
    sign_in(page, admin)

    page.get_by_role("link", name="Tenants").click()
    expect(page.get_by_role("heading", name="Tenants", level=1)).to_be_visible()
    expect(page.locator('#tenants tr[data-tenant="acme"]')).to_contain_text("2")
    form = page.locator("#limits")
    form.get_by_label("Tenant").fill("globex")
    form.get_by_label("Rate").fill("30/m")
    form.get_by_label("Burst").fill("4")
    form.get_by_role("button", name="Save limits").click()

    expect(page).to_have_url(re.compile(r"/tenants/globex$"))
    expect(page.locator("#tenant")).to_contain_text("30/m, burst 4")
    assert client.tenant("globex").limits.rate == 0.5

    page.locator("#limits").get_by_label("Max running").fill("5")
    page.locator("#limits").get_by_label("Rate").fill("")  # clears the rate (and burst)
    page.locator("#limits").get_by_label("Burst").fill("")
    page.locator("#limits").get_by_role("button", name="Save limits").click()
    expect(page.locator("#tenant")).not_to_contain_text("30/m")
    limits = client.tenant("globex").limits
    assert (limits.max_running, limits.rate, limits.burst) == (5, None, None)


def test_a_tenant_sees_its_own_limits_and_no_form(page: Page, client: Client, key: str) -> None:
    client.set_tenant_limits("default", max_running=4)
    client.set_tenant_limits("acme", max_running=2)
    sign_in(page, key)

    page.get_by_role("link", name="Tenants").click()
    expect(page.locator("#tenants tbody tr")).to_have_count(1)
    expect(page.locator('#tenants tr[data-tenant="default"]')).to_contain_text("4")
    expect(page.locator("#limits")).to_have_count(0)
