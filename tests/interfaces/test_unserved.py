"""Runs that no live worker would claim wait, visibly (every store, in process): the
queues view (client, CLI, HTTP API, dashboard) names them with why, ``/metrics`` counts
them by task and queue, and a submit warns (``Submitted.warnings``, the CLI on stderr, the
API's ``warnings``, ``App.submit`` in the log) while no live worker has the task.

A live worker is one whose node row is seen within three of its beats; the row's info
names its queues, its tasks and whether it runs shell commands, as every worker's
heartbeat writes it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tickwork.app import App
from tickwork.cli import main
from tickwork.client import Client
from tickwork.config import Config
from tickwork.job import JobSpec
from tickwork.presence import LiveWorkers
from tickwork.schedule import Once
from tickwork.store import Store
from tickwork.web.app import create_app

HTTP = {"url": "https://example.com/"}


def live_worker(
    store: Store,
    node: str,
    tasks: list[str],
    *,
    queues: list[str] | None = None,
    allow_shell: bool = False,
) -> None:
    """A worker's node row as its heartbeat writes it, seen now."""
    info = {"tasks": tasks, "queues": queues, "allow_shell": allow_shell, "beat": 3.0}
    store.register_node(node, "worker", f"host-{node}", 1, info)


def due(store: Store, task: str, queue: str = "default", n: int = 1) -> None:
    now = store.now()
    spec = JobSpec(task=task, schedule=Once(at=now), queue=queue)
    store.submit_many([spec] * n, now=now)


@pytest.fixture
def api(client: Client, admin_key: str) -> Iterator[TestClient]:
    with TestClient(create_app(client, open_access=False)) as test_client:
        test_client.headers["Authorization"] = f"Bearer {admin_key}"
        yield test_client


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- who would claim a run -----------------------------------------------------------------


def test_why_no_live_worker_would_claim_a_run(store: Store) -> None:
    assert LiveWorkers(()).unserved("send_mail", "default") == (
        "no live worker has task send_mail (no worker is live)"
    )
    live_worker(store, "w-app", ["http", "send_report", "shell"], queues=["default", "ops"])
    live_worker(store, "w-mail", ["http", "send_mail", "shell"], queues=["mail"])
    now = store.now()
    live = LiveWorkers.of(store.list_nodes(now=now), now)
    assert live.unserved("send_report", "default") is None
    assert live.unserved("send_mail", "mail") is None
    assert live.unserved("send_sms", "default") == "no live worker has task send_sms"
    assert live.unserved("send_mail", "default") == (
        "no live worker that takes queue default has task send_mail"
    )
    assert live.unserved("send_report", "mail") == (
        "no live worker that takes queue mail has task send_report"
    )
    assert live.unserved("shell", "default") == (
        "no live worker runs shell tasks (start one with --allow-shell)"
    )
    live_worker(store, "w-shell", ["http", "shell"], queues=["ops"], allow_shell=True)
    live = LiveWorkers.of(store.list_nodes(now=now), now)
    assert live.unserved("shell", "ops") is None
    assert live.unserved("shell", "default") == (
        "no live worker that takes queue default runs shell tasks (start one with "
        "--allow-shell and --queue default)"
    )
    assert live.unserved("http", "reports") == "no live worker takes queue reports"
    assert live.serving("http", "mail") == ["w-mail"]


def test_a_silent_worker_serves_nothing(store: Store) -> None:
    live_worker(store, "w-gone", ["send_mail"])
    later = store.now() + timedelta(minutes=1)  # three beats and more
    live = LiveWorkers.of(store.list_nodes(now=later), later)
    assert live.unserved("send_mail", "default") == (
        "no live worker has task send_mail (no worker is live)"
    )


# -- the queues view -----------------------------------------------------------------------


def test_the_queues_view_names_the_due_runs_no_live_worker_would_claim(
    client: Client, store: Store
) -> None:
    live_worker(store, "w1", ["http", "send_report"])
    due(store, "send_mail", n=3)
    due(store, "send_report", n=2)
    due(store, "shell", queue="ops")
    queues = {q.queue: q for q in client.queues()}
    [mail] = queues["default"].unserved
    assert (mail.task, mail.due) == ("send_mail", 3)
    assert mail.reason == "no live worker has task send_mail"
    assert queues["default"].due == 5
    [shell] = queues["ops"].unserved
    assert shell.reason == "no live worker runs shell tasks (start one with --allow-shell)"
    assert [(u.queue, u.task) for u in client.unserved()] == [
        ("default", "send_mail"),
        ("ops", "shell"),
    ]
    live_worker(store, "w2", ["send_mail"])
    assert [u.task for u in client.unserved()] == ["shell"]


def test_runs_not_yet_due_are_not_unserved(client: Client, store: Store) -> None:
    later = store.now() + timedelta(hours=1)
    store.submit(JobSpec(task="send_mail", schedule=Once(at=later)), now=store.now())
    assert client.unserved() == []


