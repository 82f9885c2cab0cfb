"""What the listing commands share (``jobs``, ``runs``, ``dead``, ``keys list``, ``show``,
``cluster``): their options, cursor paging, and one way to print a table.

Paging is the same everywhere: newest first (descending id), ``--limit N`` rows at most,
``--after ID`` for the rows with ids below ``ID``. ``--json`` prints one JSON list of the
rows; its next page is ``--after <the last row's id>``. A table ends with that hint when
more rows may follow.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Protocol, TypeVar

from tickwork.cli import output
from tickwork.cli.output import echo
from tickwork.cron import Fire
from tickwork.job import show_controls
from tickwork.records import MAX_PAGE, Page


class HasId(Protocol):
    @property
    def id(self) -> int: ...


T = TypeVar("T", bound=HasId)


def collect(fetch: Callable[[int | None, int], Page[T]], limit: int, after: int | None) -> list[T]:
    """Up to ``limit`` rows from ``fetch(after, page_size)``, page after page."""
    rows: list[T] = []
    while len(rows) < limit:
        page = fetch(after, min(limit - len(rows), MAX_PAGE))
        rows.extend(page.items)
        if page.next_cursor is None:
            break
        after = page.next_cursor
    return rows


WATCH_INTERVAL = 1.0
"""Seconds between two drawings of a ``--watch`` listing."""
_CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear the screen: what watch(1) does


def watch(draw: Callable[[], None], enabled: bool) -> None:
    """``draw()`` once; with ``--watch`` (``enabled``), again every second until Ctrl-C,
    in place on a terminal (the screen cleared first), else one after another, each table
    under its header (a JSON document a line under ``--json``)."""
    if not enabled:
        draw()
        return
    stdout = output.stdout  # a rich console, made (and rich imported) here, on first use
    terminal = stdout.is_terminal
    try:
        while True:
            if terminal:
                stdout.file.write(_CLEAR)
            draw()
            stdout.file.flush()
            time.sleep(WATCH_INTERVAL)
    except KeyboardInterrupt:
        return


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A borderless table: one that fits a terminal, every character into a pipe. Control
    and bidi characters in cells are written as their codes (:func:`echo`)."""
    from rich.console import Console  # here, not at the top: `next` prints no table
    from rich.table import Table

    rows = [[show_controls(cell) for cell in row] for row in rows]
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in header:
        table.add_column(column, no_wrap=True, overflow="ellipsis")
    for row in rows:
        table.add_row(*row)
    full = sum(max(len(cell) for cell in column) + 2 for column in zip(header, *rows, strict=True))
    stdout = output.stdout
    console = stdout if stdout.is_terminal else Console(file=stdout.file, width=full)
    console.print(table)


def print_page(
    header: Sequence[str], rows: Sequence[Sequence[str]], items: Sequence[HasId], limit: int
) -> None:
    """A listing's table, with the ``--after`` of its next page when it was cut at ``limit``."""
    if not items:
        echo("(none)")
        return
    print_table(header, rows)
    if len(items) >= limit:
        echo(f"(first {limit}; for more: --after {items[-1].id})")


def when(value: datetime | None, zone: tzinfo = UTC) -> str:
    """A time in a table cell, to the second, with its zone: ``2026-12-01 09:00:00 UTC``
    (or in ``zone``: ``2026-12-01 10:00:00 CET``); empty for none. Sub-second digits say
    nothing here (``--json`` keeps them)."""
    if value is None:
        return ""
    return value.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")


def first_line(text: str | None, width: int = 60) -> str:
    return (text or "").partition("\n")[0][:width]


def fire_line(fire: Fire, zone: tzinfo) -> str:
    """One upcoming slot for a terminal: its time in ``zone``, then what a DST change or a
    calendar does there; a skipped slot reads ``(no run)``."""
    at = fire.at.astimezone(zone).isoformat(timespec="seconds")
    if fire.skipped:
        return f"{at}  (no run) {fire.note}"
    return f"{at}  <- {fire.note}" if fire.note else at
