"""The nemesis harness's infrastructure, on the real thing: PostgreSQL servers of its own
(``chaos.pg``) and network namespaces with a latency proxy (``chaos.net``).

These need root (namespaces, and ``runuser`` to run the server as ``postgres``) and the
server binaries in ``/usr/lib/postgresql/*/bin``: without them they skip locally and fail
under ``CI``, like the PostgreSQL tests. One primary, one link and one proxy serve the
module; fail-over and the crash tests build their own, since they consume what they use.

Clients inside a namespace are child processes (``ip netns exec``) speaking a line
protocol: one query per stdin line, one JSON answer per stdout line.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from chaos.net import Link, Network, Proxy, cleanup_stale, new_run_id
from chaos.pg import PgCluster, PgError, fail_over, find_bin_dir, free_port, make_standby

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ANSWER_TIMEOUT_S = 30.0
"""Seconds a namespace client may take to answer anything that is expected to answer."""
LATENCY_S = 0.3
FAST_ROUND_TRIP_S = 0.2
"""A round trip through the proxy without latency, with room for a loaded CI box."""
BLACKHOLE_HANG_S = 2.0
"""A query into the black hole must still be pending this long after it was sent."""
USER_TIMEOUT_MS = 3000
BLACKHOLE_FAIL_BOUND_S = 10.0
"""...and must have failed within this long (tcp_user_timeout 3 s, with slack)."""
PATIENT_PARAMS = "sslmode=disable"
DEAD_PEER_PARAMS = (
    "sslmode=disable&keepalives=1&keepalives_idle=1&keepalives_interval=1"
    f"&keepalives_count=3&tcp_user_timeout={USER_TIMEOUT_MS}"
)
"""libpq gives up on a silent server: what the harness's nodes rely on."""

CLIENT = r"""
import json, sys, time
import psycopg

started = time.monotonic()
conn = psycopg.connect(sys.argv[1], autocommit=True)
print(json.dumps({"ready": time.monotonic() - started}), flush=True)
for line in sys.stdin:
    started = time.monotonic()
    try:
        rows = conn.execute(line).fetchall()
    except psycopg.Error as exc:
        print(json.dumps({"error": str(exc), "after": time.monotonic() - started}), flush=True)
        break
    print(json.dumps({"rows": len(rows), "after": time.monotonic() - started}), flush=True)
"""

HARNESS = r"""
import sys, time
from pathlib import Path
from chaos.net import Network
from chaos.pg import PgCluster

data_dir, port, run_id, ending = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
cluster = PgCluster(data_dir, port, name="infra-crash")
cluster.init()
cluster.start()
network = Network(run_id)
link = network.link()
network.proxy(link.host_ip, port, "127.0.0.1", port)
print(link.namespace, flush=True)
if ending == "hang":
    time.sleep(600)
# "exit": leave without closing anything: atexit must.
"""


def unavailable(reason: str) -> None:
    """Skip locally, fail under CI: the rule of tests/conftest.py's ``unavailable()``."""
    if os.environ.get("CI"):
        pytest.fail(f"the chaos infrastructure is required under CI: {reason}", pytrace=False)
    pytest.skip(f"chaos infrastructure unavailable: {reason}")


