"""Fixtures of the store conformance suite (the ``store`` fixtures live in tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tickwork.store import Store

CHILD = Path(__file__).with_name("child.py")
CHILD_TIMEOUT = 120.0
"""Seconds a child may take; generous, so that a slow CI box fails on behaviour, not time."""

Children = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def t0(store: Store) -> datetime:
    """The store's clock now, to whole seconds: the origin tests move time from."""
    return store.now().replace(microsecond=0)


@pytest.fixture
def children() -> Iterator[Children]:
    """Run child processes (``child.py``) that start their operation at the same moment.

    ``children(commands, env=...)`` starts one fresh interpreter per command, waits until
    each has opened its store, releases them all at once and returns their results in
    order. A child that fails fails the test with its stderr.
    """
    started: list[subprocess.Popen[str]] = []

    def run(
        commands: Sequence[Mapping[str, Any]],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = CHILD_TIMEOUT,
    ) -> list[dict[str, Any]]:
        procs = []
        for command in commands:
            proc = subprocess.Popen(
                [sys.executable, str(CHILD), json.dumps(command)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, **(env or {})},
            )
            started.append(proc)
            procs.append(proc)
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "READY":
                _, err = proc.communicate(timeout=timeout)
                pytest.fail(f"child did not start: {line!r}\n{err}", pytrace=False)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            lines = out.strip().splitlines()
            if proc.returncode != 0 or not lines or not lines[-1].startswith("RESULT "):
                pytest.fail(
                    f"child exited {proc.returncode}\nstdout:\n{out}\nstderr:\n{err}",
                    pytrace=False,
                )
            results.append(json.loads(lines[-1].removeprefix("RESULT ")))
        return results

    try:
        yield run
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            # A test that failed early left pipes open: close them, or their finalizers
            # raise ResourceWarning in whichever later test the collector runs in.
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
