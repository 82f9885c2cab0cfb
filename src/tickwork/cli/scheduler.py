"""``tickwork scheduler``: run one scheduler node until SIGTERM or SIGINT.

Run it on two or three hosts against one PostgreSQL: one leads, the others stand by. Every
timing flag overrides the ``TICKWORK_*`` environment variable of the same name
(``--leader-lease`` and ``TICKWORK_LEADER_LEASE``), which overrides the default. On
SIGTERM or SIGINT the node stops triggering, resigns leadership (a standby takes over at
its next attempt, without waiting out the lease) and exits 0.

Logs go to stderr, one line per event, with the transition word first: ``lead``,
``resign``, ``trigger``, ``skip``, ``cancel``, ``rescue``, ``prune``.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import typer

from tickwork.cli.output import DbOption, app
from tickwork.config import TRIGGER_BATCH, Config
from tickwork.errors import ValidationError
from tickwork.schedule import format_seconds, parse_duration
from tickwork.scheduler import Scheduler
from tickwork.store import open_store

log = logging.getLogger("tickwork.scheduler")

LOG_FORMATS = ("text", "json")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _duration_option(flag: str, what: str) -> Any:
    """A duration flag (``500ms``, ``2s``, ``5m``) whose help names its default and env."""
    name = flag[2:].replace("-", "_")
    default = getattr(Config(), name)
    return typer.Option(
        flag,
        metavar="DURATION",
        show_default=False,
        help=f"{what}. Default {format_seconds(default.total_seconds())}; "
        f"env TICKWORK_{name.upper()}.",
    )


@app.command("scheduler")
def scheduler(
    *,
    db: DbOption = "",
    node_id: Annotated[
        str | None,
        typer.Option(
            "--node-id",
            metavar="ID",
            show_default=False,
            help="This node's name in the leader lease (default: host-pid-random).",
        ),
    ] = None,
    leader_lease: Annotated[
        str | None, _duration_option("--leader-lease", "Leader lease TTL")
    ] = None,
    leader_renew: Annotated[
        str | None,
        _duration_option("--leader-renew", "Leader renews (standbys try to acquire) this often"),
    ] = None,
    leader_safety_margin: Annotated[
        str | None,
        _duration_option(
            "--leader-safety-margin",
            "Stop leading this long before the lease could lapse",
        ),
    ] = None,
    rescue_interval: Annotated[
        str | None,
        _duration_option("--rescue-interval", "Rescue expired run leases this often"),
    ] = None,
    prune_interval: Annotated[
        str | None,
        _duration_option("--prune-interval", "Prune finished runs this often"),
    ] = None,
    retention: Annotated[
        str | None,
        _duration_option("--retention", "Keep finished runs this long"),
    ] = None,
    poll_interval: Annotated[
        str | None,
        _duration_option(
            "--poll-interval",
            "Without LISTEN/NOTIFY (SQLite), look for new jobs this often",
        ),
    ] = None,
    trigger_batch: Annotated[
        int | None,
        typer.Option(
            "--trigger-batch",
            min=1,
            show_default=False,
            help=f"Jobs per trigger transaction. Default {TRIGGER_BATCH}; "
            "env TICKWORK_TRIGGER_BATCH.",
        ),
    ] = None,
    log_level: Annotated[
        str, typer.Option("--log-level", metavar="LEVEL", help="DEBUG, INFO, WARNING, ERROR.")
    ] = "INFO",
    log_format: Annotated[
        str, typer.Option("--log-format", metavar="FORMAT", help="text or json.")
    ] = "text",
) -> None:
    """Run a scheduler node: lead (trigger due jobs, rescue, prune) or stand by."""
    config = Config.from_env(
        db_url=db,
        node_id=node_id,
        leader_lease=_duration("leader_lease", leader_lease),
        leader_renew=_duration("leader_renew", leader_renew),
        leader_safety_margin=_duration("leader_safety_margin", leader_safety_margin),
        rescue_interval=_duration("rescue_interval", rescue_interval),
        prune_interval=_duration("prune_interval", prune_interval),
        retention=_duration("retention", retention),
        poll_interval=_duration("poll_interval", poll_interval),
        trigger_batch=trigger_batch,
    )
    configure_logging(log_level, log_format)

    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        store = open_store(config.db_url)
        try:
            node = Scheduler(store, config)
            log.info(
                "scheduler node=%s db=%s lease=%gs renew=%gs",
                config.node_id,
                redact(config.db_url),
                config.leader_lease.total_seconds(),
                config.leader_renew.total_seconds(),
            )
            node.start()
            try:
                while not stop.wait(1.0):
                    pass
                log.info("stopping on %s", signal.Signals(received[0]).name)
            finally:
                node.stop()
            log.info("scheduler node=%s stopped", config.node_id)
        finally:
            store.close()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _duration(name: str, raw: str | None) -> timedelta | None:
    return None if raw is None else parse_duration(raw, field=name)


def redact(url: str) -> str:
    """``url`` without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts``, ``level``, ``logger``, ``msg`` (and ``exc``)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, fmt: str) -> None:
    """Log lines to stderr: plain text (``ts level logger: message``) or JSON."""
    if fmt not in LOG_FORMATS:
        raise ValidationError(
            f"--log-format must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}",
            field="log_format",
        )
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValidationError(f"unknown log level {level!r}", field="log_level")
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        text = logging.Formatter(
            "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s",
            datefmt="%Y-%m-%dT%H:%M:%S",
        )
        text.converter = time.gmtime
        handler.setFormatter(text)
    root = logging.getLogger("tickwork")
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    root.propagate = False
