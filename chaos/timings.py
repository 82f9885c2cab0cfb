"""How long each nemesis took to heal, read from a run directory's node logs.

``python -m chaos.timings RUN_DIR`` prints, per nemesis window:

- **failover**: for a fault of the leader, seconds from the fault to the first ``lead``
  line of another scheduler;
- **outage**: the longest ``store ... is back after X s`` any node logged in the window
  (how long its calls failed), and how many nodes logged one;
- **re-listen**: the longest ``listening again after X s``;
- **first start**: seconds from the heal to the first execution that started after it.

The checker judges; this only measures (the numbers in docs/reliability.md).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

LINE = re.compile(r"^(\S+Z) (\w+) (\S+): (.*)$")
LEAD = re.compile(r"lead epoch=(\d+) node=(\S+)")
BACK = re.compile(r"is back after ([\d.]+) s")
RELISTEN = re.compile(r"listening again after ([\d.]+) s")


@dataclass(frozen=True)
class Timing:
    name: str
    failover: float | None
    outage: float | None
    outage_nodes: int
    relisten: float | None
    first_start: float | None


def log_lines(run_dir: Path) -> list[tuple[float, str, str]]:
    """(wall time, node, message) of every node log line, in time order."""
    found: list[tuple[float, str, str]] = []
    for path in sorted((run_dir / "logs").glob("*.log")):
        for raw in path.read_text(errors="replace").splitlines():
            match = LINE.match(raw)
            if match:
                at = datetime.fromisoformat(match.group(1).replace("Z", "+00:00")).timestamp()
                found.append((at, path.stem, match.group(4)))
    return sorted(found)


def measure(run_dir: Path) -> list[Timing]:
    meta = json.loads((run_dir / "meta.json").read_text())
    windows = [json.loads(line) for line in (run_dir / "nemeses.jsonl").read_text().splitlines()]
    lines = log_lines(run_dir)
    starts = sorted(
        json.loads(line)["mono"] + meta["mono_offset"]
        for line in (run_dir / "history.jsonl").read_text().splitlines()
        if line.strip().endswith("}") and '"ev": "start"' in line
    )
    timings: list[Timing] = []
    for window in windows:
        fault_at, healed = window["fault"]
        inside = [(at, node, text) for at, node, text in lines if fault_at <= at < window["end"]]
        failover = None
        if window.get("leader"):
            targets = set(window["targets"])
            leads = [at for at, node, text in inside if LEAD.search(text) and node not in targets]
            failover = leads[0] - fault_at if leads else None
        backs = [(float(m.group(1)), node) for _, node, text in inside if (m := BACK.search(text))]
        relistens = [float(m.group(1)) for _, _, text in inside if (m := RELISTEN.search(text))]
        after = [at for at in starts if at >= healed]
        timings.append(
            Timing(
                window["name"],
                failover,
                max((seconds for seconds, _ in backs), default=None),
                len({node for _, node in backs}),
                max(relistens, default=None),
                after[0] - healed if after else None,
            )
        )
    return timings


def markdown(timings: list[Timing]) -> str:
    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    rows = [
        "| nemesis | failover (s) | longest outage (s), nodes | longest re-listen (s) | "
        "first start after the heal (s) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for t in timings:
        outage = "-" if t.outage is None else f"{t.outage:.1f}, {t.outage_nodes}"
        rows.append(
            f"| {t.name} | {seconds(t.failover)} | {outage} | {seconds(t.relisten)} | "
            f"{seconds(t.first_start)} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m chaos.timings RUN_DIR", file=sys.stderr)
        return 2
    print(markdown(measure(Path(args[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
