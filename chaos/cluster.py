"""The tickwork cluster of the nemesis run: its PostgreSQL, its nodes, and what they did.

``Cluster`` owns a primary and a synchronous standby (``pg.py``), one network namespace per
node with a proxy for each database port (``net.py``), and the node processes:

- ``s1``, ``s2``: ``tickwork scheduler`` (leader lease 3 s, renewed every 0.6 s);
- ``w1`` .. ``w3``: ``tickwork worker --app chaos.workload`` (run lease 4 s, heartbeat 1 s,
  concurrency 20, shutdown grace 2 s).

Every node runs under libfaketime with a clock file of its own (``clock/<node>``, read once
a second), so the skew nemesis moves a running node's wall clock without a restart; its
monotonic clock is left alone, and so is the history's. (``time.sleep`` fails under this
libfaketime; tickwork's services sleep on events.)

Everything a process did to a node is logged to ``events.jsonl`` (README.md), and each
node's output to ``logs/<node>.log``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos import net, pg

REPO = Path(__file__).resolve().parent.parent
DATABASE = "chaos"
SCHEDULERS = ("s1", "s2")
WORKERS = ("w1", "w2", "w3")
LIBFAKETIME = (
    Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"),
    Path("/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1"),
    Path("/usr/lib/faketime/libfaketime.so.1"),
)
STOP_TIMEOUT_S = 20.0
"""Seconds a node gets to exit after SIGTERM (its shutdown grace is 2 s)."""
START_TIMEOUT_S = 30.0
"""Seconds a node gets to register (a loaded machine starts Python slowly)."""


@dataclass(frozen=True)
class Timings:
    """The cluster's leases, scaled down so that a fault outlives them within seconds."""

    run_lease: float = 4.0
    run_heartbeat: float = 1.0
    leader_lease: float = 3.0
    leader_renew: float = 0.6
    leader_margin: float = 0.3
    rescue_interval: float = 0.5
    shutdown_grace: float = 2.0
    concurrency: int = 20


def libfaketime() -> Path:
    for path in LIBFAKETIME:
        if path.exists():
            return path
    raise RuntimeError("libfaketime is not installed (apt-get install faketime)")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (and not PostgreSQL's default)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port != pg.FORBIDDEN_PORT:
            return port


class Node:
    """One node process in its namespace; ``start()`` again after it exited."""

    def __init__(self, cluster: Cluster, name: str, kind: str, link: net.Link) -> None:
        self.cluster = cluster
        self.name = name
        self.kind = kind
        self.link = link
        self.proxies: list[net.Proxy] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.clock_file = cluster.dir / "clock" / name
        self.clock_file.write_text("+0\n")
        self.stopped = False  # SIGSTOPped

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def argv(self) -> list[str]:
        t = self.cluster.timings
        url = self.cluster.node_url(self)
        level = os.environ.get("CHAOS_NODE_LOG_LEVEL", "INFO")
        common = ["--db", url, "--node-id", self.name, "--log-level", level]
        if self.kind == "scheduler":
            return [
                "scheduler", *common,
                "--leader-lease", f"{t.leader_lease}s",
                "--leader-renew", f"{t.leader_renew}s",
                "--leader-safety-margin", f"{t.leader_margin}s",
                "--rescue-interval", f"{t.rescue_interval}s",
            ]  # fmt: skip
        return [
            "worker", *common,
            "--app", "chaos.workload",
            "--concurrency", str(t.concurrency),
            "--run-lease", f"{t.run_lease}s",
            "--run-heartbeat", f"{t.run_heartbeat}s",
            "--shutdown-grace", f"{t.shutdown_grace}s",
        ]  # fmt: skip

    def start(self) -> None:
        assert not self.alive, f"{self.name} is running"
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(
                str(path)
                for path in (self.cluster.tickwork_src, REPO, os.environ.get("PYTHONPATH"))
                if path
            ),
            "CHAOS_HISTORY": str(self.cluster.dir / "history.jsonl"),
            "CHAOS_NODE": self.name,
            "LD_PRELOAD": str(self.cluster.faketime),
            "FAKETIME_TIMESTAMP_FILE": str(self.clock_file),
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_DONT_RESET": "1",
        }
        env = {k: v for k, v in env.items() if not k.startswith("TICKWORK_")}
        log = (self.cluster.dir / "logs" / f"{self.name}.log").open("ab")
        self.proc = subprocess.Popen(
            self.link.argv([sys.executable, "-m", "tickwork", *self.argv()]),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.cluster.dir,
        )
        log.close()
        self.stopped = False
        self.cluster.event("start", self, pid=self.proc.pid)

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the node (the Python process, not ``ip netns exec``: it execs)."""
        assert self.proc is not None
        self.cluster.event("kill", self, pid=self.proc.pid, signal=sig.name)
        self.proc.send_signal(sig)
        if sig is signal.SIGSTOP:
            self.stopped = True
        elif sig is signal.SIGCONT:
            self.stopped = False

    def wait_exit(self, timeout: float = STOP_TIMEOUT_S) -> int:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            code = self.proc.wait(timeout)
        self.cluster.event("exit", self, pid=self.proc.pid, code=code)
        return code

    def kill(self) -> None:
        """SIGKILL and wait: the process is gone when this returns."""
        if self.stopped:
            self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        self.wait_exit()

    def terminate(self) -> int:
        """SIGTERM (a graceful stop) and wait for the exit."""
        if self.stopped:
            self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        return self.wait_exit()

    def skew(self, seconds: float) -> None:
        """Move this node's wall clock ``seconds`` off, within a second, while it runs."""
        self.clock_file.write_text(f"{seconds:+g}\n" if seconds else "+0\n")

    def set_latency(self, seconds: float) -> None:
        for proxy in self.proxies:
            proxy.set_latency(seconds)


