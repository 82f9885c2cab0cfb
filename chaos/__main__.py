"""``python -m chaos`` (``scripts/chaos``): run the nemeses, or re-check a run directory.

Exit status: 0 when the checker found nothing, 1 on a violation or a lag that did not
recover, 2 when the run itself could not be made (no root, no PostgreSQL binaries ...).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from pathlib import Path

from chaos import checker, nemesis, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short windows (CI)")
    parser.add_argument("--out", type=Path, help="run directory (default chaos-runs/<mode>-<time>)")
    parser.add_argument(
        "--only",
        help="comma-separated nemeses, in order: " + ", ".join(nemesis.BY_NAME),
    )
    parser.add_argument("--check", type=Path, metavar="DIR", help="re-check a run directory")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument(
        "--tickwork-src",
        type=Path,
        metavar="DIR",
        help="run the nodes on the tickwork in DIR (a src/ directory of another checkout)",
    )
    args = parser.parse_args(argv)
    # SIGTERM must unwind like Ctrl-C: the cluster's postmasters and namespaces are cleaned
    # up on the way out (atexit does not run on a signal's default action).
    signal.signal(signal.SIGTERM, _exit_on_signal)
    logging.basicConfig(level=logging.INFO, format="chaos %(levelname)s %(name)s: %(message)s")
    logging.getLogger("chaos.net").setLevel(logging.WARNING)  # a refused proxy a connect

    if args.check is not None:
        report = checker.check(args.check)
    else:
        mode = run.QUICK if args.quick else run.FULL
        only = [name.strip() for name in args.only.split(",")] if args.only else None
        unknown = [name for name in only or [] if name not in nemesis.BY_NAME]
        if unknown:
            parser.error(f"unknown nemesis: {', '.join(unknown)}")
        out = args.out or Path("chaos-runs") / f"{mode.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        began = time.monotonic()
        try:
            report = run.run(mode, out, only, args.tickwork_src)
        except Exception as exc:
            logging.getLogger("chaos").exception("the run failed")
            print(f"chaos: the run could not be made: {exc} (run directory: {out})")
            return 2
        run.say(f"done in {time.monotonic() - began:.0f} s; run directory: {out}")
    print(report.markdown() if args.markdown else report.render())
    return 0 if report.ok else 1


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
