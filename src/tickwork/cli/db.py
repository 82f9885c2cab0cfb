"""``tickwork db migrate`` and ``tickwork db status``: the schema of a store."""

from __future__ import annotations

import typer

from tickwork.cli.app import app
from tickwork.cli.options import DbOption
from tickwork.cli.output import echo
from tickwork.client import Client

db_app = typer.Typer(no_args_is_help=True, help="Database schema: migrate, status.")
app.add_typer(db_app, name="db")


@db_app.command("migrate")
def migrate(db: DbOption = "") -> None:
    """Apply pending schema migrations (safe to run from several hosts at once)."""
    with Client.open(db, migrate=False) as client:
        applied = client.migrate()
        current, latest = client.schema_version()
    if applied:
        echo(f"applied migrations {', '.join(map(str, applied))}; schema at version {current}")
    else:
        echo(f"schema already at version {current} (latest {latest})")


@db_app.command("status")
def status(db: DbOption = "") -> None:
    """Print the applied and the latest schema version; exit 1 when behind."""
    with Client.open(db, migrate=False) as client:
        current, latest = client.schema_version()
    echo(f"schema version {current} of {latest}")
    if current < latest:
        raise typer.Exit(1)
