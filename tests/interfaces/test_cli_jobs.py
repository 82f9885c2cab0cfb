"""``tickwork jobs``, ``show`` and ``runs`` in real processes against a real store: filters,
cursor paging, one JSON document with ``--json``, a table otherwise."""

from __future__ import annotations

from datetime import datetime, timedelta

from cli_support import ok, submit, trigger_at

from tickwork.store import Store


def test_jobs_lists_newest_first_and_filters_by_state_tenant_and_task(store: Store) -> None:
    backup = submit(store, cron="0 3 * * *", name="backup", tenant="acme")
    hook = submit(store, task="http", args={"url": "https://example.com"}, every="1h")
    paused = submit(store, every="30s", tenant="acme")
    store.pause_job(paused.id)

    listed = ok("jobs", "--db", store.url, "--json").json()
    assert [job["id"] for job in listed] == [paused.id, hook.id, backup.id]

    def ids(*argv: str) -> list[int]:
        return [job["id"] for job in ok("jobs", "--db", store.url, "--json", *argv).json()]

    assert ids("--tenant", "acme") == [paused.id, backup.id]
    assert ids("--state", "paused") == [paused.id]
    assert ids("--task", "http") == [hook.id]
    assert ids("--tenant", "acme", "--state", "active") == [backup.id]
    assert ids("--tenant", "nobody") == []


def test_jobs_json_is_one_list_of_complete_jobs(store: Store) -> None:
    job = submit(store, cron="*/5 * * * *", tz="Europe/Berlin", name="backup", overlap="forbid")

    (listed,) = ok("jobs", "--db", store.url, "--json").json()

    assert listed["id"] == job.id
    assert listed["schedule"] == {"kind": "cron", "expr": "*/5 * * * *", "tz": "Europe/Berlin"}
    assert (listed["name"], listed["tenant"], listed["task"]) == ("backup", "default", "shell")
    assert (listed["state"], listed["overlap"], listed["misfire"]) == ("active", "forbid", "once")
    assert listed["args"] == {"argv": ["true"]}
    assert datetime.fromisoformat(listed["next_run_at"]) == job.next_run_at
    assert listed["misfire_grace"] == 60.0


def test_jobs_pages_with_limit_and_after(store: Store) -> None:
    made = [submit(store, every="1h").id for _ in range(5)]
    newest_first = made[::-1]

    first = ok("jobs", "--db", store.url, "--json", "--limit", "2").json()
    second = ok("jobs", "--db", store.url, "--json", "-n", "2", "--after", str(first[-1]["id"]))
    rest = ok("jobs", "--db", store.url, "--json", "--after", str(second.json()[-1]["id"]))

    assert [j["id"] for j in first] == newest_first[:2]
    assert [j["id"] for j in second.json()] == newest_first[2:4]
    assert [j["id"] for j in rest.json()] == newest_first[4:]


def test_jobs_table_has_a_header_a_row_per_job_and_the_next_page_hint(store: Store) -> None:
    older = submit(store, cron="0 3 * * *", name="backup")
    newer = submit(store, every="30s", tenant="acme")

    lines = ok("jobs", "--db", store.url).out.strip().splitlines()
    assert lines[0].split() == ["JOB", "NAME", "TENANT", "TASK", "STATE", "SCHEDULE", "NEXT", "RUN"]
    assert lines[1].split()[:5] == [str(newer.id), "acme", "shell", "active", "every"]
    assert lines[2].split()[:6] == [str(older.id), "backup", "default", "shell", "active", "cron"]

    cut = ok("jobs", "--db", store.url, "--limit", "1").out.strip().splitlines()
    assert cut[-1] == f"(first 1; for more: --after {newer.id})"
    assert ok("jobs", "--db", store.url, "--state", "cancelled").out.strip() == "(none)"


def test_show_json_has_the_job_its_schedule_next_fire_times_runs_and_ledger(
    store: Store,
) -> None:
    hour = store.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    job = submit(store, now=hour, cron="*/10 * * * *", misfire="skip")
    # A scheduler that was down for half an hour: 10, 20 misfire, 30 runs.
    (run,) = trigger_at(store, hour + timedelta(minutes=30, seconds=1))

    shown = ok("show", str(job.id), "--db", store.url, "--json").json()

    assert set(shown) == {"job", "schedule", "next_fire_times", "upcoming", "runs", "slot_ledger"}
    assert shown["job"]["id"] == job.id
    assert shown["schedule"] == "Every 10th minute of every hour (UTC)"
    fire_times = [datetime.fromisoformat(t) for t in shown["next_fire_times"]]
    assert len(fire_times) == 5
    assert fire_times == sorted(fire_times)
    assert fire_times[0] > store.now() - timedelta(seconds=5)
    assert all(t.minute % 10 == 0 and t.second == 0 for t in fire_times)
    assert [r["id"] for r in shown["runs"]] == [run.id]
    (skip,) = shown["slot_ledger"]
    assert (skip["fate"], skip["count"]) == ("misfire", 2)
    assert datetime.fromisoformat(skip["first_slot"]) == hour + timedelta(minutes=10)


def test_show_a_one_off_job_fires_once_at_its_time(store: Store) -> None:
    at = (store.now() + timedelta(days=1)).replace(microsecond=0)
    job = submit(store, at=at)

    shown = ok("show", str(job.id), "--db", store.url, "--json").json()

    assert shown["next_fire_times"] == [at.isoformat()]
    assert shown["runs"] == []
    assert shown["schedule"] == f"once at {at.isoformat()}"


def test_show_prints_the_job_in_plain_english(store: Store) -> None:
    job = submit(store, cron="0 9 * * MON-FRI", tz="Europe/Berlin", name="report")
    store.trigger_job(job.id)

    out = ok("show", str(job.id), "--db", store.url).out

    assert out.startswith(f"Job {job.id} (report)\n")
    assert "At 09:00 on Monday through Friday (Europe/Berlin)" in out
    assert "[cron 0 9 * * MON-FRI Europe/Berlin]" in out
    assert "Next fire times (Europe/Berlin)" in out
    assert "  next run   " in out
    assert any(
        line.startswith("  next run ") and line.endswith(("CET", "CEST"))
        for line in out.splitlines()
    )
    assert "Latest runs" in out
    assert "Skipped slots: none" in out


def test_runs_filters_by_job_and_state_and_pages_like_jobs(store: Store) -> None:
    job = submit(store, every="1h")
    other = submit(store, every="1h")
    made = [store.trigger_job(job.id, now=store.now() + timedelta(seconds=i)).id for i in range(4)]
    store.trigger_job(other.id)
    store.cancel_run(made[0])

    def ids(*argv: str) -> list[int]:
        return [run["id"] for run in ok("runs", "--db", store.url, "--json", *argv).json()]

    assert ids("--job", str(job.id)) == made[::-1]
    assert ids("--job", str(job.id), "--state", "cancelled") == [made[0]]
    assert ids("--job", str(job.id), "--state", "queued", "--limit", "2") == made[:0:-1][:2]
    assert ids("--job", str(job.id), "--after", str(made[2])) == [made[1], made[0]]
    for state in ("running", "succeeded", "failed", "dead"):
        assert ids("--state", state) == []
