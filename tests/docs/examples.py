"""The examples of the README and docs/*.md, and how a page's examples are run as written.

Which blocks run: the fence's language decides, one rule for every page.

- ``sh``: shell commands, run by bash with ``set -eo pipefail``: every command must succeed
  (bash's rule: a failing ``a`` in ``a && b`` does not stop the block, so keep commands
  whose failure matters out of the left of ``&&``).
- ``console``: a transcript. ``$ `` starts a command (``\\`` continues it); the lines up to
  the next ``$ `` are its output (stdout and stderr, as a terminal shows them), compared
  line by line with runs of blanks as one blank; ``...`` in a line matches any text, and a
  line of just ``...`` any number of lines. A command that only reads (``tickwork runs``,
  ``jobs``, ``show``, ``runs dead`` ...; not ``runs retry`` or ``jobs pause``) is run
  again for up to 20 s until its output matches, as a reader looks again a moment later;
  any other command runs once.
- ``python``: a block whose first line is a comment naming a file (``# myapp/tasks.py``) is
  that file of the reader's project and is written there; a block with a ``def test_`` is
  a test module; any other block is a program. A page's programs run in one interpreter,
  in order, sharing one namespace (as pasted into one REPL); its test modules are
  concatenated in order into one module that pytest runs after the page's other blocks,
  with the pytest plugin tickwork installs: every test must pass, none skipped.
- Every other language (``text``, ``json``, ``mermaid``, ``sql`` ...) is not run: a
  diagram, a response, a log line, a usage synopsis. Every fence names its language.

A block of a running language that cannot run here is the rare exception, marked in place by
an HTML comment on the line before its fence, ``<!-- not run: the reason -->``; the tests
count and list them.

How a page runs: all its blocks, in order, in one fresh directory (the reader's), with the
venv's ``tickwork`` first on ``PATH``. Shell variables set by one block are set in the next
(one terminal). A long-running command (``tickwork run``, ``api``, ``worker``,
``scheduler``, on a line of its own) is started in the background, as in a terminal of its
own, and the block goes on once it says it is ready; the first such line of a block stops
the servers earlier blocks started (the reader moved on to another set-up), and the last
ones stop when the page ends. A page other than the README is read by someone who followed
the README: before its first sh or console block, its directory gets the README's project files
(``myapp/tasks.py``) and the README's first long-running command is started.

Substitutions, the same on every page (the whole table):

- a ``postgresql://`` URL with ``...`` in it (``postgresql://...``,
  ``postgresql://.../scratch``): a fresh migrated database of the test server, one per
  distinct URL per page;
- port ``8765``: a free port of the page's; a ``tickwork run`` or ``tickwork api`` without
  ``--port`` gets ``--port`` with it;
- ``curl``: ``curl --fail-with-body --silent --show-error``, so an HTTP error fails;
- ``TICKWORK_TESTING_PG_URL``: unset, but set to the test server on a page that names it
  (docs/testing-your-tasks.md tells its reader to set it for its examples).

``python tests/docs/examples.py`` prints every page's blocks by kind and the blocks not run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))
RUN_LANGUAGES = frozenset({"sh", "console", "python"})
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)(.*)$")
FILE_BLOCK = re.compile(r"\A#\s+([\w./-]+\.py)\s*\n")
TEST_BLOCK = re.compile(r"^(?:async\s+)?def\s+test_\w+", re.MULTILINE)
PG_PLACEHOLDER = re.compile(r"postgresql://[^\s'\"()]*\.\.\.[^\s'\"()]*")
PORT_WORD = re.compile(r"(?<![\d.])8765(?!\d)")
SERVER_LINE = re.compile(
    r"^(?P<indent>\s*)(?P<env>(?:[A-Z_][A-Z0-9_]*=\S*\s+)*)tickwork\s+"
    r"(?P<kind>run|api|worker|scheduler)\b(?P<rest>.*)$"
)
READ_COMMAND = re.compile(
    r"^tickwork\s+(?:runs(?!\s+(?:retry|cancel))|jobs(?!\s+(?:pause|resume|trigger|cancel))"
    r"|show|dead|queues|cluster|explain|next"
    r"|tenants(?:\s+show\b|\s*$|\s+--)|calendars(?:\s+show\b|\s*$|\s+--))"
)
"""The commands that only read (``runs``, ``runs dead``, ``jobs show`` ...), not those
that act (``runs retry``, ``runs cancel-all``, ``jobs pause`` ...)."""
READ_RETRY_SECONDS = 20.0
BLOCK_TIMEOUT = 180.0
TESTING_PG_ENV = "TICKWORK_TESTING_PG_URL"


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: str
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    not_run: str | None = None  # the reason given in place, for a block that cannot run

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and self.not_run is None

    @property
    def kind(self) -> str:
        """sh, console, python-file, python-test, python, or the inert language."""
        if self.language != "python":
            return self.language
        if FILE_BLOCK.match(self.text):
            return "python-file"
        if TEST_BLOCK.search(self.text):
            return "python-test"
        return "python"


def blocks(page: str) -> list[Block]:
    """The fenced blocks of ``page`` (README.md, docs/x.md), in order."""
    return parse(page, (ROOT / page).read_text())


def parse(page: str, markdown: str) -> list[Block]:
    """The fenced blocks of ``markdown``. Indented fences (in a list item) count; their
    indentation is removed."""
    lines = markdown.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, language = opening[1], opening[2], opening[3]
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines):
            closing = FENCE.match(lines[i])
            if (
                closing
                and closing[2][0] == fence[0]
                and len(closing[2]) >= len(fence)
                and not closing[3]
            ):
                break
            body.append(lines[i].removeprefix(indent))
            i += 1
        i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN.match(before)
        found.append(
            Block(
                page=page,
                line=start + 1,
                language=language,
                text="\n".join(body) + "\n",
                not_run=marker[1] if marker else None,
            )
        )
    return found


def every_block() -> Iterator[Block]:
    for page in PAGES:
        yield from blocks(page)


def not_run() -> list[Block]:
    """The blocks of a running language marked ``<!-- not run: ... -->``."""
    return [b for b in every_block() if b.language in RUN_LANGUAGES and b.not_run is not None]


def readme_setup() -> tuple[list[Block], str | None]:
    """What a reader of any other page has from the README: its project files, and its
    first long-running command."""
    readme = blocks("README.md")
    files = [b for b in readme if b.kind == "python-file" and b.runs]
    for block in readme:
        if block.kind == "sh" and block.runs:
            for line in logical_lines(block.text):
                if SERVER_LINE.match(line):
                    return files, line
    return files, None


# -- running a page --------------------------------------------------------------------------


def logical_lines(script: str) -> list[str]:
    """The lines of a shell script with ``\\``-continuations joined."""
    joined: list[str] = []
    pending = ""
    for line in script.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    return joined


PRELUDE = r"""
__tw_builtin=" $(compgen -v | tr '\n' ' ') "
if [ -f "$TW_STATE" ]; then source "$TW_STATE"; fi
__tw_save() {
  local __tw_status=$? __tw_name
  : > "$TW_STATE.new"
  for __tw_name in $(compgen -v); do
    case "$__tw_builtin" in *" $__tw_name "*) continue ;; esac
    case "$__tw_name" in __tw*|TW_*|BASH*|FUNCNAME|PIPESTATUS|_) continue ;; esac
    declare -p "$__tw_name" >> "$TW_STATE.new" 2>/dev/null || true
  done
  mv "$TW_STATE.new" "$TW_STATE"
  return $__tw_status
}
trap __tw_save EXIT
__tw_alive() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  [ "${s%% *}" != Z ]
}
__tw_stop_all() {
  [ -s "$TW_SERVERS" ] || return 0
  local pid log i
  while read -r pid log; do kill -TERM -- "-$pid" 2>/dev/null || true; done < "$TW_SERVERS"
  while read -r pid log; do
    i=0
    while __tw_alive "$pid"; do
      i=$((i + 1))
      if [ "$i" -gt 200 ]; then kill -KILL -- "-$pid" 2>/dev/null || true; fi
      sleep 0.1
    done
  done < "$TW_SERVERS"
  : > "$TW_SERVERS"
}
__tw_serve() {
  local kind=$1 pattern pid log i=0
  shift
  if [ -z "${__tw_served:-}" ]; then __tw_stop_all; __tw_served=1; fi
  log="$TW_HARNESS/server-$(date +%s%N).log"
  setsid "$@" > "$log" 2>&1 < /dev/null &
  pid=$!
  echo "$pid $log" >> "$TW_SERVERS"
  case $kind in
    run|api) pattern='ready on' ;;
    worker) pattern=' started: ' ;;
    *) pattern='scheduler node=' ;;
  esac
  until grep -q -- "$pattern" "$log"; do
    if ! __tw_alive "$pid"; then
      echo "exited before it was ready: $*" >&2; cat "$log" >&2; return 1
    fi
    i=$((i + 1))
    if [ "$i" -gt 600 ]; then echo "not ready in 60 s: $*" >&2; cat "$log" >&2; return 1; fi
    sleep 0.1
  done
}
curl() { command curl --fail-with-body --silent --show-error "$@"; }
set -eo pipefail
"""


@dataclass
class Failure:
    block: Block
    message: str

    def __str__(self) -> str:
        return f"{self.block.where} ({self.block.kind}): {self.message}"


@dataclass
class PageRun:
    """What running a page did: the blocks run, and those that failed."""

    page: str
    ran: list[Block] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # by block, where it ran


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


class Page:
    """One page's world: its directory, port, databases, servers and interpreter."""

    def __init__(
        self,
        page: str,
        base: Path,
        *,
        port: int,
        database: Callable[[str], str],
        env: dict[str, str],
        testing_pg_url: str,
        markdown: str | None = None,
        readme_setup: bool | None = None,
    ) -> None:
        self.page = page
        self.work = base / "work"  # the reader's directory
        self.harness = base / "harness"  # the test's own files
        self.work.mkdir(parents=True)
        self.harness.mkdir(parents=True)
        self.port = port
        self._database = database
        self._databases: dict[str, str] = {}
        self.servers = self.harness / "servers"
        self.servers.touch()
        self.env = dict(
            env,
            TW_STATE=str(self.harness / "state.sh"),
            TW_SERVERS=str(self.servers),
            TW_HARNESS=str(self.harness),
        )
        if TESTING_PG_ENV in (markdown if markdown is not None else (ROOT / page).read_text()):
            self.env[TESTING_PG_ENV] = testing_pg_url
        self._python: subprocess.Popen[str] | None = None
        self._python_log: IO[str] | None = None
        self._set_up = page == "README.md" if readme_setup is None else not readme_setup
        self.tests: list[Block] = []

    # -- substitutions

    def substitute(self, text: str) -> str:
        def database(match: re.Match[str]) -> str:
            placeholder = match[0]
            if placeholder not in self._databases:
                self._databases[placeholder] = self._database(placeholder)
            return self._databases[placeholder]

        text = PG_PLACEHOLDER.sub(database, text)
        return PORT_WORD.sub(str(self.port), text)

    def shell_script(self, text: str) -> str:
        """``text`` with its long-running commands started in the background."""
        out: list[str] = []
        for line in logical_lines(self.substitute(text)):
            server = SERVER_LINE.match(line)
            if not server:
                out.append(line)
                continue
            kind, rest = server["kind"], server["rest"]
            port = f" --port {self.port}" if kind in ("run", "api") and "--port" not in rest else ""
            command = f"env {server['env']}tickwork {kind}{port}{rest}"
            out.append(f"{server['indent']}__tw_serve {kind} {command}")
        return PRELUDE + "\n".join(out) + "\n"

    # -- running

    def run(self, page_blocks: list[Block]) -> PageRun:
        result = PageRun(self.page)
        try:
            for block in page_blocks:
                if not block.runs:
                    continue
                result.ran.append(block)
                started = time.monotonic()
                error = self._run_block(block)
                result.seconds[block.where] = time.monotonic() - started
                if error is not None:
                    result.failures.append(Failure(block, error))
            if self.tests:
                started = time.monotonic()
                error = self._run_tests()
                result.seconds[f"{self.page}: the tests"] = time.monotonic() - started
                if error is not None:
                    result.failures.append(Failure(self.tests[0], error))
        finally:
            self.close()
        return result

    def _run_block(self, block: Block) -> str | None:
        if block.kind in ("sh", "console") and not self._set_up:
            self._set_up = True
            error = self._readme_setup()
            if error is not None:
                return f"the README's set-up failed: {error}"
        if block.kind == "sh":
            status, output = self._sh(block.text)
            error = None if status == 0 else f"exit status {status}\n{tail(output)}"
            return error or self._servers_alive()
        if block.kind == "console":
            return self._console(block) or self._servers_alive()
        if block.kind == "python-file":
            return self._write_file(block)
        if block.kind == "python-test":
            self.tests.append(block)
            return None
        return self._python_block(block)

    def _readme_setup(self) -> str | None:
        files, server = readme_setup()
        for file_block in files:
            error = self._write_file(file_block)
            if error is not None:
                return error
        if server is None:
            return None
        status, output = self._sh(server + "\n")
        return None if status == 0 else f"{server}: exit status {status}\n{tail(output)}"

    def _sh(self, text: str) -> tuple[int, str]:
        script = self.harness / "block.sh"
        script.write_text(self.shell_script(text))
        try:
            proc = subprocess.run(
                ["bash", str(script)],
                check=False,
                cwd=self.work,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=BLOCK_TIMEOUT,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            output = exc.stdout if isinstance(exc.stdout, str) else ""
            return -1, f"timed out after {BLOCK_TIMEOUT:.0f} s\n{output}"
        return proc.returncode, proc.stdout

    def _console(self, block: Block) -> str | None:
        for command, shown in transcript(self.substitute(block.text)):
            expected, wanted = exit_status(shown)
            deadline = time.monotonic() + (
                READ_RETRY_SECONDS if READ_COMMAND.match(command) else 0.0
            )
            while True:
                status, output = self._sh(command + "\n")
                if status == wanted and output_matches(expected, output):
                    break
                if time.monotonic() >= deadline:
                    return (
                        f"$ {command}\nexit status {status}; expected:\n"
                        + "\n".join(expected)
                        + f"\ngot:\n{tail(output)}"
                    )
                time.sleep(0.3)
        return None

    def _servers_alive(self) -> str | None:
        for pid, log in self._server_list():
            if not alive(pid):
                return f"a server of this page exited:\n{tail(Path(log).read_text())}"
        return None

    def _server_list(self) -> list[tuple[int, str]]:
        entries = []
        for line in self.servers.read_text().splitlines():
            pid, log = line.split(" ", 1)
            entries.append((int(pid), log))
        return entries

    def _write_file(self, block: Block) -> str | None:
        match = FILE_BLOCK.match(block.text)
        assert match is not None
        path = (self.work / match[1]).resolve()
        if not path.is_relative_to(self.work):
            return f"{match[1]} is outside the reader's directory"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.substitute(block.text))
        return None

    def _python_block(self, block: Block) -> str | None:
        if self._python is None:
            self._python_log = (self.harness / "python.log").open("w")
            self._python = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("pyexec.py"))],
                cwd=self.work,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._python_log,
                text=True,
                start_new_session=True,
            )
        assert self._python.stdin is not None
        assert self._python.stdout is not None
        request = {"code": self.substitute(block.text), "filename": block.where}
        self._python.stdin.write(json.dumps(request) + "\n")
        self._python.stdin.flush()
        # One reply line per request, so nothing waits in the reader's buffer meanwhile.
        ready, _, _ = select.select([self._python.stdout], [], [], BLOCK_TIMEOUT)
        if not ready:
            return f"no answer in {BLOCK_TIMEOUT:.0f} s"
        line = self._python.stdout.readline()
        if not line:
            return "the interpreter exited:\n" + tail((self.harness / "python.log").read_text())
        reply = json.loads(line)
        if reply["ok"]:
            return None
        return f"{reply['error']}{tail(reply['output'])}"

    def _run_tests(self) -> str | None:
        module = self.work / f"test_{Path(self.page).stem.replace('-', '_').lower()}.py"
        module.write_text("\n\n".join(self.substitute(b.text) for b in self.tests))
        expected = sum(len(TEST_BLOCK.findall(b.text)) for b in self.tests)
        report = self.harness / "pytest.xml"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={report}",
                module.name,
            ],
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=BLOCK_TIMEOUT * 2,
            check=False,
        )
        if not report.exists():
            return f"pytest wrote no report (exit {proc.returncode}):\n{tail(proc.stdout)}"
        suite = ET.parse(report).getroot()
        suite = suite if suite.tag == "testsuite" else suite[0]
        counts = {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}
        if proc.returncode != 0 or counts != {
            "tests": expected,
            "failures": 0,
            "errors": 0,
            "skipped": 0,
        }:
            return (
                f"the page's tests ({expected} in {len(self.tests)} blocks): {counts}, "
                f"exit {proc.returncode}\n{tail(proc.stdout, 80)}"
            )
        return None

    def close(self) -> None:
        if self._python is not None:
            assert self._python.stdin is not None
            assert self._python.stdout is not None
            self._python.stdin.close()
            try:
                self._python.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self._python.pid, signal.SIGKILL)
                self._python.wait()
            self._python.stdout.close()
            self._python = None
        if self._python_log is not None:
            self._python_log.close()
            self._python_log = None
        stop_servers(self._server_list())


