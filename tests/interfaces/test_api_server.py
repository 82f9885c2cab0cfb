"""The real ``tickwork api`` (and ``tickwork run``) process over HTTP: keys, tenant
isolation, the open mode on loopback, the refusal to serve a network without keys, and a
clean stop on SIGTERM."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator

import httpx
import pytest
from api_support import dead_run, error_of, run_tickwork, serving

from tickwork.client import Client
from tickwork.job import JobState, RunState
from tickwork.records import NodeRecord
from tickwork.store import open_store
from tickwork.testing import wait_until
from tickwork.web.auth import COOKIE_NAME

pytestmark = pytest.mark.slow

HTTP_ARGS = {"url": "https://example.com/hook"}


@pytest.fixture
def client(store_url: str) -> Iterator[Client]:
    """The test's own client on the database the child serves."""
    with Client(open_store(store_url)) as opened:
        yield opened


def api_argv(store_url: str, *extra: str) -> list[str]:
    return ["api", "--db", store_url, "--port", "0", *extra]


def test_one_tenants_key_cannot_read_or_act_on_another_tenants_jobs_and_runs(
    store_url: str, client: Client
) -> None:
    _, key_a = client.create_api_key(tenant="tenant-a")
    _, key_b = client.create_api_key(tenant="tenant-b")
    job_b = client.submit("http", args=HTTP_ARGS, cron="*/5 * * * *", tenant="tenant-b").job
    run_b = dead_run(client, tenant="tenant-b")

    with serving(api_argv(store_url)) as server, server.http(key_a) as a, server.http(key_b) as b:
        answers = {
            "read job": a.get(f"/api/v1/jobs/{job_b.id}"),
            "cancel job": a.post(f"/api/v1/jobs/{job_b.id}/cancel"),
            "pause job": a.post(f"/api/v1/jobs/{job_b.id}/pause"),
            "trigger job": a.post(f"/api/v1/jobs/{job_b.id}/trigger"),
            "explain job": a.get(f"/api/v1/jobs/{job_b.id}/explain"),
            "read run": a.get(f"/api/v1/runs/{run_b}"),
            "retry run": a.post(f"/api/v1/runs/{run_b}/retry"),
            "cancel run": a.post(f"/api/v1/runs/{run_b}/cancel"),
        }
        listed_jobs = a.get("/api/v1/jobs").json()["items"]
        listed_runs = a.get("/api/v1/runs").json()["items"]
        listed_dead = a.get("/api/v1/dead").json()["items"]
        own = b.get(f"/api/v1/jobs/{job_b.id}")

    assert {what: r.status_code for what, r in answers.items()} == dict.fromkeys(answers, 404)
    assert error_of(answers["read job"])["message"] == f"job {job_b.id} not found"
    assert error_of(answers["retry run"])["message"] == f"run {run_b} not found"
    assert (listed_jobs, listed_runs, listed_dead) == ([], [], [])
    assert own.status_code == 200
    assert client.get_job(job_b.id).state is JobState.ACTIVE
    assert client.get_run(run_b).state is RunState.DEAD
    assert client.list_runs(job_id=job_b.id).items == []


def test_keys_are_checked_and_tenant_keys_are_limited(store_url: str, client: Client) -> None:
    _, tenant_key = client.create_api_key(tenant="acme")
    _, admin_key = client.create_api_key(tenant="ops", admin=True)
    shell = {"task": "shell", "args": {"argv": ["true"]}, "schedule": {"delay": 60}}

    with serving(api_argv(store_url)) as server:
        with server.http() as anonymous:
            no_key = anonymous.get("/api/v1/jobs")
            health = anonymous.get("/healthz")
            ready = anonymous.get("/readyz")
        with server.http("tw_abcdefgh_" + "x" * 43) as wrong:
            wrong_key = wrong.get("/api/v1/jobs")
        with server.http(tenant_key) as tenant:
            cluster = tenant.get("/api/v1/cluster")
            metrics = tenant.get("/metrics")
            tenant_shell = tenant.post("/api/v1/jobs", json=shell)
        with server.http(admin_key) as admin:
            admin_cluster = admin.get("/api/v1/cluster")
            admin_shell = admin.post("/api/v1/jobs", json=shell)
        ready_line = "".join(server.out)

    assert (no_key.status_code, wrong_key.status_code) == (401, 401)
    assert error_of(wrong_key)["code"] == "unauthorized"
    assert (health.status_code, ready.status_code) == (200, 200)
    assert ready.json()["status"] == "ready"
    assert (cluster.status_code, metrics.status_code) == (403, 403)
    assert tenant_shell.status_code == 403
    assert error_of(tenant_shell)["field"] == "task"
    assert admin_cluster.status_code == 200
    assert admin_shell.status_code == 201
    assert [job.task for job in client.list_jobs().items] == ["shell"]
    assert "API keys required" in ready_line


