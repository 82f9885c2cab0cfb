"""The layering in ``docs/architecture.md``, checked on the source: every import under
``src/tickwork`` (at the top of a module or inside a function) goes to its own layer or one
to its left, and the faces (``cli/``, ``web/``) reach the store only through the client.

    domain  <-  tasks  <-  store  <-  scheduler / worker  <-  client / node  <-  cli / web
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "tickwork"

DOMAIN, TASKS, STORE, ROLES, CLIENT, FACES = range(6)
LAYER_NAMES = ("domain", "tasks", "store", "scheduler/worker", "client/node", "cli/web")

# Everything not named here is domain: pure values and rules, no I/O.
LAYERS: dict[str, int] = {
    "tickwork.tasks": TASKS,  # the task model: what the client and the worker both need
    "tickwork.store": STORE,
    "tickwork.scheduler": ROLES,
    "tickwork.worker": ROLES,
    "tickwork.service": ROLES,  # the loop shape the services share
    "tickwork.presence": ROLES,  # the node row of a process with no scheduler or worker
    "tickwork.client": CLIENT,
    "tickwork.admin": CLIENT,  # the client's administration calls
    "tickwork.inputs": CLIENT,  # the checks of what callers type
    "tickwork.node": CLIENT,
    "tickwork.app": CLIENT,
    "tickwork.bench": CLIENT,
    "tickwork.testing": CLIENT,  # the testing kit drives an App
    "tickwork.pytest_plugin": FACES,
    "tickwork.cli": FACES,
    "tickwork.web": FACES,
    "tickwork.__main__": FACES,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def layer(module: str) -> int:
    """The layer of ``module``: that of its longest prefix in LAYERS, else domain."""
    if module == "tickwork":
        return CLIENT  # the package's public names include App
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        found = LAYERS.get(".".join(parts[:n]))
        if found is not None:
            return found
    return DOMAIN


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for each tickwork module ``path`` imports, lazy imports included;
    ``from tickwork import cron`` counts as an import of ``tickwork.cron``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("tickwork")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module != "tickwork" and not node.module.startswith("tickwork."):
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((node.lineno, sub if is_module(sub) else node.module))
    return found


def reaches_past_the_client(node: ast.Attribute) -> bool:
    """``client.store``, ``node.store`` or ``...reaper``: a store or a service reached
    through the object that should hide it."""
    if node.attr == "reaper":
        return True
    owner = ast.unparse(node.value)
    return node.attr == "store" and ("client" in owner or "node" in owner)


MODULES = sorted(PACKAGE.rglob("*.py"))
FACE_MODULES = [p for p in MODULES if layer(module_name(p)) == FACES]


def test_the_source_tree_is_found() -> None:
    assert len(MODULES) > 40
    assert any(module_name(p) == "tickwork.cli.jobs" for p in FACE_MODULES)
    assert any(module_name(p) == "tickwork.web.dashboard" for p in FACE_MODULES)


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_a_module_imports_only_its_own_layer_or_those_left_of_it(path: Path) -> None:
    here = module_name(path)
    upward = [
        f"line {line}: {here} ({LAYER_NAMES[layer(here)]}) imports {target} "
        f"({LAYER_NAMES[layer(target)]})"
        for line, target in imports(path)
        if layer(target) > layer(here)
    ]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("path", FACE_MODULES, ids=module_name)
def test_the_cli_and_the_web_import_no_store(path: Path) -> None:
    found = [
        f"line {line}: imports {target}" for line, target in imports(path) if layer(target) == STORE
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", FACE_MODULES, ids=module_name)
def test_the_cli_and_the_web_reach_no_store_through_the_client_or_a_node(path: Path) -> None:
    """``client.store.now()`` or ``node.store.close()`` is a store call all the same."""
    found = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Attribute) and reaches_past_the_client(node)
    ]
    assert not found, "\n".join(found)
