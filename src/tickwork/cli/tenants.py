"""``tickwork tenants [show|set|unset]``: tenants' limits, and their runs now.

::

    tickwork tenants                                  # every tenant with limits or runs
    tickwork tenants --json
    tickwork tenants show acme                        # one tenant (--json too)
    tickwork tenants set acme --max-running 5         # at most 5 of acme's runs at once
    tickwork tenants set acme --rate 20/s --burst 40  # 20 starts a second, 40 at once
    tickwork tenants set acme --rate 30/m --weight 2  # 30 a minute; twice the share
    tickwork tenants unset acme --max-running         # no max_running again
    tickwork tenants unset acme --rate                # no rate limit (and no burst)

``set`` changes only the limits it names; ``unset`` clears only the ones it names
(``--weight`` goes back to 1). A rate is a count per second, minute or hour (``20/s``,
``30/m``, ``1.5/s``, ``100/h``); a bare number is per second. ``--burst`` is the token
bucket's size and needs a rate (set one, or have one already); without it the bucket holds
one second's worth. Unsetting the rate clears the burst too: a burst means nothing alone.

Columns: MAX RUNNING, RATE, BURST (the bucket's size: the burst, or one second's worth of
the rate), WEIGHT; RUNNING (runs in state running now), DUE (queued-and-due: queued or
awaiting a retry whose time has come) and HELD (due runs a limit keeps from starting now).

Workers read limits in every claim: a change applies from their next one, no restart.
Bad input (zero, negative, non-numeric, an unparseable rate, no option) exits 2 with one
line on stderr, and nothing is changed.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork.cli.app import Typer, app
from tickwork.cli.listing import print_table
from tickwork.cli.options import DbOption, JsonOption
from tickwork.cli.output import echo, echo_json, warn
from tickwork.client import Client
from tickwork.errors import NotFound, ValidationError
from tickwork.inputs import parse_rate
from tickwork.job import check_label
from tickwork.records import DEFAULT_WEIGHT, KEEP, TenantLimits, TenantStatus, format_rate, to_json

tenants_app = Typer(help="Tenants' limits and their runs now: list, show, set, unset.")
app.add_typer(tenants_app, name="tenants")

TenantArgument = Annotated[
    str, typer.Argument(metavar="TENANT", show_default=False, help="The tenant's name.")
]
HEADER = ("TENANT", "MAX RUNNING", "RATE", "BURST", "WEIGHT", "RUNNING", "DUE", "HELD")


@tenants_app.callback(invoke_without_command=True)
def tenants(ctx: typer.Context, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """List tenants with limits or runs now: their limits, and runs running, due and held."""
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
    print_table(HEADER, [_row(status) for status in found])


@tenants_app.command("show")
def show(tenant: TenantArgument, *, db: DbOption = "", as_json: JsonOption = False) -> None:
    """One tenant's limits and runs now; exit 1 for a tenant with no job, run or limit."""
    check_label("tenant", tenant)
    with Client.open(db) as client:
        if not _known(client, tenant):
            raise NotFound(
                f"tenant {tenant!r} not found: no job, run or limit names it "
                "(tickwork tenants lists the tenants)"
            )
        status = client.tenant(tenant)
    if as_json:
        echo_json(to_json(status))
        return
    print_table(HEADER, [_row(status)])


def _known(client: Client, tenant: str) -> bool:
    """Whether ``tenant`` has limits, runs now, or jobs."""
    if any(status.tenant == tenant for status in client.list_tenants()):
        return True
    return bool(client.list_jobs(tenant=tenant, limit=1).items)


def _row(status: TenantStatus) -> tuple[str, ...]:
    limits = status.limits
    return (
        status.tenant,
        _or_dash(limits.max_running),
        format_rate(limits.rate) if limits.rate is not None else "-",
        _or_dash(limits.bucket),
        f"{limits.weight:g}",
        str(status.running),
        str(status.due),
        str(status.held),
    )


def _or_dash(value: int | None) -> str:
    return str(value) if value is not None else "-"


def describe(limits: TenantLimits) -> str:
    """``max_running 5, rate 20/s (burst 40), weight 2``; ``no limits`` for none."""
    parts = []
    if limits.max_running is not None:
        parts.append(f"max_running {limits.max_running}")
    if limits.rate is not None:
        burst = f" (burst {limits.burst})" if limits.burst is not None else ""
        parts.append(f"rate {format_rate(limits.rate)}{burst}")
    if limits.weight != DEFAULT_WEIGHT:
        parts.append(f"weight {limits.weight:g}")
    return ", ".join(parts) or "no limits"


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
    rate: Annotated[
        str | None,
        typer.Option(
            "--rate",
            metavar="R/s|R/m|R/h",
            show_default=False,
            help="Runs started per second, minute or hour across every worker (20/s, 30/m; "
            "a bare number is per second).",
        ),
    ] = None,
    burst: Annotated[
        int | None,
        typer.Option(
            "--burst",
            metavar="N",
            show_default=False,
            help="Starts the rate allows at once after a quiet spell (needs a rate; "
            "default one second's worth).",
        ),
    ] = None,
    weight: Annotated[
        float | None,
        typer.Option(
            "--weight",
            metavar="W",
            show_default=False,
            help="The tenant's share when tenants compete for workers (default 1).",
        ),
    ] = None,
    db: DbOption = "",
) -> None:
    """Set a tenant's limits (only those given change); workers obey them from their next
    claim."""
    check_label("tenant", tenant)
    if max_running is None and rate is None and burst is None and weight is None:
        raise ValidationError(
            "nothing to set: give --max-running, --rate, --burst or --weight", field="tenant"
        )
    with Client.open(db) as client:
        known = _known(client, tenant)
        status = client.set_tenant_limits(
            tenant,
            max_running=KEEP if max_running is None else max_running,
            rate=KEEP if rate is None else parse_rate(rate),
            burst=KEEP if burst is None else burst,
            weight=KEEP if weight is None else weight,
        )
    if not known:
        warn(
            f"tenant {tenant!r} had no job, run or limit: its limits are set, for jobs to "
            "come (a typo? tickwork tenants lists the tenants)"
        )
    echo(f"tenant {tenant}: {describe(status.limits)} ({status.running} running now)")


@tenants_app.command("unset")
def unset_limits(
    tenant: TenantArgument,
    *,
    max_running: Annotated[
        bool, typer.Option("--max-running", help="Clear the tenant's max_running.")
    ] = False,
    rate: Annotated[
        bool, typer.Option("--rate", help="Clear the tenant's rate limit (and its burst).")
    ] = False,
    burst: Annotated[
        bool, typer.Option("--burst", help="Back to one second's worth of the rate.")
    ] = False,
    weight: Annotated[bool, typer.Option("--weight", help="Back to weight 1.")] = False,
    db: DbOption = "",
) -> None:
    """Clear a tenant's limits (only those named)."""
    check_label("tenant", tenant)
    if not (max_running or rate or burst or weight):
        raise ValidationError(
            "nothing to unset: give --max-running, --rate, --burst or --weight", field="tenant"
        )
    with Client.open(db) as client:
        status = client.set_tenant_limits(
            tenant,
            max_running=None if max_running else KEEP,
            rate=None if rate else KEEP,
            burst=None if rate or burst else KEEP,
            weight=None if weight else KEEP,
        )
    echo(f"tenant {tenant}: {describe(status.limits)} ({status.running} running now)")
