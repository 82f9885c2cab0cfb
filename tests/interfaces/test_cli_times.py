"""Times in the CLI: every one with its zone, a schedule's in its own zone, no sub-second
digits where they say nothing; explain --run for a one-off; explain's future tense; what a
business-day rule does, in English."""

from __future__ import annotations

import re
from datetime import timedelta

from cli_support import ok, submit

from tickwork.client import Client
from tickwork.store import Store

TABLE_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (UTC|CET|CEST)")


def test_show_of_a_berlin_job_gives_its_times_in_berlin_with_the_zone(store: Store) -> None:
    job = submit(store, cron="0 9 * * *", tz="Europe/Berlin")
    out = ok("show", str(job.id), "--db", store.url).out
    fires = out.split("Next fire times (Europe/Berlin)\n")[1].split("\n\n")[0].splitlines()
    assert len(fires) == 5
    for line in fires:
        assert re.fullmatch(r"  \d{4}-\d\d-\d\dT09:00:00\+0[12]:00", line), line
    (next_run,) = [line for line in out.splitlines() if line.startswith("  next run ")]
    assert re.search(r" 09:00:00 CES?T$", next_run), next_run


def test_a_one_off_shows_no_microseconds_and_every_table_time_has_a_zone(store: Store) -> None:
    job = submit(store, delay=timedelta(minutes=10), now=store.now())
    out = ok("show", str(job.id), "--db", store.url).out
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", out), out
    listed = ok("jobs", "--db", store.url).out.splitlines()[1]
    assert len(TABLE_TIME.findall(listed)) == 2, listed  # the schedule and the next run
    store.trigger_job(job.id)
    row = ok("runs", "--db", store.url).out.splitlines()[1]
    assert TABLE_TIME.search(row), row


def test_explain_run_explains_a_one_off_at_its_own_slot(store: Store) -> None:
    job = submit(store, delay=timedelta(minutes=10))
    run = store.trigger_job(job.id)
    by_run = ok("explain", "--run", str(run.id), "--db", store.url, "--json").json()
    assert by_run["job_id"] == job.id
    assert by_run["run_id"] == run.id
    text = ok("jobs", "explain", "--run", str(run.id), "--db", store.url).out
    assert f"run {run.id} is queued" in text
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", text), text


def test_explain_speaks_of_a_cancelled_jobs_future_slot_in_the_future(store: Store) -> None:
    job = submit(store, cron="0 9 * * *")
    store.cancel_job(job.id)
    text = ok("explain", str(job.id), "--at", "2099-01-01T09:00Z", "--db", store.url).out
    assert "will not run at 2099-01-01T09:00:00+00:00: the job was cancelled" in text


def test_a_business_day_rule_reads_as_what_happens(store: Store) -> None:
    with Client.open(store.url) as client:
        client.create_calendar("de", country="DE")
    argv = ("next", "@monthly", "--tz", "Europe/Berlin", "--calendar", "de", "--db", store.url)
    last = ok(*argv, "--business-day", "-1").out.strip().splitlines()[-1]
    assert last == "At 00:00 on the last business day of every month in calendar de (Europe/Berlin)"
