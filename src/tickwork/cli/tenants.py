"""``tickwork tenants [set|unset]``: tenants' limits, and their runs now.

::

    tickwork tenants                               # limits, running, queued-and-due
    tickwork tenants --json
    tickwork tenants set acme --max-running 5      # at most 5 of acme's runs at once
    tickwork tenants unset acme --max-running      # no limit again

Workers read limits in every claim: a change applies from their next one, no restart.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork.cli.app import app
from tickwork.cli.listing import print_table
from tickwork.cli.options import DbOption, JsonOption
from tickwork.cli.output import echo, echo_json
from tickwork.client import Client
from tickwork.errors import ValidationError
from tickwork.job import check_label
from tickwork.records import TenantStatus, check_max_running, to_json

tenants_app = typer.Typer(help="Tenants' limits and their runs now: list, set, unset.")
app.add_typer(tenants_app, name="tenants")

TenantArgument = Annotated[
    str, typer.Argument(metavar="TENANT", show_default=False, help="The tenant's name.")
]


@tenants_app.callback(invoke_without_command=True)
def tenants(ctx: typer.Context, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """List tenants with limits or runs now: their limits, runs running and queued-and-due."""
    if ctx.invoked_subcommand is not None:
        return
    with Client.open(db) as client:
        found = client.list_tenants()
    if as_json:
        echo_json([to_json(status) for status in found])
        return
    if not found:
        echo("(none)")
        return
    header = ("TENANT", "MAX RUNNING", "RUNNING", "QUEUED+DUE", "HELD")
    print_table(header, [_row(status) for status in found])


def _row(status: TenantStatus) -> tuple[str, ...]:
    cap = status.limits.max_running
    return (
        status.tenant,
        str(cap) if cap is not None else "-",
        str(status.running),
        str(status.due),
        "at max_running" if status.at_limit and status.due else "",
    )


@tenants_app.command("set")
def set_limits(
    tenant: TenantArgument,
    *,
    max_running: Annotated[
        int | None,
        typer.Option(
            "--max-running",
            metavar="N",
            show_default=False,
            help="At most N of the tenant's runs execute at once, across every worker.",
        ),
    ] = None,
    db: DbOption = "",
) -> None:
    """Set a tenant's limits; workers obey them from their next claim."""
    check_label("tenant", tenant)
    if max_running is None:
        raise ValidationError("nothing to set: give --max-running N", field="max_running")
    check_max_running(max_running)
    with Client.open(db) as client:
        status = client.set_tenant_limits(tenant, max_running=max_running)
    echo(f"tenant {tenant}: max_running {max_running} ({status.running} running now)")


@tenants_app.command("unset")
def unset_limits(
    tenant: TenantArgument,
    *,
    max_running: Annotated[
        bool, typer.Option("--max-running", help="Clear the tenant's max_running.")
    ] = False,
    db: DbOption = "",
) -> None:
    """Clear a tenant's limits."""
    check_label("tenant", tenant)
    if not max_running:
        raise ValidationError("nothing to unset: give --max-running", field="max_running")
    with Client.open(db) as client:
        client.set_tenant_limits(tenant, max_running=None)
    echo(f"tenant {tenant}: no max_running")