def requirements() -> None:
    if os.geteuid() != 0:
        unavailable("needs root (network namespaces, runuser)")
    if shutil.which("ip") is None or shutil.which("runuser") is None:
        unavailable("needs iproute2's ip and util-linux's runuser")
    try:
        find_bin_dir()
    except PgError as exc:
        unavailable(str(exc))


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """A directory the postgres user can traverse (pytest's tmp_path is root-only)."""
    requirements()
    path = Path(tempfile.mkdtemp(prefix="tw-chaos-infra-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def primary(workdir: Path) -> Iterator[PgCluster]:
    cluster = PgCluster(workdir / "primary", free_port(), name="infra-primary")
    cluster.init()
    cluster.start()
    yield cluster
    cluster.destroy()


@pytest.fixture(scope="module")
def network(workdir: Path) -> Iterator[Network]:
    with Network() as net:
        yield net


@pytest.fixture(scope="module")
def link(network: Network) -> Link:
    return network.link()


@pytest.fixture
def proxy(network: Network, link: Link, primary: PgCluster) -> Iterator[Proxy]:
    """The node's way to the primary, as the harness sets it up; fresh per test."""
    forward = network.proxy(link.host_ip, primary.port, "127.0.0.1", primary.port)
    yield forward
    forward.close()


class NodeClient:
    """A psycopg client in the link's namespace, driven one query per line."""

    def __init__(self, link: Link, url: str) -> None:
        self.proc = subprocess.Popen(
            link.argv([sys.executable, "-c", CLIENT, url]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self._peeked: dict[str, Any] | None = None
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = self.answer()["ready"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._answers.put(json.loads(line))

    def ask(self, query: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(query + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        if self._peeked is not None:
            answer, self._peeked = self._peeked, None
            return answer
        try:
            return self._answers.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"the namespace client did not answer within {timeout:g} s")

    def pending(self, timeout: float) -> bool:
        """Still no answer after ``timeout`` seconds (the answer, if any, is kept)."""
        if self._peeked is not None:
            return False
        try:
            self._peeked = self._answers.get(timeout=timeout)
        except queue.Empty:
            return True
        return False

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


def node_url(primary: PgCluster, link: Link, params: str) -> str:
    return primary.url("postgres", host=link.host_ip) + "?" + params


def ip(*args: str) -> str:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


def namespaces() -> str:
    return ip("netns", "list")


def links() -> str:
    return ip("-o", "link", "show")


def routes() -> str:
    return ip("route")


def postmaster_pids(port: int) -> list[int]:
    """Live postmasters started with ``-p port`` (the harness's are; nobody else's here)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"postgres") and b"-p" in argv and str(port).encode() in argv:
            pids.append(int(entry.name))
    return pids


def test_sync_standby_sees_writes_and_fail_over_keeps_them(workdir: Path) -> None:
    old = PgCluster(workdir / "fo-primary", free_port(), name="infra-fo-primary")
    standby = None
    try:
        old.init()
        old.start()
        old.create_database("app")
        old.sql("CREATE TABLE t (x int)", dbname="app")
        old.sql("INSERT INTO t VALUES (1)", dbname="app")
        standby = make_standby(old, workdir / "fo-standby", free_port(), sync=True)
        assert old.sql("SELECT application_name, state, sync_state FROM pg_stat_replication") == [
            ("tw_standby", "streaming", "sync")
        ]
        # Synchronous: once the commit returns the standby has it (remote_apply is not
        # asked for, so replay may trail the flush by a moment).
        old.sql("INSERT INTO t VALUES (2)", dbname="app")
        deadline = time.monotonic() + 10
        while standby.sql("SELECT x FROM t ORDER BY x", dbname="app") != [(1,), (2,)]:
            assert time.monotonic() < deadline, "the standby never replayed the write"
            time.sleep(0.05)
        assert standby.in_recovery()
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            standby.sql("INSERT INTO t VALUES (99)", dbname="app")

        before = time.time()
        answered = fail_over(old, standby)

        assert before <= answered <= time.time()
        assert not old.is_ready()
        assert not standby.in_recovery()
        standby.sql("INSERT INTO t VALUES (3)", dbname="app")
        assert standby.sql("SELECT x FROM t ORDER BY x", dbname="app") == [(1,), (2,), (3,)]
        assert standby.sql("SHOW synchronous_standby_names") == [("",)]
    finally:
        if standby is not None:
            standby.destroy()
        old.destroy()


def test_restart_drops_open_connections_and_accepts_new_ones(primary: PgCluster) -> None:
    with psycopg.connect(primary.url("postgres"), autocommit=True) as conn:
        pid_before = conn.execute("SELECT pg_backend_pid()").fetchone()
        primary.restart()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    assert primary.is_ready()
    assert primary.sql("SELECT pg_backend_pid()") != [pid_before]


def test_terminate_backends_ends_every_session_of_a_database(primary: PgCluster) -> None:
    primary.create_database("victims")
    conns = [psycopg.connect(primary.url("victims"), autocommit=True) for _ in range(3)]
    try:
        assert primary.terminate_backends("victims") == 3
        for conn in conns:
            with pytest.raises(psycopg.OperationalError):
                conn.execute("SELECT 1")
    finally:
        for conn in conns:
            conn.close()


def test_commit_probe_tells_a_commit_held_by_a_missing_sync_standby(primary: PgCluster) -> None:
    assert primary.commit_probe() <= time.time()
    primary.set_system("synchronous_standby_names", "nobody")
    try:
        with pytest.raises(PgError, match="commits held"):
            primary.commit_probe(timeout=1.5)
    finally:
        primary.set_system("synchronous_standby_names", None)
    primary.commit_probe()


def test_proxy_adds_latency_each_way_without_capping_throughput(
    primary: PgCluster, link: Link, proxy: Proxy
) -> None:
    client = NodeClient(link, node_url(primary, link, PATIENT_PARAMS))
    try:
        client.ask("SELECT 1")
        assert client.answer()["after"] < FAST_ROUND_TRIP_S

        proxy.set_latency(LATENCY_S)
        client.ask("SELECT 1")
        delayed = client.answer()["after"]
        assert 2 * LATENCY_S <= delayed < 2 * LATENCY_S + FAST_ROUND_TRIP_S
        # ~20 MB, ~300 chunks of 64 KiB: one chunk per 300 ms would take 90 s.
        client.ask("SELECT repeat('x', 1000) FROM generate_series(1, 20000)")
        bulk = client.answer()
        assert bulk["rows"] == 20000
        assert bulk["after"] < 2 * LATENCY_S + 2.0

        proxy.set_latency(0)
        client.ask("SELECT 1")
        assert client.answer()["after"] < FAST_ROUND_TRIP_S
    finally:
        client.close()


def test_blackholed_query_hangs_then_fails_on_tcp_user_timeout(
    primary: PgCluster, link: Link, proxy: Proxy
) -> None:
    client = NodeClient(link, node_url(primary, link, DEAD_PEER_PARAMS))
    try:
        link.blackhole()
        client.ask("SELECT 1")
        assert client.pending(BLACKHOLE_HANG_S), "a black hole must hang, not refuse"
        failed = client.answer(BLACKHOLE_FAIL_BOUND_S)
        assert "error" in failed
        assert BLACKHOLE_HANG_S <= failed["after"] < BLACKHOLE_FAIL_BOUND_S
    finally:
        link.heal()
        client.close()
    after_heal = NodeClient(link, node_url(primary, link, DEAD_PEER_PARAMS))
    try:
        after_heal.ask("SELECT 1")
        assert after_heal.answer()["rows"] == 1
    finally:
        after_heal.close()


def test_query_sent_into_a_short_blackhole_completes_after_heal(
    primary: PgCluster, link: Link, proxy: Proxy
) -> None:
    client = NodeClient(link, node_url(primary, link, PATIENT_PARAMS))
    try:
        link.blackhole()
        client.ask("SELECT 1")
        assert client.pending(BLACKHOLE_HANG_S)
        link.heal()
        # TCP retransmits with backoff (1, 2, 4 s...): the next try gets through.
        assert client.answer()["rows"] == 1
    finally:
        link.heal()
        client.close()


def test_cut_proxy_holds_traffic_until_restore(primary: PgCluster) -> None:
    proxy = Proxy("127.0.0.1", 0, "127.0.0.1", primary.port)
    try:
        url = f"postgresql://chaos@127.0.0.1:{proxy.port}/postgres?sslmode=disable"
        with psycopg.connect(url, autocommit=True) as conn:
            assert proxy.connections == 1
            proxy.cut()
            result: list[Any] = []
            query = threading.Thread(target=lambda: result.append(conn.execute("SELECT 7")))
            query.start()
            query.join(1.0)
            assert query.is_alive()
            proxy.restore()
            query.join(ANSWER_TIMEOUT_S)
            assert result[0].fetchall() == [(7,)]
    finally:
        proxy.close()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)


def test_network_close_leaves_no_namespace_veth_or_route(primary: PgCluster) -> None:
    with Network() as net:
        made = [net.link(), net.link()]
        forward = net.proxy(made[0].host_ip, primary.port, "127.0.0.1", primary.port)
        assert all(link.namespace in namespaces() for link in made)
    for link in made:
        assert link.namespace not in namespaces()
        assert link.host_if not in links()
        assert f"{link.host_ip.rsplit('.', 1)[0]}.0/24" not in routes()
    url = f"postgresql://chaos@{made[0].host_ip}:{forward.port}/postgres"
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)


def harness_child(workdir: Path, name: str, ending: str) -> tuple[subprocess.Popen[str], int, str]:

    port, run_id = free_port(), new_run_id()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", HARNESS, str(workdir / name), str(port), run_id, ending],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    return child, port, run_id


def test_harness_exiting_without_cleanup_leaves_nothing_behind(workdir: Path) -> None:
    child, port, run_id = harness_child(workdir, "exit-data", "exit")
    out, _ = child.communicate(timeout=ANSWER_TIMEOUT_S)
    assert child.returncode == 0
    assert out.strip().startswith(f"tw{run_id}n")
    assert f"tw{run_id}" not in namespaces()
    assert f"tw{run_id}" not in links()
    assert postmaster_pids(port) == []


def test_killed_harness_leftovers_are_removed_by_the_next_run(
    workdir: Path, network: Network, link: Link
) -> None:
    child, port, run_id = harness_child(workdir, "crash-data", "hang")
    try:
        assert child.stdout is not None
        namespace = child.stdout.readline().strip()
        assert namespace.startswith(f"tw{run_id}n")
        stale_pids = postmaster_pids(port)
        assert len(stale_pids) == 1
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate()
    assert namespace in namespaces()  # SIGKILL: no atexit

    removed = cleanup_stale()
    assert namespace in removed
    assert namespace not in namespaces()
    assert f"tw{run_id}" not in links()
    # This module's network is alive (it holds its run's lock): left alone.
    assert link.namespace in namespaces()

    cluster = PgCluster(workdir / "crash-data", port, name="infra-crash")
    try:
        cluster.start()
        assert not any(pid in stale_pids for pid in postmaster_pids(port))
        assert cluster.sql("SELECT 1") == [(1,)]
    finally:
        cluster.destroy()
    assert postmaster_pids(port) == []


def test_a_relative_run_directory_reaches_the_nodes_as_an_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The nodes run with the run directory as their working directory: a relative
    # CHAOS_HISTORY or tickwork source would be resolved from there, not from here.
    from chaos.cluster import Cluster

    monkeypatch.chdir(tmp_path)
    cluster = Cluster(Path("runs/one"), tickwork_src=Path("other/src"))
    try:
        assert cluster.dir == tmp_path / "runs" / "one"
        assert cluster.tickwork_src == tmp_path / "other" / "src"
    finally:
        cluster.close()
        cluster.remove_database_files()
