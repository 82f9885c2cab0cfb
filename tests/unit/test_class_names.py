"""Each class name under ``src/tickwork`` is defined once, so a name in a traceback, a type
hint or the docs means one thing (issue 25 renamed the record twins of ``Heartbeat``,
``Node`` and ``DueJob`` to ``LeaseReport``, ``NodeRecord`` and ``DueRow``)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "tickwork"


def test_no_two_classes_share_a_name() -> None:
    defined: defaultdict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                defined[node.name].append(str(path.relative_to(PACKAGE)))
    twice = {name: paths for name, paths in defined.items() if len(paths) > 1}
    assert twice == {}, f"class names defined more than once (rename one of each): {twice}"