def test_cli_queues_lists_the_unserved_runs_with_why(
    capsys: pytest.CaptureFixture[str], client: Client, store: Store
) -> None:
    live_worker(store, "w1", ["http"])
    due(store, "send_mail", n=2)
    code, out, err = cli(capsys, "queues", "--db", store.url)
    assert code == 0, err
    assert "WHY THEY WAIT" in out
    [line] = [line for line in out.splitlines() if line.startswith("default  send_mail")]
    assert " 2 " in line
    assert line.rstrip().endswith("no live worker has task send_mail")
    code, out, err = cli(capsys, "queues", "--db", store.url, "--json")
    assert code == 0, err
    assert '"reason": "no live worker has task send_mail"' in out


def test_api_queues_include_the_unserved_runs(
    client: Client, store: Store, api: TestClient
) -> None:
    live_worker(store, "w1", ["http"])
    due(store, "send_mail")
    [queue] = api.get("/api/v1/queues").json()
    [unserved] = queue["unserved"]
    assert (unserved["task"], unserved["due"], unserved["reason"]) == (
        "send_mail",
        1,
        "no live worker has task send_mail",
    )


def test_the_queues_page_says_why_runs_wait(client: Client, store: Store) -> None:
    live_worker(store, "w1", ["http"])
    due(store, "send_mail", n=4)
    app = create_app(client, open_access=True)
    with TestClient(app, base_url="http://127.0.0.1:8765") as open_web:
        page = open_web.get("/queues")
    assert page.status_code == 200
    assert 'id="unserved"' in page.text
    assert 'data-task="send_mail"' in page.text
    assert "no live worker has task send_mail" in page.text


def test_metrics_count_the_unserved_runs_by_task_and_queue(
    client: Client, store: Store, api: TestClient
) -> None:
    live_worker(store, "w1", ["http"])
    due(store, "send_mail", n=3)
    due(store, "shell", queue="ops")
    due(store, "http")
    text = api.get("/metrics").text
    assert 'tickwork_unserved_runs{queue="default",task="send_mail"} 3.0' in text
    assert 'tickwork_unserved_runs{queue="ops",task="shell"} 1.0' in text
    assert 'task="http"' not in "\n".join(
        line for line in text.splitlines() if line.startswith("tickwork_unserved_runs{")
    )
    assert "tickwork_unserved_runs_other 0.0" in text


# -- submit warns --------------------------------------------------------------------------


def test_submit_warns_while_no_live_worker_has_the_task(client: Client, store: Store) -> None:
    live_worker(store, "w1", ["http", "send_report"], queues=["default"])
    live_worker(store, "w2", ["send_report"], queues=["mail"])
    warned = client.submit_spec(
        JobSpec(task="send_mail", schedule=Once(delay=timedelta(0)), queue="mail")
    )
    assert warned.warnings == (
        "no live worker has task send_mail: the job's runs wait, queued, until one does",
    )
    warned = client.submit("http", args=HTTP, queue="mail")
    assert warned.warnings == (
        "no live worker that takes queue mail has task http: the job's runs wait, queued, "
        "until one does",
    )
    assert client.submit("http", args=HTTP).warnings == ()


def test_submit_warns_of_shell_without_a_worker_that_allows_it(
    client: Client, store: Store
) -> None:
    live_worker(store, "w1", ["http", "shell"])
    backup = {"argv": ["/usr/local/bin/backup.sh"]}
    submitted = client.submit("shell", args=backup, cron="*/5 * * * *")
    assert submitted.warnings[-1] == (
        "no live worker runs shell tasks (start one with --allow-shell): the job's runs wait, "
        "queued, until one does"
    )


def test_submit_does_not_warn_for_a_job_more_than_a_day_ahead(client: Client) -> None:
    assert client.submit("http", args=HTTP, delay=timedelta(days=2)).warnings == ()
    assert client.submit("http", args=HTTP, delay=timedelta(hours=20)).warnings != ()


def test_cli_submit_warns_on_stderr_and_submits(
    capsys: pytest.CaptureFixture[str], store: Store
) -> None:
    argv = ["submit", "--db", store.url, "shell", "--", "/usr/local/bin/backup.sh"]
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    assert out.startswith("submitted job")
    assert (
        "tickwork: warning: no live worker runs shell tasks (start one with --allow-shell)" in err
    )


def test_api_submit_answers_the_warning(store: Store, api: TestClient) -> None:
    answer = api.post("/api/v1/jobs", json={"task": "http", "args": HTTP})
    assert answer.status_code == 201, answer.text
    assert answer.json()["warnings"] == [
        "no live worker has task http (no worker is live): the job's runs wait, queued, "
        "until one does"
    ]
    live_worker(store, "w1", ["http"])
    api.app.state.client.workers.ttl = 0  # type: ignore[attr-defined]  # read the rows again
    answer = api.post("/api/v1/jobs", json={"task": "http", "args": HTTP})
    assert answer.json()["warnings"] == []


def test_app_submit_logs_the_warning_once_a_minute(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    app = App(config=Config(db_url=store.url))

    @app.task
    def send_mail(ctx: Any) -> None: ...

    with caplog.at_level(logging.WARNING, logger="tickwork"):
        for _ in range(5):
            app.submit(send_mail)
    warned = [r.getMessage() for r in caplog.records if "no live worker" in r.getMessage()]
    assert len(warned) == 1
    assert "no live worker has task send_mail (no worker is live)" in warned[0]
    app.close()
