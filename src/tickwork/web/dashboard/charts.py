"""The activity charts: the per-minute rollup as server-rendered SVG, readable without
JavaScript and without a chart library.

A window (1 h, 6 h, 24 h) is cut into at most :data:`MAX_BUCKETS` buckets of whole minutes
(1, 5 and 20 min), ending with the current minute. Each bucket sums the minutes in it:
runs finished by outcome; start lag p50/p99 from the merged histograms (scheduled first
attempts only; :func:`tickwork.stats.bucket_percentile`); queue depth as the largest sample.

Every bar and point carries its numbers in ``data-*`` attributes and a ``<title>`` (the
tooltip a browser shows), and each chart has a table of the same numbers in a
``<details>``: what the tests read, and what a screen reader says.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from markupsafe import Markup, escape

from tickwork.records import RunMinute
from tickwork.stats import bucket_percentile

WINDOWS = {
    "1h": (timedelta(hours=1), 1),
    "6h": (timedelta(hours=6), 5),
    "24h": (timedelta(hours=24), 20),
}
"""The windows the charts offer: (span, minutes per bucket)."""
DEFAULT_WINDOW = "1h"
MAX_BUCKETS = 72

WIDTH, HEIGHT = 720, 170
LEFT, RIGHT, TOP, BOTTOM = 52, 8, 10, 22
"""The plot area's margins, in SVG units: the y labels on the left, the times below."""
OUTCOMES = ("succeeded", "failed", "dead")


@dataclass(frozen=True, slots=True)
class Bucket:
    start: datetime
    minutes: int
    succeeded: int
    failed: int
    dead: int
    lag_p50: float | None
    lag_p99: float | None
    depth: int

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed + self.dead


def buckets(now: datetime, minutes: list[RunMinute], window: str) -> list[Bucket]:
    """The window's buckets, oldest first, ending with the minute that holds ``now``."""
    span, step = WINDOWS[window]
    end = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    count = int(span / timedelta(minutes=step))
    start = end - timedelta(minutes=step * count)
    groups: list[list[RunMinute]] = [[] for _ in range(count)]
    for m in minutes:
        index = int((m.minute - start) / timedelta(minutes=step))
        if 0 <= index < count:
            groups[index].append(m)
    found = []
    for i, group in enumerate(groups):
        lag: Counter[int] = Counter()
        for m in group:
            lag.update(m.lag)
        found.append(
            Bucket(
                start=start + timedelta(minutes=step * i),
                minutes=step,
                succeeded=sum(m.succeeded for m in group),
                failed=sum(m.failed for m in group),
                dead=sum(m.dead for m in group),
                lag_p50=bucket_percentile(lag, 50),
                lag_p99=bucket_percentile(lag, 99),
                depth=max((m.depth for m in group), default=0),
            )
        )
    return found


