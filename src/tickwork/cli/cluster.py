"""``tickwork cluster``: who leads, and which schedulers and workers are alive.

::

    leader: sched-a-4711-1f2e3d, epoch 7, lease expires 2026-12-01 09:00:12 (in 8.1 s)
    (HOST, PID, STARTED and LAST SEEN elided here)
    NODE                KIND    ...  STATUS  RUNNING  STORE  CLOCK
    worker-b-812-a1b2c3 worker  ...  up      4        up     +0.00 s ±0.001
    worker-c-913-c3d4e5 worker  ...  SILENT  2        up     +5.01 s ±0.002 OFF

Times are the store's clock, so an "ago" is never skewed by this host's clock. STATUS is
SILENT when a node's heartbeats stopped: unseen for three of its own heartbeat intervals
(at least 5 s). It died, is stalled, or cannot reach the database; its runs are rescued
when their leases expire. A node that stopped cleanly removed its row; one that crashed
stays (silent) until unseen for a day. STORE is what the node saw of the database at its
last beat, with its outages and reconnects since it started (``up 2/5``). CLOCK is how far
the node's wall clock was from the database's at its last beat, with the error bound (half
the round trip): ``+5.01 s ±0.002`` runs 5 s fast, marked ``OFF`` past 1 s. It fires
nothing early (due-ness is the database's clock) but its logs and its host's time are off.
``--json``: ``{"leader": {"holder", "epoch", "expires_at"} | null, "nodes": [... "silent",
"info": {... "clock": {"offset", "bound"}}], "now"}``.

``tickwork cluster forget NODE`` removes a gone node's row now, rather than after the day:
one silent for a minute at least (:data:`~tickwork.records.NODE_GONE_AFTER`). A node
that still beats, or fell silent only lately, is refused (exit 1), and nothing changes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import typer

from tickwork.cli.app import Typer, app
from tickwork.cli.listing import print_table, watch, when
from tickwork.cli.options import DbOption, JsonOption, WatchOption
from tickwork.cli.output import echo, echo_json
from tickwork.client import Client
from tickwork.records import Cluster, to_json
from tickwork.skew import Skew

cluster_app = Typer(
    invoke_without_command=True, help="Who leads, and which nodes are alive; forget a gone one."
)
app.add_typer(cluster_app, name="cluster")


@cluster_app.callback()
def cluster(
    ctx: typer.Context,
    *,
    db: DbOption = "",
    as_json: JsonOption = False,
    watching: WatchOption = False,
) -> None:
    """Show the leader (epoch, lease expiry) and the nodes with their last heartbeat."""
    if ctx.invoked_subcommand is not None:
        return
    with Client.open(db) as client:
        watch(lambda: _print_cluster(client.cluster(), as_json), watching)


def _print_cluster(view: Cluster, as_json: bool) -> None:
    if as_json:
        echo_json(to_json(view))
        return
    lease = view.leader
    if lease is None:
        echo("leader: none (no scheduler holds the leader lease; start `tickwork scheduler`)")
    else:
        echo(
            f"leader: {lease.holder}, epoch {lease.epoch}, lease expires "
            f"{when(lease.expires_at)} (in {_seconds(lease.expires_at - view.now)})"
        )
    if not view.nodes:
        echo("nodes: none registered")
        return
    header = (
        "NODE", "KIND", "HOST", "PID", "STARTED", "LAST SEEN", "STATUS", "RUNNING", "STORE",
        "CLOCK",
    )  # fmt: skip
    rows = [
        (
            node.id,
            node.kind + (" (leader)" if lease is not None and node.id == lease.holder else ""),
            node.host,
            str(node.pid),
            when(node.started_at),
            f"{_seconds(view.now - node.last_seen_at)} ago",
            "SILENT" if node.silent(view.now) else "up",
            str(node.running),
            _store(node.info.get("store")),
            _clock(node.clock),
        )
        for node in view.nodes
    ]
    print_table(header, rows)


@cluster_app.command("forget")
def forget(
    node: Annotated[str, typer.Argument(metavar="NODE", show_default=False, help="The node's id.")],
    *,
    db: DbOption = "",
) -> None:
    """Remove a gone node (silent for a minute at least) from the cluster view now."""
    with Client.open(db) as client:
        gone = client.forget_node(node)
        now = client.now()
    echo(
        f"forgot node {gone.id} ({gone.kind} on {gone.host}, pid {gone.pid}; last seen "
        f"{_seconds(now - gone.last_seen_at)} ago)"
    )


def _store(seen: object) -> str:
    """A node's view of the database: ``up`` or ``DOWN``, then ``outages/reconnects``."""
    if not isinstance(seen, dict):
        return "-"
    state = "up" if seen.get("up", True) else "DOWN"
    outages, reconnects = seen.get("outages", 0), seen.get("reconnects", 0)
    return state if not outages and not reconnects else f"{state} {outages}/{reconnects}"


def _clock(skew: Skew | None) -> str:
    """The node's clock against the store's, ``+5.01 s ±0.002``, marked ``OFF`` past 1 s."""
    if skew is None:
        return "-"
    return f"{skew} OFF" if skew.off else str(skew)


def _seconds(span: timedelta) -> str:
    seconds = max(span.total_seconds(), 0.0)
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
