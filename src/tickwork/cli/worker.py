"""``tickwork worker``: run one worker until SIGTERM or SIGINT.

It runs the built-in ``http`` task, ``shell`` with ``--allow-shell``, and the tasks of
``--app MODULE`` (an importable module, or ``module:attribute``, holding an ``App``).
``http`` runs connect to public addresses only, plus what ``--http-allow`` names
(networks and host names, repeatable or comma-separated; see
:mod:`tickwork.tasks.egress`).
Without ``--db`` the database is the app's (its ``App(db_url)``), else ``TICKWORK_DB``,
else ``./tickwork.db``. Every flag overrides the ``TICKWORK_*`` environment variable of
the same name (``--run-lease`` and ``TICKWORK_RUN_LEASE``), which overrides the default.

Started while the database does not answer, it waits for it, logging the wait once, and
then starts (``--exit-on-unavailable``: exit 1 at once instead; :mod:`tickwork.node`).

On the first SIGTERM or SIGINT the worker stops claiming, lets running handlers finish for
up to ``--shutdown-grace``, releases what is left to other workers (no attempt spent) and
exits 0. A second signal cuts the grace short.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from tickwork.app import App, load_app
from tickwork.cli.app import app
from tickwork.cli.options import (
    AllowShellOption,
    AppOption,
    ConcurrencyOption,
    DbOption,
    ExitOnUnavailableOption,
    HttpAllowOption,
    LogFormatOption,
    LogLevelOption,
    duration_flag,
    duration_option,
)
from tickwork.cli.output import redact, warn
from tickwork.cli.serve import StopWait, configure_logging, serve_until_signal
from tickwork.config import (
    CLAIM_BATCH,
    HTTP_ALLOW_FLAG,
    Config,
    resolve_db_url,
    split_http_allow,
)
from tickwork.errors import ValidationError
from tickwork.faults import INJECT_FAULTS_FLAG, FaultRates
from tickwork.tasks.registry import Registry

log = logging.getLogger("tickwork.worker")


def http_allow_flag(values: list[str] | None) -> tuple[str, ...] | None:
    """The ``--http-allow`` entries (None: the flag was not given). Each is checked by the
    Config they go into."""
    if values is None:
        return None
    entries = tuple(entry for value in values for entry in split_http_allow(value))
    if not entries:
        raise ValidationError(f"{HTTP_ALLOW_FLAG} {values[0]!r} names nothing", field="http_allow")
    return entries


def app_and_db(app_module: str | None, db: str) -> tuple[App | None, str]:
    """The app ``--app`` names (or TICKWORK_APP_MODULE), and the database to use: ``--db``
    when given, else the app's, else the environment's. A ``--db`` other than the app's
    own URL is said once, as a warning: the ``App("...")`` in the module is not used."""
    module = app_module or Config.from_env().app_module
    loaded = load_app(module) if module else None
    if loaded is not None and db == resolve_db_url(None):
        return loaded, loaded.config.db_url
    if loaded is not None and loaded.config.db_url != db:
        warn(
            f"--db {redact(db)} overrides the database of the App in {module} "
            f"({redact(loaded.config.db_url)})"
        )
    return loaded, db


@app.command("worker")
def worker(
    *,
    db: DbOption = "",
    app_module: AppOption = None,
    concurrency: ConcurrencyOption = None,
    queues: Annotated[
        str | None,
        typer.Option(
            "--queues",
            "-q",
            metavar="A,B",
            show_default=False,
            help="Claim only from these queues (comma-separated). Default: every queue.",
        ),
    ] = None,
    allow_shell: AllowShellOption = False,
    run_lease: Annotated[
        str | None, duration_option("--run-lease", "A claimed run's lease")
    ] = None,
    run_heartbeat: Annotated[
        str | None, duration_option("--run-heartbeat", "Extend leases this often")
    ] = None,
    shutdown_grace: Annotated[
        str | None,
        duration_option("--shutdown-grace", "On SIGTERM, let running handlers finish this long"),
    ] = None,
    poll_interval: Annotated[
        str | None,
        duration_option(
            "--poll-interval", "Without LISTEN/NOTIFY (SQLite), look for runs this often"
        ),
    ] = None,
    claim_batch: Annotated[
        int | None,
        typer.Option(
            "--claim-batch",
            min=1,
            show_default=False,
            help=f"Runs claimed per call at most. Default {CLAIM_BATCH}; env TICKWORK_CLAIM_BATCH.",
        ),
    ] = None,
    http_allow: HttpAllowOption = None,
    inject_faults: Annotated[
        str | None,
        typer.Option(
            INJECT_FAULTS_FLAG,
            metavar="FAULT=RATE,...",
            show_default=False,
            help="For staging: fail on purpose, e.g. 'crash-after-handler=0.05,"
            "stall-past-lease=0.02,fail=0.1' (probabilities per run). Refused unless the "
            "database opted in (tickwork db allow-fault-injection). Env "
            "TICKWORK_INJECT_FAULTS.",
        ),
    ] = None,
    node_id: Annotated[
        str | None,
        typer.Option(
            "--node-id",
            metavar="ID",
            show_default=False,
            help="This worker's name on the runs it claims (default: host-pid-random).",
        ),
    ] = None,
    exit_on_unavailable: ExitOnUnavailableOption = False,
    log_level: LogLevelOption = "INFO",
    log_format: LogFormatOption = "text",
) -> None:
    """Run a worker: claim runs, execute them, report; stop gracefully on SIGTERM."""
    from tickwork.node import Node  # here: the other commands load no worker

    configure_logging(log_level, log_format)
    loaded, url = app_and_db(app_module, db)
    config = Config.from_env(
        db_url=url,
        node_id=node_id,
        concurrency=concurrency,
        queues=_queues(queues),
        allow_shell=True if allow_shell else None,
        run_lease=duration_flag("run_lease", run_lease),
        run_heartbeat=duration_flag("run_heartbeat", run_heartbeat),
        shutdown_grace=duration_flag("shutdown_grace", shutdown_grace),
        poll_interval=duration_flag("poll_interval", poll_interval),
        claim_batch=claim_batch,
        http_allow=http_allow_flag(http_allow),
        inject_faults=FaultRates.parse(inject_faults) if inject_faults is not None else None,
        exit_on_unavailable=True if exit_on_unavailable else None,
    )
    registry = loaded.registry if loaded is not None else Registry()

    node = Node(config, registry, scheduler=False)
    try:

        def start(wait: StopWait) -> None:
            log.info(
                "worker node=%s db=%s lease=%gs heartbeat=%gs grace=%gs http-allow=%s",
                config.node_id,
                redact(config.db_url),
                config.run_lease.total_seconds(),
                config.run_heartbeat.total_seconds(),
                config.shutdown_grace.total_seconds(),
                ",".join(config.http_allow) or "none",
            )
            node.start(wait)  # during an outage: waits for the database (tickwork.node)

        serve_until_signal(start, node.stop, hurry=node.hurry)
    finally:
        node.close()  # idempotent; also when start failed
        if loaded is not None:
            loaded.close()


def _queues(raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    names = tuple(q.strip() for q in raw.split(",") if q.strip())
    if not names:
        raise ValidationError(f"--queues {raw!r} names no queue", field="queues")
    return names
