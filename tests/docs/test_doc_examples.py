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
    NOT_RUN,
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
    from tests.conftest import PgServer

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


PAGE_TIMEOUT = 900
"""Seconds for one page, well above its minute on a loaded machine: blocks time out first."""


@pytest.mark.slow
@pytest.mark.timeout(PAGE_TIMEOUT)
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
    root = Path(__file__).parents[2]
    marks = sum(
        bool(NOT_RUN.match(line))
        for page in PAGES
        for line in (root / page).read_text().splitlines()
    )
    assert marks == len(not_run()), "a 'not run' mark that stands before no sh/console/python block"


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


def test_placeholders_become_databases_and_servers_start_in_the_background(
    tmp_path: Path,
) -> None:
    made: list[str] = []

    def database(placeholder: str) -> str:
        made.append(placeholder)
        return f"postgresql://h/db{len(made)}"

    page = Page(
        "x.md", tmp_path, port=4242, database=database, env={}, testing_pg_url="", markdown=""
    )
    assert page.substitute(
        "--db postgresql://... --db postgresql://.../scratch http://127.0.0.1:8765/x --db postgresql://..."
    ) == (
        "--db postgresql://h/db1 --db postgresql://h/db2 http://127.0.0.1:4242/x --db postgresql://h/db1"
    )
    script = page.shell_script(
        "tickwork run --allow-shell   # a terminal of its own\n"
        "TICKWORK_HTTP_ALLOW=a,b tickwork worker \\\n    --app myapp.tasks\n"
        "tickwork api --port 8765\n"
        "tickwork runs --job 1\n"
    )
    assert script.splitlines()[-4:] == [
        "__tw_serve run env tickwork run --port 4242 --allow-shell   # a terminal of its own",
        "__tw_serve worker env TICKWORK_HTTP_ALLOW=a,b tickwork worker      --app myapp.tasks",
        "__tw_serve api env tickwork api --port 4242",
        "tickwork runs --job 1",
    ]


def test_a_page_runs_in_one_terminal_and_one_interpreter_and_names_what_failed(
    tmp_path: Path,
) -> None:
    markdown = (
        "```sh\nGREETING=hello\n```\n"
        '```console\n$ echo "$GREETING, world"\nhello, ...\n```\n'
        "```python\nanswer = 42\n```\n"
        "```python\nassert answer == 42\nprint(answer)\n```\n"
        "```console\n$ echo shown\nnot what it shows\n```\n"
        "```sh\nfalse\necho never\n```\n"
    )
    page = Page(
        "x.md",
        tmp_path,
        port=free_port(),
        database=lambda placeholder: pytest.fail("no database here"),
        env=reader_env(),
        testing_pg_url="",
        markdown=markdown,
        readme_setup=False,
    )
    result = page.run(parse("x.md", markdown))
    assert len(result.ran) == 6
    assert [(f.block.line, f.message.splitlines()[0]) for f in result.failures] == [
        (15, "$ echo shown"),
        (19, "exit status 1"),
    ]
    assert "never" not in result.failures[1].message
