"""What every benchmark here shares: throw-away PostgreSQL databases, percentiles, the machine.

Each benchmark works in a database of its own, created fresh and dropped at the end (even on
error or Ctrl-C), on the server named by ``--pg`` (default: the local one, as root). Numbers
are printed with the machine they were taken on, because on a shared 2-core box the
absolute figures move a lot; ratios taken in one interleaved run move much less.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import statistics
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import psycopg

from tickwork import stats

PG_SERVER = os.environ.get("TICKWORK_BENCH_PG", "postgresql://root@127.0.0.1:5432")
"""Server URL without a database name; each benchmark adds a fresh database of its own."""


def database_url(server: str, name: str) -> str:
    return f"{server.rstrip('/')}/{name}"


@contextlib.contextmanager
def fresh_database(server: str, prefix: str) -> Iterator[str]:
    """Create an empty database, yield its URL, drop it afterwards (connections forced off)."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url(server, "postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(server, name)
    finally:
        with psycopg.connect(database_url(server, "postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def percentile(values: Sequence[float], p: float) -> float:
    """:func:`tickwork.stats.percentile` (p in 0..100), NaN for no values: a table cell."""
    found = stats.percentile(values, p)
    return math.nan if found is None else found


def median(values: Sequence[float]) -> float:
    clean = [v for v in values if not math.isnan(v)]
    return statistics.median(clean) if clean else math.nan


def machine(server: str | None = None) -> str:
    """One line: cores, CPU model, RAM, Python and (given a server) the PostgreSQL version."""
    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    ram = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
                break
    load = "?"
    with contextlib.suppress(OSError):
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    parts = [
        f"{os.cpu_count()} cores ({model})",
        f"RAM {ram}",
        f"load {load}",
        f"Python {platform.python_version()}",
    ]
    if server is not None:
        with psycopg.connect(database_url(server, "postgres")) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        parts.append(f"PostgreSQL {row[0] if row else '?'}")
    return ", ".join(parts)


def fmt(value: float, digits: int = 0) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:,.{digits}f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table, first column left-aligned, the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        out = [str(cells[0]).ljust(widths[0])]
        out += [str(c).rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])
