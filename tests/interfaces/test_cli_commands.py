"""``tickwork cancel|pause|resume|trigger|retry`` and ``dead`` in real processes: each
changes one job or run and says what it is now; a refused change exits 1 and writes
nothing."""

from __future__ import annotations

from cli_support import assert_error, dead_run, ok, snapshot, submit, tickwork

from tickwork.job import JobState, RunState
from tickwork.store import Store


def test_pause_and_resume_a_job(store: Store) -> None:
    job = submit(store, every="1h")

    assert ok("pause", str(job.id), "--db", store.url).out == f"job {job.id} is paused\n"
    assert store.get_job(job.id).state is JobState.PAUSED
    assert ok("pause", str(job.id), "--db", store.url).out == f"job {job.id} is paused\n"

    resumed = ok("resume", str(job.id), "--db", store.url, "--json").json()
    assert (resumed["id"], resumed["state"]) == (job.id, "active")
    assert store.get_job(job.id).state is JobState.ACTIVE


def test_cancel_a_job_cancels_its_waiting_runs(store: Store) -> None:
    job = submit(store, every="1h")
    waiting = store.trigger_job(job.id)

    assert ok("cancel", str(job.id), "--db", store.url).out == f"job {job.id} is cancelled\n"

    assert store.get_job(job.id).state is JobState.CANCELLED
    assert store.get_run(waiting.id).state is RunState.CANCELLED


def test_cancel_run_cancels_one_run_only(store: Store) -> None:
    job = submit(store, every="1h")
    run = store.trigger_job(job.id)

    cancelled = ok("cancel", "--run", str(run.id), "--db", store.url, "--json").json()

    assert (cancelled["id"], cancelled["state"]) == (run.id, "cancelled")
    assert store.get_job(job.id).state is JobState.ACTIVE


def test_trigger_queues_one_run_now_and_prints_its_id_last(store: Store) -> None:
    job = submit(store, cron="0 3 * * *")
    before = store.get_job(job.id)

    result = ok("trigger", str(job.id), "--db", store.url)

    run = store.get_run(int(result.last_line))
    assert result.out.startswith(f"triggered job {job.id}: run {run.id} is queued\n")
    assert (run.job_id, run.state) == (job.id, RunState.QUEUED)
    assert store.get_job(job.id).next_run_at == before.next_run_at  # the schedule is untouched


def test_dead_lists_the_dead_letter_runs_and_retry_queues_one_again(store: Store) -> None:
    job = submit(store, every="1h")
    dead = dead_run(store, job.id)
    store.trigger_job(job.id)  # queued: not dead

    listed = ok("dead", "--db", store.url, "--json").json()
    assert [(r["id"], r["state"], r["error"]) for r in listed] == [
        (dead.id, "dead", "boom\nTraceback ...")
    ]
    table = ok("dead", "--db", store.url).out.strip().splitlines()
    assert table[0].split()[:4] == ["RUN", "JOB", "TASK", "STATE"]
    assert table[1].split()[:4] == [str(dead.id), str(job.id), "shell", "dead"]
    assert table[1].split()[-1] == "boom"  # the first line of the error only

    retried = ok("retry", str(dead.id), "--db", store.url)

    assert retried.out == f"run {dead.id} of job {job.id} is queued\n"
    run = store.get_run(dead.id)
    assert (run.state, run.attempt) == (RunState.QUEUED, 1)
    assert ok("dead", "--db", store.url, "--json").json() == []
    assert ok("dead", "--db", store.url).out == "(none)\n"


def test_dead_filters_by_tenant_and_pages(store: Store) -> None:
    first = dead_run(store)
    second = dead_run(store)
    acme = dead_run(store, submit(store, every="1h", tenant="acme").id)

    def ids(*argv: str) -> list[int]:
        return [run["id"] for run in ok("dead", "--db", store.url, "--json", *argv).json()]

    assert ids() == [acme.id, second.id, first.id]
    assert ids("--tenant", "default") == [second.id, first.id]
    assert ids("--limit", "1", "--after", str(acme.id)) == [second.id]


def test_refused_transitions_exit_1_and_change_nothing(store: Store) -> None:
    cancelled = submit(store, every="1h")
    store.cancel_job(cancelled.id)
    live = submit(store, every="1h")
    queued = store.trigger_job(live.id)
    finished = store.cancel_run(store.trigger_job(live.id).id)
    before = snapshot(store)

    refused = [
        (["pause", str(cancelled.id)], f"cannot pause job {cancelled.id}: it is cancelled"),
        (["resume", str(cancelled.id)], f"cannot resume job {cancelled.id}: it is cancelled"),
        (["trigger", str(cancelled.id)], f"cannot trigger job {cancelled.id}: it is cancelled"),
        (["retry", str(queued.id)], f"cannot retry run {queued.id}: it is queued"),
        (["cancel", "--run", str(finished.id)], f"cannot cancel run {finished.id}: it is"),
    ]
    for argv, message in refused:
        assert_error(tickwork(*argv, "--db", store.url), 1, message)

    assert snapshot(store) == before
