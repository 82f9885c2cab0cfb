"""The modules of ``tickwork.web`` import each other in one direction: no circle, counting
the imports inside functions and those made for type checking only. A circle is what a
module split leaves when two halves still need each other (the dashboard's render and
session modules did, through a lazy import)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
WEB = SRC / "tickwork" / "web"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(WEB.rglob("*.py"))}


def web_imports(path: Path) -> set[str]:
    """The ``tickwork.web`` modules ``path`` imports, wherever the import statement is;
    ``from tickwork.web import api`` is an import of ``tickwork.web.api``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return {name for name in found if name in MODULES}


def circle() -> list[str] | None:
    """One circle of imports among the web modules, as the modules along it, or None."""
    graph = {name: web_imports(path) - {name} for name, path in MODULES.items()}
    done: set[str] = set()

    def walk(name: str, trail: list[str]) -> list[str] | None:
        if name in trail:
            return [*trail[trail.index(name) :], name]
        if name in done:
            return None
        for target in sorted(graph[name]):
            found = walk(target, [*trail, name])
            if found is not None:
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        found = walk(name, [])
        if found is not None:
            return found
    return None


def test_the_web_modules_are_found() -> None:
    assert {"tickwork.web.app", "tickwork.web.api.jobs", "tickwork.web.dashboard.session"} <= set(
        MODULES
    )
    assert "tickwork.web.dashboard.render" in web_imports(MODULES["tickwork.web.dashboard.pages"])


def test_no_web_module_imports_one_that_imports_it_back() -> None:
    found = circle()

    assert found is None, " -> ".join(found or [])
