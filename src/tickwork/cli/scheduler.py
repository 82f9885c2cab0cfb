"""``tickwork scheduler``: run one scheduler node until SIGTERM or SIGINT.

Run it on two or three hosts against one PostgreSQL: one leads, the others stand by. Every
timing flag overrides the ``TICKWORK_*`` environment variable of the same name
(``--leader-lease`` and ``TICKWORK_LEADER_LEASE``), which overrides the default. On
SIGTERM or SIGINT the node stops triggering, resigns leadership (a standby takes over at
its next attempt, without waiting out the lease) and exits 0.

Started while the database does not answer, it waits for it, logging the wait once, and
then starts (``--exit-on-unavailable``: exit 1 at once instead; :mod:`tickwork.node`).

Logs go to stderr, one line per event, with the transition word first: ``lead``,
``resign``, ``trigger``, ``skip``, ``cancel``, ``rescue``, ``prune``.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from tickwork.cli.app import app
from tickwork.cli.options import (
    DbOption,
    ExitOnUnavailableOption,
    LogFormatOption,
    LogLevelOption,
    duration_flag,
    duration_option,
)
from tickwork.cli.output import redact
from tickwork.cli.serve import StopWait, configure_logging, serve_until_signal
from tickwork.config import TRIGGER_BATCH, Config
from tickwork.tasks.registry import Registry

log = logging.getLogger("tickwork.scheduler")


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
        str | None, duration_option("--leader-lease", "Leader lease TTL")
    ] = None,
    leader_renew: Annotated[
        str | None,
        duration_option("--leader-renew", "Leader renews (standbys try to acquire) this often"),
    ] = None,
    leader_safety_margin: Annotated[
        str | None,
        duration_option(
            "--leader-safety-margin",
            "Stop leading this long before the lease could lapse",
        ),
    ] = None,
    rescue_interval: Annotated[
        str | None,
        duration_option("--rescue-interval", "Rescue expired run leases this often"),
    ] = None,
    prune_interval: Annotated[
        str | None,
        duration_option("--prune-interval", "Prune finished runs this often"),
    ] = None,
    retention: Annotated[
        str | None,
        duration_option("--retention", "Keep finished runs this long"),
    ] = None,
    poll_interval: Annotated[
        str | None,
        duration_option(
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
    exit_on_unavailable: ExitOnUnavailableOption = False,
    log_level: LogLevelOption = "INFO",
    log_format: LogFormatOption = "text",
) -> None:
    """Run a scheduler node: lead (trigger due jobs, rescue, prune) or stand by."""
    from tickwork.node import Node  # here: the other commands load no worker

    config = Config.from_env(
        db_url=db,
        node_id=node_id,
        leader_lease=duration_flag("leader_lease", leader_lease),
        leader_renew=duration_flag("leader_renew", leader_renew),
        leader_safety_margin=duration_flag("leader_safety_margin", leader_safety_margin),
        rescue_interval=duration_flag("rescue_interval", rescue_interval),
        prune_interval=duration_flag("prune_interval", prune_interval),
        retention=duration_flag("retention", retention),
        poll_interval=duration_flag("poll_interval", poll_interval),
        trigger_batch=trigger_batch,
        exit_on_unavailable=True if exit_on_unavailable else None,
    )
    configure_logging(log_level, log_format)

    node = Node(config, Registry(), worker=False)
    try:

        def start(wait: StopWait) -> None:
            log.info(
                "scheduler node=%s db=%s lease=%gs renew=%gs",
                config.node_id,
                redact(config.db_url),
                config.leader_lease.total_seconds(),
                config.leader_renew.total_seconds(),
            )
            node.start(wait)  # during an outage: waits for the database (tickwork.node)

        serve_until_signal(start, node.stop)
        log.info("scheduler node=%s stopped", config.node_id)
    finally:
        node.close()  # idempotent; also when start failed