def nice_ceiling(value: float) -> float:
    """The y axis' top: ``value`` rounded up to 1, 2 or 5 times a power of ten (at least 1)."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for factor in (1, 2, 5, 10):
        if value <= factor * power:
            return float(factor * power)
    raise AssertionError("unreachable")


def _hhmm(value: datetime) -> str:
    return value.strftime("%H:%M")


def _frame(chart_id: str, label: str, top: float, unit: str, found: list[Bucket]) -> list[str]:
    """The SVG's opening, its axes and its labels: the y top and zero, times below."""
    bottom = HEIGHT - BOTTOM
    parts = [
        f'<svg id="{chart_id}" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg" '
        f'data-top="{top:g}">',
        f"<title>{escape(label)}</title>",
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}"/>',
        f'<line class="grid" x1="{LEFT}" y1="{TOP}" x2="{WIDTH - RIGHT}" y2="{TOP}"/>',
        f'<text class="tick" x="{LEFT - 4}" y="{TOP + 4}" text-anchor="end">'
        f"{escape(_value(top, unit))}</text>",
        f'<text class="tick" x="{LEFT - 4}" y="{bottom}" text-anchor="end">0</text>',
    ]
    if found:
        width = _slot_width(found)
        for i in range(0, len(found), max(1, len(found) // 6)):
            x = LEFT + i * width
            parts.append(
                f'<text class="tick" x="{x:.1f}" y="{HEIGHT - 6}">{_hhmm(found[i].start)}</text>'
            )
    return parts


def _slot_width(found: list[Bucket]) -> float:
    return (WIDTH - LEFT - RIGHT) / len(found)


def _y(value: float, top: float) -> float:
    bottom = HEIGHT - BOTTOM
    return bottom - (bottom - TOP) * min(value, top) / top


def _value(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value / 1000:g} s" if value >= 1000 else f"{value:g} ms"
    return f"{value:g}"


def outcomes_chart(found: list[Bucket]) -> Markup:
    """Stacked bars: runs finished per bucket, succeeded at the bottom, then failed, dead."""
    top = nice_ceiling(max((b.finished for b in found), default=0))
    label = f"Runs finished per {found[0].minutes} min by outcome" if found else "Runs finished"
    parts = _frame("chart-outcomes", label, top, "", found)
    width = _slot_width(found) if found else 0.0
    for i, b in enumerate(found):
        x = LEFT + i * width + 0.5
        title = f"{_hhmm(b.start)}: {b.succeeded} succeeded, {b.failed} failed, {b.dead} dead"
        parts.append(
            f'<g class="bucket" data-start="{b.start.isoformat()}" data-succeeded="{b.succeeded}"'
            f' data-failed="{b.failed}" data-dead="{b.dead}"><title>{escape(title)}</title>'
        )
        base: float = HEIGHT - BOTTOM
        for outcome in OUTCOMES:
            count = getattr(b, outcome)
            if count:
                y = _y(count, top) - (HEIGHT - BOTTOM - base)
                parts.append(
                    f'<rect class="bar {outcome}" x="{x:.1f}" y="{y:.1f}" '
                    f'width="{max(width - 1, 0.5):.1f}" height="{base - y:.1f}"/>'
                )
                base = y
        # An invisible full-height target, so the tooltip shows over an empty bucket too.
        parts.append(
            f'<rect class="hit" x="{x - 0.5:.1f}" y="{TOP}" width="{width:.1f}" '
            f'height="{HEIGHT - BOTTOM - TOP}"/></g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _line_chart(
    chart_id: str, label: str, found: list[Bucket], series: dict[str, list[float | None]], unit: str
) -> Markup:
    values = [v for points in series.values() for v in points if v is not None]
    top = nice_ceiling(max(values, default=0))
    parts = _frame(chart_id, label, top, unit, found)
    width = _slot_width(found) if found else 0.0
    for name, points in series.items():
        segment: list[str] = []
        runs: list[list[str]] = []
        for i, v in enumerate(points):
            if v is None:
                if segment:
                    runs.append(segment)
                segment = []
                continue
            segment.append(f"{LEFT + (i + 0.5) * width:.1f},{_y(v, top):.1f}")
        if segment:
            runs.append(segment)
        for run in runs:
            shape = "polyline" if len(run) > 1 else "circle"
            if shape == "circle":
                cx, cy = run[0].split(",")
                parts.append(f'<circle class="line {name}" cx="{cx}" cy="{cy}" r="2"/>')
            else:
                parts.append(f'<polyline class="line {name}" points="{" ".join(run)}"/>')
    for i, b in enumerate(found):
        shown = ", ".join(
            f"{name.replace('_', ' ')} {_value(v, unit) if v is not None else '–'}"
            for name, v in ((n, p[i]) for n, p in series.items())
        )
        data = " ".join(
            f'data-{name.replace("_", "-")}="{"" if p[i] is None else f"{p[i]:g}"}"'
            for name, p in series.items()
        )
        parts.append(
            f'<rect class="hit point" data-start="{b.start.isoformat()}" {data} '
            f'x="{LEFT + i * width:.1f}" y="{TOP}" width="{width:.1f}" '
            f'height="{HEIGHT - BOTTOM - TOP}"><title>{escape(_hhmm(b.start) + ": " + shown)}'
            "</title></rect>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def lag_chart(found: list[Bucket]) -> Markup:
    """Start lag p50 and p99 per bucket (ms), of scheduled first attempts only."""
    step = found[0].minutes if found else 1
    return _line_chart(
        "chart-lag",
        f"Start lag p50 and p99 per {step} min (scheduled first attempts)",
        found,
        {"p50": [b.lag_p50 for b in found], "p99": [b.lag_p99 for b in found]},
        "ms",
    )


def depth_chart(found: list[Bucket]) -> Markup:
    """Due runs waiting, the largest sample in each bucket."""
    step = found[0].minutes if found else 1
    return _line_chart(
        "chart-depth",
        f"Queue depth (due runs waiting), largest sample per {step} min",
        found,
        {"depth": [float(b.depth) for b in found]},
        "",
    )
