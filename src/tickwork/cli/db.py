"""``tickwork db migrate`` and ``tickwork db status``: the schema of a store."""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork.cli.app import Typer, app
from tickwork.cli.options import DbOption, JsonOption
from tickwork.cli.output import echo, echo_json
from tickwork.client import Client

db_app = Typer(
    no_args_is_help=True, help="Database schema: migrate, status; fault injection's opt-in."
)
app.add_typer(db_app, name="db")


@db_app.command("migrate")
def migrate(db: DbOption = "", as_json: JsonOption = False) -> None:
    """Apply pending schema migrations (safe to run from several hosts at once); on SQLite,
    create the file (and its directory) when there is none."""
    with Client.open(db, migrate=False, create=True) as client:
        applied = client.migrate()
        current, latest = client.schema_version()
    if as_json:
        echo_json({"applied": applied, "version": current, "latest": latest})
    elif applied:
        echo(f"applied migrations {', '.join(map(str, applied))}; schema at version {current}")
    else:
        echo(f"schema already at version {current} (latest {latest})")


@db_app.command("status")
def status(db: DbOption = "", as_json: JsonOption = False) -> None:
    """Print the applied and the latest schema version; exit 1 when behind (``--json``:
    ``{"version", "latest", "behind"}``, and the same exit)."""
    with Client.open(db, migrate=False) as client:
        current, latest = client.schema_version()
    if as_json:
        echo_json({"version": current, "latest": latest, "behind": current < latest})
    else:
        echo(f"schema version {current} of {latest}")
    if current < latest:
        raise typer.Exit(1)


@db_app.command("allow-fault-injection")
def allow_fault_injection(
    db: DbOption = "",
    revoke: Annotated[
        bool,
        typer.Option(
            "--revoke",
            help="Opt the database out again: running injecting workers stop injecting "
            "within a heartbeat interval, new ones refuse to start.",
        ),
    ] = False,
) -> None:
    """Opt this (staging) database in to workers that inject faults on purpose
    (``tickwork worker --inject-faults``); without it they refuse to start."""
    with Client.open(db) as client:
        client.set_fault_injection(not revoke)
    if revoke:
        echo("fault injection is not allowed on this database any more")
    else:
        echo("fault injection is allowed on this database: never do this on production")
