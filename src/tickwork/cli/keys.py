"""``tickwork keys create|list|revoke``: API keys for the HTTP API and the dashboard.

::

    KEY=$(tickwork keys create --tenant acme --label ci)   # the key alone on stdout
    tickwork keys list                                      # prefixes, never secrets
    tickwork keys revoke k3v9x2qa                           # by prefix, id, or the key

A key is shown once, when it is created: only its sha256 is stored (see
:mod:`tickwork.auth`). A tenant's key sees and acts on that tenant's jobs only; an
``--admin`` key on every tenant's. A revoked key stays listed (nothing deletes a key), so
a loopback API whose keys are all revoked stays closed rather than open.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tickwork.cli.app import Typer, app
from tickwork.cli.listing import print_table, when
from tickwork.cli.options import DbOption, JsonOption
from tickwork.cli.output import echo, echo_json, stderr
from tickwork.client import Client
from tickwork.job import check_label
from tickwork.records import to_json

keys_app = Typer(no_args_is_help=True, help="API keys: create, list, revoke.")
app.add_typer(keys_app, name="keys")


@keys_app.command("create")
def create(
    *,
    tenant: Annotated[
        str,
        typer.Option("--tenant", metavar="NAME", show_default=False, help="The key's tenant."),
    ],
    admin: Annotated[
        bool, typer.Option("--admin", help="The key may see and act on every tenant.")
    ] = False,
    label: Annotated[
        str | None,
        typer.Option("--label", metavar="TEXT", show_default=False, help="A note: who has it."),
    ] = None,
    db: DbOption = "",
    as_json: JsonOption = False,
) -> None:
    """Create a key and print it alone on stdout (it is shown only this once; ``--json``:
    the key's record with the key as ``key``)."""
    check_label("tenant", tenant)
    if label is not None:
        check_label("label", label)
    with Client.open(db) as client:
        record, key = client.create_api_key(tenant=tenant, admin=admin, label=label)
    if as_json:
        echo_json({**to_json(record), "key": key})
        return
    echo(key)
    stderr.print(
        f"API key {record.id} (prefix {record.prefix}) for "
        f"{'every tenant (admin)' if admin else f'tenant {tenant}'}; "
        "store it now: it cannot be shown again.",
        markup=False,
    )


@keys_app.command("list")
def list_keys(*, db: DbOption = "", as_json: JsonOption = False) -> None:
    """List keys, newest first, revoked ones too (never their secrets)."""
    with Client.open(db) as client:
        found = client.list_api_keys()
    if as_json:
        echo_json([to_json(key) for key in found])
        return
    if not found:
        echo("(none)")
        return
    header = ("ID", "PREFIX", "TENANT", "ADMIN", "LABEL", "CREATED", "REVOKED")
    rows = [
        (
            str(key.id),
            key.prefix,
            key.tenant,
            "yes" if key.admin else "no",
            key.label or "",
            when(key.created_at),
            when(key.revoked_at),
        )
        for key in found
    ]
    print_table(header, rows)


@keys_app.command("revoke")
def revoke(
    key: Annotated[
        str,
        typer.Argument(
            metavar="KEY_ID_OR_PREFIX",
            show_default=False,
            help="The key's id, its prefix, or the whole key.",
        ),
    ],
    *,
    db: DbOption = "",
    as_json: JsonOption = False,
) -> None:
    """Revoke a key: requests with it are refused from now on, and the dashboard sessions
    signed in with it end."""
    with Client.open(db) as client:
        record = client.revoke_api_key(key)
    if as_json:
        echo_json(to_json(record))
        return
    echo(
        f"revoked API key {record.id} (prefix {record.prefix}, tenant {record.tenant}); "
        "its dashboard sessions ended"
    )
