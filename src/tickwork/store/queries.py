"""Named SQL queries, loaded from a dialect's ``queries.sql``.

A file holds blocks that start with ``-- name: <query_name>``; the same names exist in each
dialect, and are the transition words of the glossary (``claim``, ``complete``, ...).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def load_queries(path: Path) -> dict[str, str]:
    text = path.read_text()
    marks = list(_NAME.finditer(text))
    queries: dict[str, str] = {}
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        end = following.start() if following else len(text)
        body = text[mark.end() : end].strip()
        if mark.group(1) in queries:
            raise ValueError(f"{path}: query {mark.group(1)!r} defined twice")
        queries[mark.group(1)] = body
    return {name: _including(body, queries) for name, body in queries.items()}


_INCLUDE = re.compile(r"^(\s*)--\s*include:\s*(\w+)\s*$", re.MULTILINE)


def _including(query: str, queries: dict[str, str]) -> str:
    """``query`` with each line ``-- include: <name>`` replaced by the SQL of the query
    ``name`` (a predicate written once, such as the claim's ``claimable``), indented as the
    line was, without its comment lines. Done once, as the file is read: a query's text is
    still never formatted with values."""

    def body(mark: re.Match[str]) -> str:
        lines = [ln for ln in queries[mark.group(2)].splitlines() if not ln.startswith("--")]
        return "\n".join(mark.group(1) + ln for ln in lines)

    return _INCLUDE.sub(body, query)


def migration_files(directory: Path) -> list[tuple[int, Path]]:
    """``NNNN_description.sql`` files, ordered by version."""
    found = []
    for path in sorted(directory.glob("*.sql")):
        version = int(path.name.split("_", 1)[0])
        found.append((version, path))
    versions = [v for v, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"{directory}: migration versions must be 1..n, got {versions}")
    return found


ONLY_QUEUES = "-- only-queues"
ONLY_TASKS = "-- only-tasks"


def for_queues(query: str, queues: object | None) -> str:
    """``query`` for a worker that takes ``queues``; None (every queue): without its lines
    that end ``-- only-queues``, so the planner sees no queue filter at all. The one
    templating rule of every dialect's queries: the text of a query is never formatted."""
    return for_claimer(query, queues, ())


def for_claimer(query: str, queues: object | None, tasks: object | None) -> str:
    """``query`` for a claimer of ``queues`` and ``tasks``: as :func:`for_queues`, and for
    every task (None) without its lines that end ``-- only-tasks`` too (the same rule)."""
    return _dropping(query, queues is None, tasks is None)


@lru_cache(maxsize=256)
def _dropping(query: str, every_queue: bool, every_task: bool) -> str:
    if not every_queue and not every_task:
        return query
    return "\n".join(
        line
        for line in query.splitlines()
        if not (every_queue and line.endswith(ONLY_QUEUES))
        and not (every_task and line.endswith(ONLY_TASKS))
    )
