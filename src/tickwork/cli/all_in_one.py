"""``tickwork run``: a scheduler and a worker in one process, the first thing to run.

On the embedded SQLite default (``./tickwork.db``) it needs no server: the file is created
and migrated on first use. It runs the built-in ``http`` task, ``shell`` with
``--allow-shell``, and the tasks of ``--app MODULE``. SIGTERM or SIGINT stops it the way
``tickwork worker`` stops (running handlers finish within the grace, the rest is released)
and resigns leadership; it exits 0.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from tickwork.cli.output import (
    DbOption,
    LogFormatOption,
    LogLevelOption,
    app,
    configure_logging,
    echo,
    redact,
    serve_until_signal,
)
from tickwork.cli.worker import AppOption, app_and_db
from tickwork.config import WORKER_CONCURRENCY, Config
from tickwork.node import Node
from tickwork.worker.registry import Registry

log = logging.getLogger("tickwork")


@app.command("run")
def run(
    *,
    db: DbOption = "",
    app_module: AppOption = None,
    allow_shell: Annotated[
        bool,
        typer.Option(
            "--allow-shell",
            help="Run shell tasks (commands from the database). Env TICKWORK_ALLOW_SHELL.",
        ),
    ] = False,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "-c",
            min=1,
            show_default=False,
            help=f"Runs executed at once. Default {WORKER_CONCURRENCY}; env TICKWORK_CONCURRENCY.",
        ),
    ] = None,
    log_level: LogLevelOption = "INFO",
    log_format: LogFormatOption = "text",
) -> None:
    """Run a scheduler and a worker in this process (SQLite ./tickwork.db by default)."""
    configure_logging(log_level, log_format)
    loaded, url = app_and_db(app_module, db)
    config = Config.from_env(
        db_url=url, concurrency=concurrency, allow_shell=True if allow_shell else None
    )
    registry = loaded.registry if loaded is not None else Registry()
    node = Node(config, registry)
    tasks = ", ".join(n for n in registry.names() if n != "shell" or config.allow_shell)

    def start() -> None:
        node.start()
        echo(
            f"tickwork run: ready on {redact(config.db_url)} "
            f"(scheduler + worker, concurrency {config.concurrency}; tasks: {tasks})"
        )
        echo("try: tickwork submit --in 5s http https://example.com   (then: tickwork runs)")

    try:
        serve_until_signal(start, node.stop, hurry=node.hurry)
    finally:
        if loaded is not None:
            loaded.close()
    log.info("tickwork run stopped")
