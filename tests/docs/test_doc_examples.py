"""Every example of the README and docs/*.md runs as written (tests/docs/examples.py has the
rules: which fences run, how, and the one substitution table)."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from examples import (
    PAGES,
    Page,
    blocks,
    every_block,
    not_run,
    output_matches,
    parse,
    summary,
    transcript,
)

if TYPE_CHECKING:
    from conftest import PgServer

pytestmark = pytest.mark.slow

RUNNING_PAGES = [page for page in PAGES if any(b.runs for b in blocks(page))]
MOST_NOT_RUN = 8
"""Blocks of a running language marked not run, at most: the rare exception."""


def with_dbname(url: str, dbname: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + dbname))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def reader_env() -> dict[str, str]:
    """The reader's environment: the venv's tools first, no tickwork settings of ours."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TICKWORK_", "PYTEST_", "COV_")) and k != "PYTHONPATH"
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@pytest.fixture
def databases(pg_server: PgServer) -> Iterator[list[str]]:
    """Names of the databases a page made (dropped afterwards)."""
    made: list[str] = []
    yield made
    for name in made:
        pg_server.drop_database(name)


@pytest.mark.parametrize("page", RUNNING_PAGES)
def test_every_example_of_the_page_runs_as_written(
    page: str, pg_server: PgServer, databases: list[str], tmp_path: Path
) -> None:
    template = pg_server.ensure_template()

    def database(placeholder: str) -> str:
        name = pg_server.create_database(template=template)
        databases.append(name)
        return with_dbname(pg_server.url, name)

    world = Page(
        page,
        tmp_path,
        port=free_port(),
        database=database,
        env=reader_env(),
        testing_pg_url=pg_server.url,
    )
    result = world.run(blocks(page))
    print("\n".join(f"{where}: {seconds:.1f} s" for where, seconds in result.seconds.items()))
    assert result.ran, f"{page}: no block ran"
    assert not result.failures, f"{len(result.failures)} of {len(result.ran)} blocks failed:\n" + (
        "\n\n".join(str(f) for f in result.failures)
    )


def test_every_fence_names_its_language() -> None:
    bare = [b.where for b in every_block() if not b.language]
    assert not bare, f"fences without a language (text, sh, console, python ...): {bare}"


def test_the_examples_not_run_are_few_and_each_says_why() -> None:
    skipped = not_run()
    print(summary())
    assert all(b.not_run for b in skipped), [b.where for b in skipped if not b.not_run]
    assert len(skipped) <= MOST_NOT_RUN, "\n".join(f"{b.where}: {b.not_run}" for b in skipped)


def test_a_not_run_mark_stands_before_a_block_that_would_run() -> None:
    marks = [
        f"{page}:{n}"
        for page in PAGES
        for n, line in enumerate((Path(__file__).parents[2] / page).read_text().splitlines(), 1)
        if "<!-- not run:" in line
    ]
    placed = {
        f"{b.page}:{n}"
        for b in every_block()
        if b.not_run is not None
        for n in range(b.line - 3, b.line)
    }
    stray = [m for m in marks if m not in placed]
    assert not stray, f"'not run' marks before no block of a running language: {stray}"


# -- the rules themselves ---------------------------------------------------------------------


def test_a_transcript_matches_with_ellipses_and_blanks_squeezed() -> None:
    [(command, shown)] = transcript("$ tickwork runs --job 1\nRUN  JOB\n1    1   ...\n")
    assert command == "tickwork runs --job 1"
    assert output_matches(shown, "RUN JOB\n1 1 shell succeeded   \n")
    assert not output_matches(shown, "RUN JOB\n2 1 shell succeeded\n")
    assert output_matches(["a", "...", "z"], "a\nb\nc\nz\n")
    assert output_matches(["a", "...", "z"], "a\nz\n")
    assert not output_matches(["a"], "a\nb\n")


def test_blocks_are_files_tests_programs_or_marked_not_run() -> None:
    page = (
        "- a list item:\n\n  ```python\n  # myapp/tasks.py\n  x = 1\n  ```\n\n"
        "```python\ndef test_it():\n    pass\n```\n\n"
        "<!-- not run: needs a second host -->\n```sh\nssh db2 true\n```\n"
        "```text\nx\n```\n"
    )
    file, test, remote, text = parse("x.md", page)
    assert (file.kind, file.text, file.line) == ("python-file", "# myapp/tasks.py\nx = 1\n", 3)
    assert test.kind == "python-test"
    assert (remote.runs, remote.not_run) == (False, "needs a second host")
    assert (text.runs, text.kind) == (False, "text")