def test_on_loopback_without_keys_the_api_runs_open_with_a_warning(store_url: str) -> None:
    with serving(api_argv(store_url, "--host", "127.0.0.1")) as server, server.http() as anyone:
        submitted = anyone.post(
            "/api/v1/jobs", json={"task": "http", "args": HTTP_ARGS, "schedule": {"delay": 60}}
        )
        cluster = anyone.get("/api/v1/cluster")
        url = server.url

    assert url.startswith("http://127.0.0.1:")
    assert submitted.status_code == 201
    assert cluster.status_code == 200
    assert "open access" in "".join(server.out)
    assert "WARNING" in "".join(server.err)


def test_the_api_shows_in_the_cluster_with_its_clock_until_it_stops(
    store_url: str, client: Client
) -> None:
    def present() -> list[NodeRecord] | None:
        nodes = client.cluster().nodes
        return nodes if nodes and nodes[0].clock is not None else None

    with serving(api_argv(store_url, "--node-id", "api-1")):
        (node,) = wait_until(present, 30.0)

    assert (node.id, node.kind) == ("api-1", "api")
    assert node.clock is not None
    assert abs(node.clock.offset) < 0.5  # the host's clock: the test's own
    assert node.info["beat"] == 3.0
    assert client.cluster().nodes == []  # a clean stop leaves the cluster view


def test_revoking_every_key_does_not_reopen_a_loopback_api_after_a_restart(
    store_url: str, client: Client
) -> None:
    record, key = client.create_api_key(tenant="ops", admin=True)
    client.revoke_api_key(record.prefix)

    with serving(api_argv(store_url, "--host", "127.0.0.1")) as server:
        with server.http() as anyone:
            read = anyone.get("/api/v1/jobs")
            submitted = anyone.post(
                "/api/v1/jobs", json={"task": "http", "args": HTTP_ARGS, "max_attempts": 1}
            )
        with server.http(key) as revoked:
            with_revoked_key = revoked.get("/api/v1/jobs")
        ready_line = "".join(server.out)

    assert (read.status_code, submitted.status_code) == (401, 401)
    assert error_of(read)["code"] == "unauthorized"
    assert with_revoked_key.status_code == 401
    assert client.list_jobs().items == []
    assert "API keys required" in ready_line
    assert "every API key is revoked" in "".join(server.err)


def test_tickwork_run_whose_keys_are_all_revoked_stays_closed_too(
    store_url: str, client: Client
) -> None:
    record, _ = client.create_api_key(tenant="acme")
    client.revoke_api_key(record.prefix)

    with serving(["run", "--db", store_url, "--port", "0"]) as server, server.http() as anyone:
        read = anyone.get("/api/v1/jobs")

    assert read.status_code == 401


def test_open_forces_the_open_api_on_loopback_while_keys_still_work(
    store_url: str, client: Client
) -> None:
    _, key = client.create_api_key(tenant="acme")

    with serving(api_argv(store_url, "--host", "127.0.0.1", "--open")) as server:
        with server.http() as anyone:
            cluster = anyone.get("/api/v1/cluster")
        with server.http(key) as acme:
            own = acme.get("/api/v1/cluster")
        with server.http("tw_abcdefgh_" + "x" * 43) as wrong:
            wrong_key = wrong.get("/api/v1/jobs")
        ready_line = "".join(server.out)

    assert cluster.status_code == 200  # anonymous: an admin
    assert own.status_code == 403  # the key is its tenant's, not an admin
    assert wrong_key.status_code == 401
    assert "open access (--open)" in ready_line
    assert "WARNING" in "".join(server.err)


@pytest.mark.parametrize("command", ["api", "run"])
def test_open_is_refused_off_loopback(store_url: str, command: str) -> None:
    done = run_tickwork(command, "--db", store_url, "--port", "0", "--host", "0.0.0.0", "--open")

    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("tickwork: error: --open serves without keys")


