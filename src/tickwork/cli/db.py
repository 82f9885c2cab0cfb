"""``tickwork db migrate`` and ``tickwork db status``: the schema of a store."""

from __future__ import annotations

import typer

from tickwork.cli.output import DbOption, app, echo
from tickwork.store import open_store

db_app = typer.Typer(no_args_is_help=True, help="Database schema: migrate, status.")
app.add_typer(db_app, name="db")


@db_app.command("migrate")
def migrate(db: DbOption = "") -> None:
    """Apply pending schema migrations (safe to run from several hosts at once)."""
    store = open_store(db, migrate=False)
    try:
        applied = store.migrate()
        current, latest = store.schema_version()
    finally:
        store.close()
    if applied:
        echo(f"applied migrations {', '.join(map(str, applied))}; schema at version {current}")
    else:
        echo(f"schema already at version {current} (latest {latest})")


@db_app.command("status")
def status(db: DbOption = "") -> None:
    """Print the applied and the latest schema version; exit 1 when behind."""
    store = open_store(db, migrate=False)
    try:
        current, latest = store.schema_version()
    finally:
        store.close()
    echo(f"schema version {current} of {latest}")
    if current < latest:
        raise typer.Exit(1)
