"""Helpers for the tests that read a real process's log: the process, its stderr kept as
bytes in a file."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from api_support import STOP_TIMEOUT, child_env


@dataclass
class Process:
    process: subprocess.Popen[bytes]
    stderr: Path

    def output(self) -> str:
        return self.stderr.read_bytes().decode("utf-8")


@contextmanager
def tickwork(tmp_path: Path, *argv: str) -> Iterator[Process]:
    """``python -m tickwork ARGV``, its stderr (the log) to a file read as bytes; SIGTERM,
    and exit 0, at the end."""
    stderr = tmp_path / f"stderr-{time.monotonic_ns()}.log"
    with stderr.open("wb") as err:
        child = subprocess.Popen(
            [sys.executable, "-m", "tickwork", *argv],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=child_env(),
        )
    process = Process(child, stderr)
    try:
        yield process
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=STOP_TIMEOUT) == 0, process.output()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