def test_off_loopback_with_only_revoked_keys_the_api_serves_closed(
    store_url: str, client: Client
) -> None:
    record, key = client.create_api_key(tenant="acme")
    client.revoke_api_key(record.prefix)

    with serving(api_argv(store_url, "--host", "0.0.0.0")) as server:
        port = server.url.rsplit(":", 1)[1]
        server.url = f"http://127.0.0.1:{port}"
        with server.http() as anonymous, server.http(key) as revoked:
            assert anonymous.get("/api/v1/jobs").status_code == 401
            assert revoked.get("/api/v1/jobs").status_code == 401


def test_the_open_api_refuses_host_headers_that_only_contain_a_loopback_address(
    store_url: str, client: Client
) -> None:
    with serving(api_argv(store_url, "--host", "127.0.0.1")) as server, server.http() as anyone:
        port = server.url.rsplit(":", 1)[1]
        hosts = [f"evil.example:{port}@127.0.0.1", f"127.0.0.1:{port}.evil.example"]
        refused = {
            host: (
                anyone.get("/api/v1/jobs", headers={"Host": host}),
                anyone.post(
                    "/api/v1/jobs",
                    json={"task": "http", "args": HTTP_ARGS},
                    headers={"Host": host},
                ),
            )
            for host in hosts
        }
        served = anyone.get("/api/v1/jobs")

    assert {h: (r.status_code, s.status_code) for h, (r, s) in refused.items()} == dict.fromkeys(
        hosts, (401, 401)
    )
    assert served.status_code == 200
    assert client.list_jobs().items == []


def test_off_loopback_without_keys_the_api_refuses_to_start(store_url: str) -> None:
    done = run_tickwork(*api_argv(store_url, "--host", "0.0.0.0"))

    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("tickwork: error: refusing to serve on 0.0.0.0 without API keys")


def test_off_loopback_with_a_key_the_api_serves(store_url: str, client: Client) -> None:
    _, key = client.create_api_key(tenant="acme")

    with serving(api_argv(store_url, "--host", "0.0.0.0")) as server:
        port = server.url.rsplit(":", 1)[1]
        server.url = f"http://127.0.0.1:{port}"
        with server.http() as anonymous, server.http(key) as acme:
            assert anonymous.get("/api/v1/jobs").status_code == 401
            assert acme.get("/api/v1/jobs").status_code == 200


def sign_in(web: httpx.Client, key: str, **headers: str) -> httpx.Response:
    """The dashboard's sign-in form, posted as a browser posts it from the page."""
    origin = {"Origin": str(web.base_url).rstrip("/")}
    return web.post("/login", data={"key": key}, headers={**origin, **headers})


def cookie_attributes(answer: httpx.Response) -> set[str]:
    (cookie,) = answer.headers.get_list("set-cookie")
    return {part.strip().split("=")[0].lower() for part in cookie.split(";")[1:]}


def test_the_sign_in_cookie_is_secure_behind_a_trusted_tls_proxy(
    store_url: str, client: Client
) -> None:
    _, key = client.create_api_key(tenant="acme")
    https = {"X-Forwarded-Proto": "https"}

    elsewhere = api_argv(store_url, "--forwarded-allow-ips", "192.0.2.1")
    with serving(elsewhere) as untrusted, untrusted.http() as web:
        ignored = sign_in(web, key, **https)
    here = api_argv(store_url, "--forwarded-allow-ips", "127.0.0.0/8, 192.0.2.1")
    with serving(here) as server, server.http() as web:
        trusted = sign_in(web, key, **https)
        plain = sign_in(web, key)
    env = {"TICKWORK_FORWARDED_ALLOW_IPS": "127.0.0.1"}
    with serving(api_argv(store_url), env=env) as by_env, by_env.http() as web:
        from_env = sign_in(web, key, **https)

    assert [a.status_code for a in (ignored, trusted, plain, from_env)] == [303] * 4
    assert "secure" not in cookie_attributes(ignored)  # X-Forwarded-Proto from an untrusted peer
    assert "secure" in cookie_attributes(trusted)
    assert "secure" not in cookie_attributes(plain)
    assert "secure" in cookie_attributes(from_env)


def test_the_sign_in_cookie_is_always_secure_off_loopback(store_url: str, client: Client) -> None:
    _, key = client.create_api_key(tenant="acme")

    with serving(api_argv(store_url, "--host", "0.0.0.0")) as server:
        port = server.url.rsplit(":", 1)[1]
        server.url = f"http://127.0.0.1:{port}"
        with server.http() as web:
            local = sign_in(web, key)
            # Over plain http to a name a browser keeps no Secure cookie for: say so.
            remote = web.post(
                "/login",
                data={"key": key},
                headers={"Host": f"10.9.8.7:{port}", "Origin": f"http://10.9.8.7:{port}"},
            )

    assert local.status_code == 303
    assert "secure" in cookie_attributes(local)
    assert remote.status_code == 403
    assert "set-cookie" not in remote.headers
    assert "HTTPS" in remote.text


