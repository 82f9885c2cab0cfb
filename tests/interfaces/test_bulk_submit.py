"""Bulk submit through every interface: ``app.submit_many``, ``Client.submit_many``,
``POST /api/v1/jobs/batch`` and ``tickwork submit --file``. All or none: a bad job, named
by its index (or line), writes nothing; idempotency keys match per job."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import bearer, error_of
from fastapi.testclient import TestClient

from tickwork.app import App, Context
from tickwork.cli import main
from tickwork.client import Client
from tickwork.config import Config
from tickwork.errors import InvalidCron, UnknownTask, ValidationError
from tickwork.job import JobState, RunState
from tickwork.schedule import Cron, Once
from tickwork.store import Store

BATCH = "/api/v1/jobs/batch"


@pytest.fixture
def app(store: Store) -> Iterator[App]:
    application = App(config=Config(db_url=store.url))

    @application.task
    def send(ctx: Context, to: str) -> None: ...

    yield application
    application.close()


def counts(store: Store) -> tuple[int, int]:
    return len(store.list_jobs(limit=1000).items), len(store.list_runs(limit=1000).items)


# -- Python ---------------------------------------------------------------------------------


def test_app_submit_many_returns_the_jobs_in_order_and_runs_those_due_now(
    app: App, store: Store
) -> None:
    jobs = app.submit_many(
        [
            {"task": "send", "args": {"to": "a"}},
            {"task": app.registry.get("send"), "args": {"to": "b"}, "delay": "10m"},
            {"task": "send", "args": {"to": "c"}, "cron": "0 9 * * *", "tz": "Europe/Berlin"},
            {"task": "shell", "args": {"argv": ["true"]}, "queue": "ops", "priority": 3},
        ]
    )
    assert [j.args for j in jobs[:3]] == [{"to": "a"}, {"to": "b"}, {"to": "c"}]
    assert [j.state for j in jobs] == [JobState.QUEUED, JobState.SCHEDULED, JobState.ACTIVE,
                                       JobState.QUEUED]  # fmt: skip
    assert isinstance(jobs[1].schedule, Once)
    assert isinstance(jobs[2].schedule, Cron)
    assert (jobs[3].queue, jobs[3].priority) == ("ops", 3)
    runs = store.list_runs(limit=10).items
    assert sorted(r.job_id for r in runs) == [jobs[0].id, jobs[3].id]
    assert all(r.state is RunState.QUEUED for r in runs)


@pytest.mark.parametrize(
    ("bad", "error", "field"),
    [
        ({"task": "nope"}, UnknownTask, "task"),
        ({"task": "send", "args": {"to": "x"}, "cron": "61 * * * *"}, InvalidCron, "cron"),
        ({"task": "send", "args": {"who": "x"}}, ValidationError, "args"),
        ({"task": "send", "args": {"to": "x"}, "dealy": 5}, ValidationError, "dealy"),
        ({"args": {"to": "x"}}, ValidationError, "task"),
        (["send"], ValidationError, "job"),
    ],
)
def test_a_bad_job_at_index_k_is_named_and_nothing_is_stored(
    app: App, store: Store, bad: Any, error: type[Exception], field: str
) -> None:
    good = {"task": "send", "args": {"to": "ok"}}
    with pytest.raises(error) as caught:
        app.submit_many([good, good, bad, good])
    assert isinstance(caught.value, ValidationError)
    assert (caught.value.index, caught.value.field) == (2, field)
    assert str(caught.value).startswith("job 2 of the batch: ")
    assert counts(store) == (0, 0)


def test_idempotency_keys_match_per_job_also_within_one_batch(app: App, store: Store) -> None:
    first = app.submit("send", args={"to": "a"}, idempotency_key="a")
    out = app.client.submit_many(
        [
            {"task": "send", "args": {"to": "a"}, "idempotency_key": "a"},
            {"task": "send", "args": {"to": "b"}, "idempotency_key": "b"},
            {"task": "send", "args": {"to": "b2"}, "idempotency_key": "b"},
            {"task": "send", "args": {"to": "c"}},
        ]
    )
    assert [s.created for s in out] == [False, True, False, True]
    assert out[0].job.id == first.id
    assert out[2].job == out[1].job
    assert out[2].job.args == {"to": "b"}
    assert counts(store) == (3, 3)
    again = app.submit_many([{"task": "send", "args": {"to": "b"}, "idempotency_key": "b"}])
    assert [j.id for j in again] == [out[1].job.id]
    assert counts(store) == (3, 3)


def test_a_taken_name_stops_the_whole_batch(app: App, store: Store) -> None:
    app.schedule("send", cron="@daily", name="daily", args={"to": "x"})
    with pytest.raises(ValidationError) as caught:
        app.submit_many(
            [{"task": "send", "args": {"to": "y"}}, {"task": "send", "args": {"to": "z"},
             "cron": "@hourly", "name": "daily"}]
        )  # fmt: skip
    assert (caught.value.index, caught.value.field) == (1, "name")
    assert counts(store) == (1, 0)


def test_client_submit_many_takes_any_iterable(store: Store) -> None:
    client = Client(store)
    out = client.submit_many(shell(i) for i in range(3))
    assert [s.job.args["argv"][1] for s in out] == ["0", "1", "2"]


# -- HTTP -----------------------------------------------------------------------------------


def shell(i: int, **more: Any) -> dict[str, Any]:
    return {"task": "shell", "args": {"argv": ["echo", str(i)]}, **more}


def test_the_batch_answers_201_with_each_job_in_order(
    web: TestClient, admin_key: str, store: Store
) -> None:
    jobs = [shell(0), shell(1, schedule={"delay": 60}), shell(2, idempotency_key="k")]
    answer = web.post(BATCH, json={"jobs": jobs}, headers=bearer(admin_key))
    assert answer.status_code == 201, answer.text
    body = answer.json()["jobs"]
    assert [b["created"] for b in body] == [True, True, True]
    assert [b["job"]["args"]["argv"][1] for b in body] == ["0", "1", "2"]
    assert [b["job"]["state"] for b in body] == ["queued", "scheduled", "queued"]
    assert counts(store) == (3, 2)

    again = web.post(BATCH, json={"jobs": [shell(9, idempotency_key="k")]},
                     headers=bearer(admin_key))  # fmt: skip
    assert again.status_code == 200
    assert again.json()["jobs"][0] == {"created": False, "job": body[2]["job"]}
    assert counts(store) == (3, 2)


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (shell(2, task="nope"), (400, "jobs.2.task")),
        (shell(2, schedule={"cron": "nope"}), (400, "jobs.2.cron")),
        (shell(2, priority="high"), (422, "jobs.2.priority")),
        (shell(2, colour="red"), (422, "jobs.2.colour")),
        ({"args": {}}, (422, "jobs.2.task")),
    ],
)
def test_a_bad_job_is_a_4xx_naming_its_index_and_field_and_nothing_is_stored(
    web: TestClient, admin_key: str, store: Store, bad: dict[str, Any], expected: tuple[int, str]
) -> None:
    status, field = expected
    answer = web.post(BATCH, json={"jobs": [shell(0), shell(1), bad]}, headers=bearer(admin_key))
    assert answer.status_code == status, answer.text
    error = error_of(answer)
    assert (error["index"], error["field"]) == (2, field)
    assert "job 2 of the batch" in error["message"]
    assert counts(store) == (0, 0)


def test_a_tenant_key_submits_for_its_own_tenant_only(
    web: TestClient, acme_key: str, store: Store
) -> None:
    send = {"task": "http", "args": {"url": "https://example.com"}}
    answer = web.post(BATCH, json={"jobs": [send, {**send, "tenant": "globex"}]},
                      headers=bearer(acme_key))  # fmt: skip
    assert answer.status_code == 403
    error = error_of(answer)
    assert (error["index"], error["field"]) == (1, "jobs.1.tenant")
    shell_job = web.post(BATCH, json={"jobs": [shell(0)]}, headers=bearer(acme_key))
    assert (shell_job.status_code, error_of(shell_job)["field"]) == (403, "jobs.0.task")
    assert counts(store) == (0, 0)

    ok = web.post(BATCH, json={"jobs": [send, send]}, headers=bearer(acme_key))
    assert ok.status_code == 201
    assert {b["job"]["tenant"] for b in ok.json()["jobs"]} == {"acme"}


@pytest.mark.parametrize("size", [0, 1001])
def test_a_batch_takes_1_to_1000_jobs(
    web: TestClient, admin_key: str, store: Store, size: int
) -> None:
    answer = web.post(BATCH, json={"jobs": [shell(i) for i in range(size)]},
                      headers=bearer(admin_key))  # fmt: skip
    assert answer.status_code == 422
    assert error_of(answer)["field"] == "jobs"
    assert counts(store) == (0, 0)


def test_a_batch_of_1000_jobs_fits_the_body_limit(
    web: TestClient, admin_key: str, store: Store
) -> None:
    args = {"argv": ["echo", "x" * 1000]}  # 1 MiB in all: twice a single submit's limit
    answer = web.post(BATCH, json={"jobs": [{"task": "shell", "args": args}] * 1000},
                      headers=bearer(admin_key))  # fmt: skip
    assert answer.status_code == 201, answer.text[:300]
    assert counts(store)[0] == 1000


# -- CLI --------------------------------------------------------------------------------------


def write_lines(path: Path, *lines: Any) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                            for line in lines))  # fmt: skip
    return path


def test_submit_file_submits_every_line_in_one_go(
    capsys: pytest.CaptureFixture[str], store: Store, tmp_path: Path
) -> None:
    jobs = write_lines(
        tmp_path / "jobs.jsonl",
        shell(0),
        "",
        {"task": "http", "args": {"url": "https://example.com"}, "delay": "10m"},
        {"task": "shell", "args": {"argv": ["true"]}, "cron": "*/5 * * * *", "name": "five"},
        shell(3, idempotency_key="k"),
        shell(4, idempotency_key="k"),
    )
    code = main(["submit", "--db", store.url, "--file", str(jobs)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "submitted 4 jobs; 1 matched an idempotency key"
    listed = sorted(store.list_jobs(limit=10).items, key=lambda j: j.id)
    assert [j.task for j in listed] == ["shell", "http", "shell", "shell"]
    assert listed[2].name == "five"
    assert counts(store) == (4, 2)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "jobs.jsonl:3: not JSON"),
        (json.dumps(shell(2, task="nope")), "jobs.jsonl:3: unknown task 'nope'"),
        (json.dumps(shell(2, cron="61 * * * *")), "jobs.jsonl:3: invalid cron"),
        (json.dumps(shell(2, when="now")), "jobs.jsonl:3: 'when' is not a submit option"),
        ("[1, 2]", "jobs.jsonl:3: a job must be an object"),
    ],
)
def test_a_bad_line_exits_2_naming_it_and_nothing_is_stored(
    capsys: pytest.CaptureFixture[str], store: Store, tmp_path: Path, line: str, message: str
) -> None:
    jobs = write_lines(tmp_path / "jobs.jsonl", shell(0), shell(1), line, shell(3))
    code = main(["submit", "--db", store.url, "--file", str(jobs)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert message in err
    assert counts(store) == (0, 0)


def test_submit_file_refuses_a_job_option_beside_it(
    capsys: pytest.CaptureFixture[str], store: Store, tmp_path: Path
) -> None:
    jobs = write_lines(tmp_path / "jobs.jsonl", shell(0))
    code = main(["submit", "--db", store.url, "--file", str(jobs), "--queue", "ops"])
    assert code == 2
    assert "--file takes every job from the file; drop --queue" in capsys.readouterr().err
    assert main(["submit", "--db", store.url, "--file", str(tmp_path / "missing")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert counts(store) == (0, 0)
