"""Start-up of the ``tickwork`` command: the wall time of ``tickwork --help``, ``next``,
``jobs`` and ``runs``, which every call of a script pays.

    python benchmarks/startup.py [--repeat 15] [--src PATH ...]

Each command runs ``--repeat`` times as ``python -m tickwork ...`` (jobs and runs on a
migrated SQLite file with a few jobs, as a user's first calls see it); the median and the
fastest wall time, and the median CPU time (user + system, what a loaded machine inflates
least) are printed per command, in milliseconds. The modules' bytecode is cached, as an
installed package has it: the child runs without ``PYTHONDONTWRITEBYTECODE`` and each
command runs once untimed first. (Before 2026-12-04 20:00 UTC the child inherited that
variable where the environment set it, and with no ``__pycache__`` in a source tree every
run compiled tickwork's modules again: about 100 ms of CPU of each command here.)
``--src`` compares checkouts: each is put first on ``PYTHONPATH`` (``git archive <commit>
| tar -x -C /tmp/base``, then ``--src /tmp/base/src --src src``), and the runs alternate
between them, so a load that comes and goes touches both alike. ``--json`` prints the
figures as one object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {
    "--help": ["--help"],
    "next": ["next", "0 9 * * MON-FRI", "--tz", "Europe/Berlin"],
    "jobs": ["jobs", "--db", "{db}"],
    "runs": ["runs", "--db", "{db}"],
}


def once(src: str | None, argv: list[str]) -> tuple[float, float]:
    """The wall time and the CPU time (user + system) of one ``tickwork ARGV``, whose
    modules' bytecode is written and read whatever the environment says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src is not None:
        env["PYTHONPATH"] = src
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tickwork", *argv],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def seed(src: str | None, db: str) -> None:
    once(src, ["db", "migrate", "--db", db])
    for _ in range(3):
        once(src, ["submit", "--db", db, "--every", "1h", "shell", "--", "true"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--src", action="append", help="a checkout's src/ (default: installed)")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    sources: list[str | None] = list(options.src or [None])
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {src: f"sqlite:///{Path(tmp) / f'{i}.db'}" for i, src in enumerate(sources)}
        for src in sources:
            seed(src, dbs[src])
            for argv in COMMANDS.values():  # untimed: writes the bytecode a run then reads
                once(src, [a.replace("{db}", dbs[src]) for a in argv])
        times: dict[str | None, dict[str, list[tuple[float, float]]]] = {
            s: {c: [] for c in COMMANDS} for s in sources
        }
        for _ in range(options.repeat):
            for name, argv in COMMANDS.items():
                for src in sources:
                    shown = [a.replace("{db}", dbs[src]) for a in argv]
                    times[src][name].append(once(src, shown))
    figures = {
        str(src or "installed"): {
            name: {
                "median_ms": round(statistics.median(w for w, _ in t) * 1000),
                "fastest_ms": round(min(w for w, _ in t) * 1000),
                "cpu_median_ms": round(statistics.median(c for _, c in t) * 1000),
            }
            for name, t in by_command.items()
        }
        for src, by_command in times.items()
    }
    if options.json:
        print(json.dumps(figures))
        return
    for src, by_command in figures.items():
        print(src)
        for name, f in by_command.items():
            print(
                f"  tickwork {name:<7} median {f['median_ms']:>5} ms  "
                f"fastest {f['fastest_ms']:>5} ms  CPU median {f['cpu_median_ms']:>5} ms"
            )


if __name__ == "__main__":
    main()