def test_signing_out_ends_the_session_on_the_server(store_url: str, client: Client) -> None:
    _, key = client.create_api_key(tenant="acme")

    with serving(api_argv(store_url)) as server, server.http() as web:
        signed_in = sign_in(web, key)
        token = web.cookies[COOKIE_NAME]
        before = web.get("/api/v1/jobs")
        signed_out = web.post("/logout", headers={"Origin": server.url})
        web.cookies.set(COOKIE_NAME, token)  # a copy of the cookie, kept from before
        after = web.get("/api/v1/jobs")

    assert signed_in.status_code == 303
    assert token.startswith("tws_")
    assert key not in signed_in.headers["set-cookie"]
    assert before.status_code == 200
    assert signed_out.status_code == 303
    assert after.status_code == 401


def test_a_cross_site_post_while_signed_out_lands_on_a_page_after_sign_in(
    store_url: str, client: Client
) -> None:
    _, key = client.create_api_key(tenant="default", admin=True)
    run_id = dead_run(client)

    with serving(api_argv(store_url)) as server, server.http() as web:
        form = web.post(
            f"/runs/{run_id}/retry",
            headers={"Origin": "https://evil.example"},
            follow_redirects=True,
        )
        found = re.search(r'name="next" value="([^"]*)"', form.text)
        assert found is not None
        landed = web.post(
            "/login",
            data={"key": key, "next": found.group(1)},
            headers={"Origin": server.url},
            follow_redirects=True,
        )

    assert form.url.path == "/login"
    assert landed.status_code == 200
    assert landed.url.path == "/"
    assert landed.headers["content-type"].startswith("text/html")
    assert client.get_run(run_id).state is RunState.DEAD


@pytest.mark.parametrize(
    ("command", "value"),
    [
        ("api", ""),
        ("api", "10.0.0.1,nope"),
        ("api", "10.0.0.0/33"),
        ("api", "10.0.0.1/8"),
        ("api", "*,10.0.0.1"),
        ("api", "::1/"),
        ("run", "proxy.internal"),
    ],
)
def test_a_bad_forwarded_allow_ips_is_a_one_line_error(
    store_url: str, command: str, value: str
) -> None:
    argv = [command, "--db", store_url, "--port", "0", "--forwarded-allow-ips", value]
    done = run_tickwork(*argv)

    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("tickwork: error: --forwarded-allow-ips")


def test_a_port_in_use_is_a_one_line_error(store_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        done = run_tickwork("api", "--db", store_url, "--port", str(port))

    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"tickwork: error: cannot listen on 127.0.0.1:{port}")


def test_tickwork_run_serves_the_api_beside_its_scheduler_and_worker(
    store_url: str, client: Client
) -> None:
    argv = ["run", "--db", store_url, "--port", "0", "--concurrency", "2"]
    with serving(argv) as server, server.http() as web:
        answer = web.post(
            "/api/v1/jobs",
            json={"task": "http", "args": {"url": "http://127.0.0.1:1/"}, "max_attempts": 1},
        )
        job_id = answer.json()["id"]
        dead_runs = _wait_for_dead(web, job_id)
        metrics = web.get("/metrics").text
        ready_line = "".join(server.out)

    assert answer.status_code == 201
    assert [run["job_id"] for run in dead_runs] == [job_id]
    assert ready_line.startswith("tickwork run: ready on ")
    assert f"API and dashboard at {server.url}" in ready_line
    assert "tickwork_rescues_total 0.0" in metrics
    assert "tickwork_leader 1.0" in metrics


def test_tickwork_run_without_the_api_serves_nothing(store_url: str) -> None:
    with serving(["run", "--db", store_url, "--no-api"]) as server:
        pass

    assert "API and dashboard" not in "".join(server.out)


def _wait_for_dead(web: httpx.Client, job_id: int) -> list[dict[str, object]]:
    dead = wait_until(
        lambda: web.get("/api/v1/dead").json()["items"],
        30,
        what=f"job {job_id}'s run in the dead letter",
    )
    return list(dead)
