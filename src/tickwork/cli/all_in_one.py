"""``tickwork run``: a scheduler, a worker and the HTTP API in one process, the first thing
to run.

On the embedded SQLite default (``./tickwork.db``) it needs no server: the file is created
and migrated on first use. It runs the built-in ``http`` task (to public addresses, plus
what ``--http-allow`` names, as ``tickwork worker`` does), ``shell`` with
``--allow-shell``, and the tasks of ``--app MODULE``. It serves the HTTP API, the dashboard
and ``/metrics`` on ``--host``/``--port`` (127.0.0.1:8765; ``--no-api`` to skip), under the
rules of ``tickwork api``: open on loopback while no API key was ever created (or with
``--open``), refused elsewhere without one. SIGTERM or SIGINT stops the server, then the
worker the way ``tickwork worker`` stops (running handlers finish within the grace, the
rest is released), and resigns leadership; it exits 0.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from tickwork.cli.api import (
    DEFAULT_FORWARDED_ALLOW_IPS,
    DEFAULT_HOST,
    DEFAULT_PORT,
    ApiServer,
    check_access,
    trusted_proxies,
)
from tickwork.cli.app import app
from tickwork.cli.options import (
    AllowShellOption,
    AppOption,
    ConcurrencyOption,
    DbOption,
    ExitOnUnavailableOption,
    ForwardedAllowIpsOption,
    HostOption,
    HttpAllowOption,
    LogFormatOption,
    LogLevelOption,
    OpenOption,
    PortOption,
)
from tickwork.cli.output import echo, redact
from tickwork.cli.serve import StopWait, configure_logging, serve_until_signal
from tickwork.cli.worker import app_and_db, http_allow_flag
from tickwork.config import Config
from tickwork.tasks.registry import Registry

log = logging.getLogger("tickwork")


@app.command("run")
def run(
    *,
    db: DbOption = "",
    app_module: AppOption = None,
    allow_shell: AllowShellOption = False,
    http_allow: HttpAllowOption = None,
    concurrency: ConcurrencyOption = None,
    host: HostOption = DEFAULT_HOST,
    port: PortOption = DEFAULT_PORT,
    no_api: Annotated[
        bool, typer.Option("--no-api", help="Serve no HTTP API, dashboard or metrics.")
    ] = False,
    force_open: OpenOption = False,
    forwarded_allow_ips: ForwardedAllowIpsOption = DEFAULT_FORWARDED_ALLOW_IPS,
    exit_on_unavailable: ExitOnUnavailableOption = False,
    log_level: LogLevelOption = "INFO",
    log_format: LogFormatOption = "text",
) -> None:
    """Run a scheduler, a worker and the HTTP API in this process (./tickwork.db by default)."""
    from tickwork.node import Node, when_store_answers  # here: the other commands load no worker

    configure_logging(log_level, log_format)
    proxies = trusted_proxies(forwarded_allow_ips)
    loaded, url = app_and_db(app_module, db)
    config = Config.from_env(
        db_url=url,
        concurrency=concurrency,
        allow_shell=True if allow_shell else None,
        http_allow=http_allow_flag(http_allow),
        exit_on_unavailable=True if exit_on_unavailable else None,
    )
    registry = loaded.registry if loaded is not None else Registry()
    tasks = ", ".join(n for n in registry.names() if n != "shell" or config.allow_shell)
    node = Node(config, registry)
    server: ApiServer | None = None
    try:

        def start(wait: StopWait) -> None:
            nonlocal server
            # On PostgreSQL during an outage, both wait for the database (tickwork.node).
            if not no_api:
                client = node.client()
                access = when_store_answers(
                    lambda: check_access(client, host, force_open=force_open),
                    exit_on_unavailable=config.exit_on_unavailable,
                    wait=wait,
                )
                if access is None:
                    return
                server = ApiServer(  # bound here: a taken port fails before anything runs
                    client,
                    host,
                    port,
                    access=access,
                    trusted_proxies=proxies,
                    rescues=node.rescued if node.scheduler is not None else None,
                )
            if not node.start(wait):
                return
            if server is not None:
                try:
                    server.start()
                except BaseException:
                    node.stop()
                    raise
            served = f"; API and dashboard at {server.url}" if server is not None else ""
            allowed = f"; http-allow: {','.join(config.http_allow)}" if config.http_allow else ""
            concurrency = node.worker.concurrency if node.worker is not None else 0
            echo(
                f"tickwork run: ready on {redact(config.db_url)} (scheduler + worker, "
                f"concurrency {concurrency}; tasks: {tasks}{allowed}{served})"
            )
            echo("try: tickwork submit --in 5s http https://example.com   (then: tickwork runs)")

        def stop() -> None:
            try:
                if server is not None:
                    server.stop()
            finally:
                node.stop()

        serve_until_signal(start, stop, hurry=node.hurry)
    finally:
        if server is not None:
            server.stop()  # idempotent; closes the socket even if it never served
        node.close()  # idempotent; also when start failed
        if loaded is not None:
            loaded.close()
    log.info("tickwork run stopped")
