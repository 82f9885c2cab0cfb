"""Who is in the cluster: the leader lease, the nodes (and when one counts as silent), API
keys and sessions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tickwork.skew import Skew

NODE_SILENT_BEATS = 3
"""A node unseen for this many of its own heartbeat intervals is *silent*: its heartbeats
stopped (it died, stalled, or lost the database)."""
NODE_SILENT_FLOOR = timedelta(seconds=5)
"""... but never sooner than this, so a busy host's late beat is not called silence."""
NODE_DEFAULT_BEAT = timedelta(seconds=3)
"""The heartbeat interval assumed for a node that did not say its own (``info["beat"]``)."""
NODE_GONE_AFTER = timedelta(minutes=1)
"""A node silent this long (and at least its silence bound) is *gone* from the cluster
view: no pause or network blip lasts so long, its ``running`` count is history, and an
operator may forget it (``tickwork cluster forget``) before the day after which its row
goes by itself."""


@dataclass(frozen=True, slots=True)
class Lease:
    """The scheduler leadership: who holds it, at which epoch, until when (store clock)."""

    holder: str
    epoch: int
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class LeaderTerm:
    """One term of leadership: the node that held the lease at ``epoch``, from when it
    took it (store clock) until its lease ran out or was given up. ``ended_at`` is None
    while the term goes on (the lease is still held)."""

    epoch: int
    holder: str
    started_at: datetime
    ended_at: datetime | None


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A scheduler, worker or API process that registered itself (``tickwork cluster``)."""

    id: str
    kind: str  # scheduler | worker | api | run
    host: str
    pid: int
    started_at: datetime
    last_seen_at: datetime
    running: int  # runs the node executes now (workers)
    info: dict[str, Any]

    @property
    def clock(self) -> Skew | None:
        """How far the node's wall clock was from the store's at its last heartbeat
        (:mod:`tickwork.skew`); None for a node that sent no reading."""
        return Skew.from_info(self.info)

    def silent_after(self) -> timedelta:
        """How long unseen before this node counts as silent (see NODE_SILENT_BEATS)."""
        beat = self.info.get("beat") if isinstance(self.info, dict) else None
        interval = (
            timedelta(seconds=float(beat))
            if isinstance(beat, int | float) and beat > 0
            else NODE_DEFAULT_BEAT
        )
        return max(interval * NODE_SILENT_BEATS, NODE_SILENT_FLOOR)

    def silent(self, now: datetime) -> bool:
        """Whether this node's heartbeats stopped, by the store's clock ``now``."""
        return now - self.last_seen_at > self.silent_after()

    def gone_after(self) -> timedelta:
        """How long unseen before this node counts as gone and may be forgotten."""
        return max(self.silent_after(), NODE_GONE_AFTER)

    def gone(self, now: datetime) -> bool:
        """Whether this node has been silent past :data:`NODE_GONE_AFTER` (store clock)."""
        return now - self.last_seen_at > self.gone_after()

    def status(self, now: datetime) -> str:
        """``up``, ``silent`` (its beats stopped lately) or ``gone`` (silent past the
        bound: forgettable)."""
        return "gone" if self.gone(now) else "silent" if self.silent(now) else "up"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An HTTP API key. Only a hash of the secret is stored; ``prefix`` identifies it."""

    id: int
    prefix: str
    tenant: str
    admin: bool
    label: str | None
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class Session:
    """A dashboard sign-in with an API key. Only a hash of its token is stored.

    It is live until the first of: ``expires_at`` (a lifetime from its start, however
    busy), ``last_seen_at + idle_timeout`` (unused that long), sign-out, or the key's
    revocation (``revoked_at`` for the last two).
    """

    id: int
    key_id: int
    created_at: datetime
    last_seen_at: datetime
    idle_timeout: timedelta
    expires_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A new session (:meth:`Client.sign_in`): the token for the browser's cookie, shown
    this once and stored only hashed, the session and the key it signed in with."""

    token: str
    session: Session
    key: ApiKey


@dataclass(frozen=True, slots=True)
class Cluster:
    """Who leads and which nodes are alive (``tickwork cluster``), by the store's clock."""

    leader: Lease | None  # None: no scheduler holds an unexpired leader lease
    nodes: list[NodeRecord]  # most recently seen first
    now: datetime
