"""Every new command refuses bad input the same way: exit 2 (bad input) or 1 (an unknown
id), one ``tickwork: error:`` line on stderr, nothing on stdout, and nothing written:
bad input does not even create the database file."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import assert_error, dead_run, snapshot, submit, tickwork

from tickwork.store import Store

TOO_BIG = str(2**63)  # no store can hold such an id

BAD_INPUT = [
    (["jobs", "--state", "done"], "state must be one of scheduled, queued, running, failed"),
    (["jobs", "--state", "completed"], "job state 'completed' is gone: a one-off job now says"),
    (["jobs", "--limit", "0"], "--limit"),
    (["jobs", "--after", "x"], "'--after'"),
    (["jobs", "--after", TOO_BIG], "after 9223372036854775808 is out of range"),
    (["runs", "--state", "finished"], "state must be one of queued, running, succeeded"),
    (["runs", "--job", "x"], "'--job'"),
    (["runs", "--job", TOO_BIG], "out of range"),
    (["dead", "--limit", "100000"], "--limit"),
    (["show", "abc"], "Invalid value for 'JOB_ID'"),
    (["show", TOO_BIG], "out of range"),
    (["show"], "Missing argument 'JOB_ID'"),
    (["cancel", "1.5"], "Invalid value for 'JOB_ID'"),
    (["cancel", "--run", TOO_BIG], "run 9223372036854775808 is out of range"),
    (["pause", "one"], "Invalid value for 'JOB_ID'"),
    (["resume", ""], "Invalid value for 'JOB_ID'"),
    (["trigger", "1e3"], "Invalid value for 'JOB_ID'"),
    (["retry", "abc"], "Invalid value for 'RUN_ID'"),
    (["retry", TOO_BIG], "out of range"),
    (["explain", "x"], "Invalid value for 'JOB_ID'"),
    (["explain", "1", "--at", "tomorrow"], "--at 'tomorrow' is not an ISO-8601 time"),
    (["explain", "1", "--at", "9999-12-31T23:59:59+00:00"], "is out of range"),
    (["explain", "1", "--at", "2030-01-01T00:00Z\x1c"], "only printable ASCII"),
    (["keys", "create", "--tenant", "bad\ttenant"], "control characters"),
    (["keys", "create"], "Missing option '--tenant'"),
    (["keys", "revoke"], "Missing argument"),
    (["cluster", "--leader"], "No such option"),
]
IDS = [" ".join(argv) for argv, _ in BAD_INPUT]


@pytest.mark.parametrize(("argv", "message"), BAD_INPUT, ids=IDS)
def test_bad_input_exits_2_and_creates_no_database(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    db = tmp_path / "never.db"

    assert_error(tickwork(*argv, "--db", f"sqlite:///{db}"), 2, message)

    assert not db.exists()


# Every check runs before the store is opened, so one backend shows it; unknown ids below
# reach the store and are checked on both.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_bad_input_writes_nothing_to_an_existing_store(store: Store) -> None:
    job = submit(store, every="1h")
    dead_run(store, job.id)
    before = snapshot(store)

    for argv, message in BAD_INPUT:
        assert_error(tickwork(*argv, "--db", store.url), 2, message)

    assert snapshot(store) == before


UNKNOWN = [
    (["show", "999"], "job 999 not found"),
    (["cancel", "999"], "job 999 not found"),
    (["cancel", "--run", "999"], "run 999 not found"),
    (["pause", "999"], "job 999 not found"),
    (["resume", "0"], "job 0 not found"),
    (["trigger", "999"], "job 999 not found"),
    (["retry", "999"], "run 999 not found"),
    (["explain", "999"], "job 999 not found"),
    (["explain", "999", "--at", "2030-01-01T00:00Z"], "job 999 not found"),
    (["show", "0"], "job 0 not found"),
    (["keys", "revoke", "tw_aaaaaaaa"], "not found"),
]


def test_unknown_ids_exit_1_and_write_nothing(store: Store) -> None:
    job = submit(store, every="1h")
    dead_run(store, job.id)
    before = snapshot(store)

    for argv, message in UNKNOWN:
        assert_error(tickwork(*argv, "--db", store.url), 1, message)

    assert snapshot(store) == before
