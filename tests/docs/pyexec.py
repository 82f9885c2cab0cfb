"""The Python of one page, as a reader pastes it into one interpreter: run as a child
process in the page's directory, it executes each block it is sent in one shared namespace.

Protocol: one JSON object a line on stdin, ``{"code": ..., "filename": ...}``; one JSON
object a line back on the stdout it started with, ``{"ok": bool, "output": str,
"error": str}``. What a block prints goes to ``output``, never into the protocol's stream.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def main() -> None:
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    # A block's own prints (and its threads', and logging's) land in a buffer or in the
    # harness's log, never in the reply stream.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.path.insert(0, os.getcwd())  # as `python` in this directory: `import myapp.tasks`
    namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": __builtins__}
    for line in sys.stdin:
        request = json.loads(line)
        captured = io.StringIO()
        ok, error = True, ""
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            try:
                exec(compile(request["code"], request["filename"], "exec"), namespace)
            except BaseException:
                ok, error = False, traceback.format_exc()
        replies.write(json.dumps({"ok": ok, "output": captured.getvalue(), "error": error}))
        replies.write("\n")


if __name__ == "__main__":
    main()
