"""What importing a part of tickwork loads: a client, the HTTP API or the CLI loads no
worker runtime (executor, reporter, heartbeat, fault injector, spans), since none of them
runs a task; the task model they need is ``tickwork.tasks``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LOADED = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""


def loaded_by(module: str) -> list[str]:
    """The modules a fresh interpreter has loaded once it imported ``module``."""
    done = subprocess.run(
        [sys.executable, "-c", LOADED, module],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return list(json.loads(done.stdout))


@pytest.mark.parametrize("module", ["tickwork.client", "tickwork.web.api"])
def test_a_client_and_the_http_api_load_no_worker_module(module: str) -> None:
    loaded = loaded_by(module)
    assert module in loaded
    assert "tickwork.tasks.registry" in loaded
    worker = [name for name in loaded if name.split(".")[:2] == ["tickwork", "worker"]]
    assert not worker, f"import {module} loads {worker}"
