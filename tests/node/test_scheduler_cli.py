"""``tickwork scheduler``: flags and environment reach the config; bad ones exit 2; a
signal stops it cleanly (resigning) with exit code 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tickwork.cli import main
from tickwork.store import Store
from tickwork.testing import wait_until

DEADLINE = 30.0
"""Seconds a child may take to start and lead; generous for a loaded CI box."""


def test_a_renew_interval_not_shorter_than_the_lease_is_rejected_with_exit_code_2(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["scheduler", "--db", store.url, "--leader-lease", "1s", "--leader-renew", "2s"])

    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("tickwork: error: ")
    assert "leader renew interval" in err
    assert store.leader() is None


def test_a_malformed_duration_in_the_environment_is_rejected_with_exit_code_2(
    store: Store, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKWORK_LEADER_LEASE", "soon")

    assert main(["scheduler", "--db", store.url]) == 2
    assert "leader_lease 'soon' is not a duration" in capsys.readouterr().err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_scheduler_which_resigns_and_exits_0(
    store: Store, tmp_path: Path, sig: signal.Signals
) -> None:
    log_path = tmp_path / "scheduler.log"
    # The lease comes from the environment, the renew interval from a flag.
    env = {**os.environ, "TICKWORK_LEADER_LEASE": "3s", "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "tickwork", "scheduler", "--db", store.url]
    argv += ["--node-id", "cli-node", "--leader-renew", "0.5s"]
    with log_path.open("w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until(
            lambda: (lease := store.leader()) is not None and lease.holder == "cli-node", DEADLINE
        )
        (node,) = store.list_nodes()
        assert (node.id, node.kind) == ("cli-node", "scheduler")

        proc.send_signal(sig)

        assert proc.wait(DEADLINE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert store.leader() is None  # resigned: no standby has to wait out the lease
    assert store.list_nodes() == []  # and left the cluster view
    lines = log_path.read_text().splitlines()
    assert any(
        "scheduler node=cli-node" in line and "lease=3s renew=0.5s" in line for line in lines
    )
    assert any(" lead epoch=" in line for line in lines)
    assert any(" resign epoch=" in line and "reason=stop" in line for line in lines)