class Cluster:
    """The run's PostgreSQL, network and nodes (see the module docstring)."""

    def __init__(
        self, run_dir: Path, timings: Timings | None = None, *, tickwork_src: Path | None = None
    ) -> None:
        # Absolute: the nodes run with the run directory as their working directory.
        self.dir = run_dir = run_dir.resolve()
        self.timings = timings or Timings()
        self.tickwork_src = tickwork_src.resolve() if tickwork_src is not None else None
        self.faketime = libfaketime()
        for sub in ("logs", "clock"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        # PostgreSQL's own user must traverse every parent of its data directory.
        self.pg_dir = Path(tempfile.mkdtemp(prefix="tw-chaos-pg-"))
        self.pg_dir.chmod(0o755)
        self.ports = (free_port(), free_port())
        self.primary: pg.PgCluster | None = None
        self.standby: pg.PgCluster | None = None
        self.network: net.Network | None = None
        self.nodes: dict[str, Node] = {}
        self._events = (run_dir / "events.jsonl").open("a")
        self._events_lock = threading.Lock()

    # -- set up and tear down --------------------------------------------------------------

    def start_database(self) -> None:
        """A primary and a synchronous standby, and the migrated ``chaos`` database."""
        primary = pg.PgCluster(self.pg_dir / "primary", self.ports[0], name="primary")
        self.primary = primary
        primary.init()
        primary.start()
        primary.create_database(DATABASE)
        self.standby = pg.make_standby(
            primary, self.pg_dir / "standby", self.ports[1], sync=True, name="standby"
        )
        from tickwork.store import open_store

        open_store(self.direct_url(), migrate=True).close()

    def start_nodes(self) -> None:
        self.network = net.Network()
        for index, name in enumerate((*SCHEDULERS, *WORKERS), start=1):
            link = self.network.link()
            kind = "scheduler" if name in SCHEDULERS else "worker"
            node = Node(self, name, kind, link)
            for port in self.ports:
                node.proxies.append(self.network.proxy(link.host_ip, port, "127.0.0.1", port))
            self.nodes[name] = node
            del index
        for node in self.nodes.values():
            node.start()

    def close(self) -> None:
        """Stop every node, then the network and the databases (idempotent)."""
        for node in self.nodes.values():
            if node.alive:
                # Keep going whatever happens: namespaces and postmasters must not leak.
                with contextlib.suppress(Exception):
                    node.kill()
        if self.network is not None:
            self.network.close()
        for cluster in (self.primary, self.standby):
            if cluster is not None:
                cluster.stop("immediate")
        self._events.close()

    def remove_database_files(self) -> None:
        shutil.rmtree(self.pg_dir, ignore_errors=True)

    # -- addresses -------------------------------------------------------------------------

    def direct_url(self) -> str:
        """The harness's own URL: both servers on loopback, whichever is the primary."""
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.ports)
        return f"postgresql://{pg.SUPERUSER}@{hosts}/{DATABASE}?target_session_attrs=read-write"

    def node_url(self, node: Node) -> str:
        """A node's URL: both servers through its own link's proxies."""
        hosts = ",".join(f"{node.link.host_ip}:{port}" for port in self.ports)
        return f"postgresql://{pg.SUPERUSER}@{hosts}/{DATABASE}?target_session_attrs=read-write"

    # -- what the harness asks -------------------------------------------------------------

    def sql(self, query: Any, params: Any = None) -> list[tuple[Any, ...]]:
        """A query on the current primary (the harness's own connection, not a node's)."""
        import psycopg

        with psycopg.connect(self.direct_url(), connect_timeout=5, autocommit=True) as conn:
            return list(conn.execute(query, params).fetchall())

    def leader(self) -> Node | None:
        rows = self.sql(
            "SELECT holder FROM tickwork_leases WHERE name = 'scheduler' AND expires_at > now()"
        )
        return self.nodes.get(rows[0][0]) if rows else None

    def registered(self) -> set[str]:
        return {row[0] for row in self.sql("SELECT id FROM tickwork_nodes")}

    def workers(self) -> list[Node]:
        return [self.nodes[name] for name in WORKERS]

    def event(self, ev: str, node: Node, **fields: Any) -> None:
        line = {"ev": ev, "node": node.name, "wall": time.time(), **fields}
        with self._events_lock:
            self._events.write(json.dumps(line) + "\n")
            self._events.flush()
