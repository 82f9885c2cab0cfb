"""Real ``tickwork worker`` and ``tickwork scheduler`` processes for the fault tests, with
leases scaled down (2 s, heartbeat every 0.4 s) and the executions of
:mod:`worker_fault_app` recorded to a file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
LEASE = "2s"
HEARTBEAT = "0.4s"
DEADLINE = 30.0
"""Seconds a child may take to start and act; generous for a loaded CI box."""
STOP_TIMEOUT = 20.0


class Child:
    """One ``python -m tickwork ...`` child process, its output in a log file."""

    def __init__(self, name: str, argv: list[str], log_dir: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tickwork", *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text()

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = STOP_TIMEOUT) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a stopped child cannot die otherwise
            self.proc.kill()
        self.proc.wait(STOP_TIMEOUT)


class Cluster:
    """Starts workers and schedulers on one store; every child is killed at the end."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.url = url
        self.dir = tmp_path
        self.record = tmp_path / "executions.jsonl"
        self.children: list[Child] = []
        self.env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])
            ),
            "TICKWORK_TEST_RECORD": str(self.record),
            "TICKWORK_TEST_DB": url,  # for handlers that write to the store's database
        }

    def worker(self, name: str, *flags: str, app: str | None = "worker_fault_app") -> Child:
        """A worker of ``app``'s tasks (None: started without ``--app``, the built-ins only)."""
        argv = [
            "worker", "--db", self.url, *(["--app", app] if app else []), "--node-id", name,
            "--run-lease", LEASE, "--run-heartbeat", HEARTBEAT, "--poll-interval", "0.05s",
            "--log-level", "DEBUG", *flags,
        ]  # fmt: skip
        return self._start(name, argv)

    def scheduler(self, name: str = "scheduler") -> Child:
        """A scheduler node: its reaper rescues runs whose lease expired."""
        argv = [
            "scheduler", "--db", self.url, "--node-id", name,
            "--leader-lease", "2s", "--leader-renew", "0.4s", "--leader-safety-margin", "0.3s",
            "--rescue-interval", "0.2s", "--poll-interval", "0.1s",
        ]  # fmt: skip
        return self._start(name, argv)

    def _start(self, name: str, argv: list[str]) -> Child:
        child = Child(name, argv, self.dir, self.env)
        self.children.append(child)
        return child

    def executions(self) -> list[dict[str, Any]]:
        """Every recorded ``start`` / ``end`` line, in order."""
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line]

    def events(self, event: str, *, pid: int | None = None) -> list[dict[str, Any]]:
        return [
            e for e in self.executions() if e["event"] == event and (pid is None or e["pid"] == pid)
        ]

    def kill_all(self) -> None:
        for child in self.children:
            child.kill()
