"""The shape of the import graph of ``src/tickwork``, beside ``test_layering.py`` (which
holds that no import goes from a lower layer to a higher one):

- no cycle: no module reaches itself through imports, counting every import the layering
  test reads (at the top, inside a function, under ``TYPE_CHECKING``). A package's
  ``__init__`` re-exporting its own submodules is not counted as a cycle back to it;
- no module over MAX_LINES lines;
- a client, the HTTP API and the CLI load no worker module (executor, reporter, heartbeat,
  fault injector, spans), since none of them runs a task (the CLI's commands that run a
  worker import it when they run); the task model they need is ``tickwork.tasks``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.unit.test_layering import MODULES, PACKAGE, imports, module_name

MAX_LINES = 650

LONGER_ALLOWED = {
    "store/base.py": "the Store contract: every method documented, in one place",
}
"""Modules allowed over MAX_LINES, with why. The list is exact: a module that has come
under the limit fails the test until it is taken off."""

KNOWN_CYCLES: set[frozenset[str]] = set()
"""Cycles not yet broken. The list is exact: a cycle that is gone fails the test until it
is taken off."""


def import_graph() -> dict[str, set[str]]:
    """Each module of the package to the modules of the package it imports."""
    graph = {module_name(path): set[str]() for path in MODULES}
    for path in MODULES:
        here = module_name(path)
        graph[here] = {target for _, target in imports(path) if target in graph} - {here}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def path_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """One cycle inside ``component``, as the modules in import order, first one last too."""
    start = min(component)
    trail = [start]
    seen = {start}
    while True:
        here = trail[-1]
        nxt = min(t for t in graph[here] if t in component)
        if nxt in seen:
            return [*trail[trail.index(nxt) :], nxt]
        trail.append(nxt)
        seen.add(nxt)


def test_the_cycle_finder_finds_a_type_only_cycle_and_not_a_chain() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [{"a", "b", "c"}]
    assert path_through(graph, {"a", "b", "c"}) == ["a", "b", "c", "a"]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_of_the_package_has_no_cycle() -> None:
    graph = import_graph()
    assert "tickwork.worker.otel" in graph["tickwork.worker.observe"]  # lazy imports count
    found = cycles(graph)
    new = [" -> ".join(path_through(graph, c)) for c in found if frozenset(c) not in KNOWN_CYCLES]
    assert not new, "import cycles:\n" + "\n".join(new)
    gone = KNOWN_CYCLES - {frozenset(c) for c in found}
    assert not gone, f"no longer cycles, take them off KNOWN_CYCLES: {sorted(map(sorted, gone))}"


def test_no_module_is_over_the_line_limit() -> None:
    lengths = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines()) for path in MODULES
    }
    over = {name: n for name, n in lengths.items() if n > MAX_LINES}
    new = [f"{name}: {n} lines" for name, n in sorted(over.items()) if name not in LONGER_ALLOWED]
    assert not new, f"over {MAX_LINES} lines:\n" + "\n".join(new)
    under = sorted(set(LONGER_ALLOWED) - set(over))
    assert not under, f"no longer over {MAX_LINES} lines, take them off LONGER_ALLOWED: {under}"


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


@pytest.mark.parametrize(
    "module",
    ["tickwork.client", "tickwork.web.api", "tickwork.cli", "tickwork.cli.submit"],
)
def test_a_client_the_http_api_and_the_cli_load_no_worker_module(module: str) -> None:
    """``tickwork.cli`` is the entry point (``tickwork = "tickwork.cli:main"``), which
    imports a command's module only when that command runs; ``submit`` reads the task
    model (the registry, the built-ins) and still not the worker. The commands that run a
    worker import it when they run."""
    loaded = loaded_by(module)
    assert module in loaded
    if module != "tickwork.cli":
        assert "tickwork.tasks.registry" in loaded
    worker = [name for name in loaded if name.split(".")[:2] == ["tickwork", "worker"]]
    assert not worker, f"import {module} loads {worker}"
