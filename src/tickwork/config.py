"""One frozen, validated configuration; environment and flags are parsed into it at the edge.

Every default is a named constant with its unit. Environment variables (``TICKWORK_*``)
are read only by :meth:`Config.from_env`; the CLI passes its flags as overrides.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import uuid
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from typing import Any

from tickwork.errors import ValidationError
from tickwork.faults import FaultRates
from tickwork.timetext import parse_duration

DEFAULT_DB_URL = "sqlite:///./tickwork.db"
DB_ENV = "TICKWORK_DB"

RUN_LEASE = timedelta(seconds=15)
"""A claimed run is rescued this long after its worker's last heartbeat."""
RUN_HEARTBEAT = timedelta(seconds=3)
"""Workers extend their leases this often (a fifth of the lease: four beats may be lost)."""
LEADER_LEASE = timedelta(seconds=10)
"""A scheduler leads for this long after its last renewal; then a standby may take over."""
LEADER_RENEW = timedelta(seconds=2)
"""The leader renews this often; standbys try to acquire this often."""
LEADER_SAFETY_MARGIN = timedelta(milliseconds=500)
"""The leader stops leading this much before its lease could lapse by its monotonic clock."""
RESCUE_INTERVAL = timedelta(seconds=1)
"""The leader looks for expired leases this often."""
PRUNE_INTERVAL = timedelta(minutes=5)
RETENTION = timedelta(days=7)
"""Finished runs are pruned this long after they finished."""
POLL_INTERVAL = timedelta(milliseconds=200)
"""Without LISTEN/NOTIFY (SQLite), sleepers re-check this often for work from other processes."""
SHUTDOWN_GRACE = timedelta(seconds=30)
"""On SIGTERM a worker lets running handlers finish for this long, then releases them."""
SYNC_CONCURRENCY = 10
"""Runs executed at once by a worker that has a sync task (``def``) and no
``--concurrency``: each sync run holds a pool thread, and a few threads per core is what
CPU-bound handlers can use without thrashing."""
ASYNC_CONCURRENCY = 200
"""Runs executed at once by a worker whose tasks are all ``async def`` and that has no
``--concurrency``: they share one event loop thread, so a slot costs a coroutine, not a
thread or a core. 200 is two full claim batches: one executes while the next is claimed
(benchmarks/README.md, "Defaults")."""
CLAIM_BATCH = 100
"""A worker claims at most this many runs per call, and never more than its free slots: a
worker at 10 claims up to 10, one at 200 up to 100 (two batches in flight)."""
TRIGGER_BATCH = 1000
"""Jobs examined per trigger transaction."""

HTTP_ALLOW_FLAG = "--http-allow"
HOST_PATTERN = re.compile(
    r"(\*\.)?[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*"
)
"""A host name ``--http-allow`` accepts: DNS labels, optionally ``*.`` first for every
subdomain of the rest."""
MAX_HOST_LENGTH = 253
NETWORK_CHARS = re.compile(r"[0-9a-f.:/]+")
"""What a network in CIDR form is written with (an IPv6 one, lower-cased)."""

AllowEntry = ipaddress.IPv4Network | ipaddress.IPv6Network | str
"""One parsed ``--http-allow`` entry: a network, or a lower-cased host name pattern."""


def parse_http_allow(entry: str) -> AllowEntry:
    """One ``--http-allow`` entry (see :mod:`tickwork.tasks.egress`), or ValidationError.

    A network in CIDR form (``10.0.0.0/8``, ``fd00::/8``; host bits must be zero), a bare
    address (``127.0.0.1``: a /32, ``::1``: a /128), or a host name (``localhost``,
    ``metrics.internal``; ``*.internal.example`` for all of its subdomains), which is
    returned lower-cased without a trailing dot.
    """
    text = entry.strip()
    try:
        return ipaddress.ip_network(text)
    except ValueError as exc:
        network_error = str(exc)
    name = text.lower().removesuffix(".")
    last_label = name.rsplit(".", 1)[-1]
    looks_numeric = NETWORK_CHARS.fullmatch(name) and ("/" in name or ":" in name)
    if looks_numeric or last_label.isdigit() or last_label[:2] == "0x":
        # A name ending in a number is an IPv4 address to resolvers ("10.1" is 10.0.0.1):
        # never a host name here, always a typo for a network.
        raise ValidationError(f"{HTTP_ALLOW_FLAG} {entry!r}: {network_error}", field="http_allow")
    if not HOST_PATTERN.fullmatch(name) or len(name) > MAX_HOST_LENGTH:
        raise ValidationError(
            f"{HTTP_ALLOW_FLAG} {entry!r} is neither a network (CIDR), an IP address nor a "
            "host name",
            field="http_allow",
        )
    return name