def stop_servers(servers: list[tuple[int, str]]) -> None:
    """SIGTERM each server's process group; SIGKILL what is left after 20 s."""
    for pid, _ in servers:
        with_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    for pid, _ in servers:
        while alive(pid):
            if time.monotonic() > deadline:
                with_group(pid, signal.SIGKILL)
            time.sleep(0.05)


def with_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# -- transcripts ------------------------------------------------------------------------------


def transcript(text: str) -> list[tuple[str, list[str]]]:
    """A console block's commands, each with the output lines shown after it."""
    steps: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if steps:
                steps[-1][1].append(line)
            elif line.strip():
                raise ValueError(f"a console block starts with output, not '$ ': {line!r}")
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        steps.append((command, []))
        i += 1
    return [(command, trim_blank_end(out)) for command, out in steps]


EXIT_LINE = re.compile(r"\[exit (\d+)\]")
"""A transcript's last output line ``[exit 2]``: the command must end with that status (a
refusal shown as a reader sees it); without one it must succeed."""


def exit_status(shown: list[str]) -> tuple[list[str], int]:
    """The output a transcript shows for a command, and the exit status it must end with."""
    last = EXIT_LINE.fullmatch(shown[-1].strip()) if shown else None
    return (shown[:-1], int(last.group(1))) if last else (shown, 0)


def trim_blank_end(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def squeeze(line: str) -> str:
    return " ".join(line.split())


def output_matches(expected: list[str], output: str) -> bool:
    """Whether ``output`` is what the transcript shows (see the module docstring)."""
    pattern = ""
    for line in expected:
        shown = squeeze(line)
        if shown == "...":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += ".*?".join(re.escape(part) for part in shown.split("...")) + r"\n"
    got = "".join(squeeze(line) + "\n" for line in trim_blank_end(output.splitlines()))
    return re.fullmatch(pattern, got) is not None


def summary() -> str:
    """Every page's blocks by kind, and the blocks not run with their reasons."""
    rows = []
    for page in PAGES:
        kinds: dict[str, int] = {}
        for block in blocks(page):
            key = block.kind if block.runs else ("not run" if block.not_run else "inert")
            kinds[key] = kinds.get(key, 0) + 1
        rows.append(f"{page}: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    skipped = [f"  {b.where} ({b.language}): {b.not_run}" for b in not_run()]
    return "\n".join([*rows, f"not run ({len(skipped)}):", *skipped])


if __name__ == "__main__":
    print(summary())