def split_http_allow(raw: str) -> tuple[str, ...]:
    """Comma-separated ``--http-allow`` entries (as ``TICKWORK_HTTP_ALLOW`` holds them)."""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def resolve_db_url(flag: str | None) -> str:
    """``--db``, else ``TICKWORK_DB``, else ``sqlite:///./tickwork.db``."""
    return flag or os.environ.get(DB_ENV) or DEFAULT_DB_URL


def default_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class Config:
    db_url: str = DEFAULT_DB_URL
    node_id: str = field(default_factory=default_node_id)
    run_lease: timedelta = RUN_LEASE
    run_heartbeat: timedelta = RUN_HEARTBEAT
    leader_lease: timedelta = LEADER_LEASE
    leader_renew: timedelta = LEADER_RENEW
    leader_safety_margin: timedelta = LEADER_SAFETY_MARGIN
    rescue_interval: timedelta = RESCUE_INTERVAL
    prune_interval: timedelta = PRUNE_INTERVAL
    retention: timedelta = RETENTION
    poll_interval: timedelta = POLL_INTERVAL
    shutdown_grace: timedelta = SHUTDOWN_GRACE
    concurrency: int | None = None
    """Runs a worker executes at once; None: by its tasks (SYNC_CONCURRENCY when any is
    sync, else ASYNC_CONCURRENCY; see :func:`tickwork.worker.default_concurrency`)."""
    claim_batch: int = CLAIM_BATCH
    trigger_batch: int = TRIGGER_BATCH
    queues: tuple[str, ...] | None = None  # None: every queue
    allow_shell: bool = False
    http_allow: tuple[str, ...] = ()
    """Networks and host names ``http`` runs may reach beyond public addresses (see
    :mod:`tickwork.tasks.egress`); a string is split on commas."""
    app_module: str | None = None
    inject_faults: FaultRates | None = None
    """Faults a worker injects on purpose, for staging (:mod:`tickwork.faults`); a string
    is parsed (``crash-after-handler=0.05,fail=0.1``). None: none."""
    exit_on_unavailable: bool = False
    """A long-running process (worker, scheduler, api, run) that cannot reach its database
    when it starts exits 1 at once, instead of waiting for it (:mod:`tickwork.node`)."""

    def __post_init__(self) -> None:
        if self.run_heartbeat >= self.run_lease:
            raise ValidationError(
                f"run heartbeat ({self.run_heartbeat.total_seconds():g} s) must be shorter "
                f"than the run lease ({self.run_lease.total_seconds():g} s)",
                field="run_heartbeat",
            )
        if self.leader_renew + self.leader_safety_margin >= self.leader_lease:
            raise ValidationError(
                "leader renew interval plus safety margin must be shorter than the leader lease",
                field="leader_renew",
            )
        if self.concurrency is not None and self.concurrency < 1:
            raise ValidationError("concurrency must be at least 1", field="concurrency")
        if self.claim_batch < 1 or self.trigger_batch < 1:
            raise ValidationError("batch sizes must be at least 1", field="claim_batch")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, timedelta) and value <= timedelta(0):
                raise ValidationError(f"{f.name} must be positive", field=f.name)
        allow = self.http_allow
        entries = split_http_allow(allow) if isinstance(allow, str) else tuple(allow)
        for entry in entries:
            parse_http_allow(entry)
        object.__setattr__(self, "http_allow", entries)  # a list or a string, made a tuple
        if isinstance(self.inject_faults, str):
            object.__setattr__(self, "inject_faults", FaultRates.parse(self.inject_faults))

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> Config:
        """Defaults, then ``TICKWORK_<FIELD>`` variables, then non-None ``overrides``.

        Durations accept ``15s``, ``500ms``, ``2m`` or plain seconds.
        """
        source = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = source.get(f"TICKWORK_{f.name.upper()}")
            if f.name == "db_url":
                raw = source.get(DB_ENV, raw)
            if raw is None:
                continue
            values[f.name] = _parse(f.name, raw, getattr(cls(), f.name))
        values.update({k: v for k, v in overrides.items() if v is not None})
        return replace(cls(), **values)


OPTIONAL_INTS = frozenset({"concurrency"})
"""Fields whose default is None (decided later) but whose value is an integer."""


def _parse(name: str, raw: str, default: object) -> Any:
    if isinstance(default, timedelta):
        return parse_duration(raw, field=name)
    if isinstance(default, bool):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(default, int) or name in OPTIONAL_INTS:
        try:
            return int(raw)
        except ValueError:
            raise ValidationError(f"{name} must be an integer, got {raw!r}", field=name) from None
    if name == "queues":
        return tuple(q.strip() for q in raw.split(",") if q.strip()) or None
    if name == "http_allow":
        return split_http_allow(raw)
    if name == "inject_faults":
        return FaultRates.parse(raw) if raw.strip() else None
    return raw
