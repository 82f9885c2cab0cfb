"""The cluster's own rows, written once for every dialect: nodes, API keys, dashboard
sessions and the scheduler's leader lease with its history of terms."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tickwork.errors import (
    ApiKeyNotFound,
    LeadershipLost,
    NodeAlive,
    NodeNotFound,
    StoreUnavailable,
)
from tickwork.store import rows
from tickwork.store.base import (
    NODE_FORGET_AFTER,
    SESSION_FORGET_AFTER,
    SESSION_SEEN_EVERY,
    ApiKey,
    LeaderTerm,
    Lease,
    NodeRecord,
    Session,
)
from tickwork.store.sql.core import SqlCore


class ClusterTransitions(SqlCore):
    # -- nodes ------------------------------------------------------------------------------

    def register_node(
        self,
        node_id: str,
        kind: str,
        host: str,
        pid: int,
        info: dict[str, Any] | None = None,
        *,
        now: datetime | None = None,
    ) -> None:
        params = {"id": node_id, "kind": kind, "host": host, "pid": pid}
        with self.driver.read() as tx:
            params.update(now=self.codec.time(tx.now(now)), info=self.codec.json(info or {}))
            tx.count(self.q["register_node"], params)

    def node_heartbeat(
        self,
        node_id: str,
        *,
        running: int = 0,
        info: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> None:
        params = {"id": node_id, "running": running, "info": self.codec.json(info)}
        with self.driver.read() as tx:
            tx.count(self.q["node_heartbeat"], {**params, "now": self.codec.time(tx.now(now))})

    def deregister_node(self, node_id: str) -> None:
        with self.driver.read() as tx:
            tx.count(self.q["deregister_node"], {"id": node_id})

    def forget_node(self, node_id: str, *, now: datetime | None = None) -> NodeRecord:
        with self.driver.write() as tx:
            t = tx.now(now)
            row = tx.one(self.q["get_node"], {"id": node_id})
            if row is None:
                raise NodeNotFound(node_id)
            node = rows.node(row, self.codec)
            if not node.gone(t):
                unseen = (t - node.last_seen_at).total_seconds()
                raise NodeAlive(node_id, unseen, node.gone_after().total_seconds())
            # Only the beat read above: a heartbeat since then makes it alive again.
            params = {"id": node_id, "seen": row["last_seen_at"]}
            if tx.count(self.q["forget_node"], params) != 1:
                raise NodeAlive(node_id, 0.0, node.gone_after().total_seconds())
        return node

    def list_nodes(
        self, *, seen_within: timedelta | None = None, now: datetime | None = None
    ) -> list[NodeRecord]:
        time = self.codec.time
        with self.driver.write() as tx:
            t = tx.now(now)
            tx.count(self.q["forget_nodes"], {"cutoff": time(t - NODE_FORGET_AFTER)})
            since = time(t - seen_within) if seen_within is not None else None
            found = tx.all(self.q["list_nodes"], {"since": since})
        return [rows.node(r, self.codec) for r in found]

    # -- API keys ---------------------------------------------------------------------------

    def create_api_key(
        self,
        *,
        key_hash: str,
        prefix: str,
        tenant: str,
        admin: bool,
        label: str | None = None,
        now: datetime | None = None,
    ) -> ApiKey:
        params = {
            "key_hash": key_hash,
            "prefix": prefix,
            "tenant": tenant,
            "admin": admin,
            "label": label,
        }
        with self.driver.write() as tx:
            row = tx.one(self.q["create_api_key"], {**params, "now": self.codec.time(tx.now(now))})
        assert row is not None
        return rows.api_key(row, self.codec)

    def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        with self.driver.read() as tx:
            row = tx.one(self.q["api_key_by_hash"], {"key_hash": key_hash})
        return rows.api_key(row, self.codec) if row is not None else None

    def list_api_keys(self) -> list[ApiKey]:
        with self.driver.read() as tx:
            found = tx.all(self.q["list_api_keys"], {})
        return [rows.api_key(r, self.codec) for r in found]

    def revoke_api_key(self, key: str, *, now: datetime | None = None) -> ApiKey:
        with self.driver.write() as tx:
            t = self.codec.time(tx.now(now))
            row = tx.one(self.q["revoke_api_key"], {"key": key, "now": t})
            if row is not None:
                tx.count(self.q["revoke_key_sessions"], {"key_id": row["id"], "now": t})
        if row is None:
            raise ApiKeyNotFound(key)
        return rows.api_key(row, self.codec)

    # -- sessions ---------------------------------------------------------------------------

    def sign_in(
        self,
        *,
        key_id: int,
        token_hash: str,
        idle_timeout: timedelta,
        lifetime: timedelta,
        now: datetime | None = None,
    ) -> Session:
        c = self.codec
        with self.driver.write() as tx:
            t = tx.now(now)
            tx.count(self.q["forget_sessions"], {"cutoff": c.time(t - SESSION_FORGET_AFTER)})
            row = tx.one(
                self.q["sign_in"],
                {
                    "token_hash": token_hash,
                    "key_id": key_id,
                    "now": c.time(t),
                    "idle_timeout": c.duration(idle_timeout),
                    "lifetime": c.duration(lifetime),
                },
            )
        if row is None:
            raise ApiKeyNotFound(str(key_id))
        return rows.session(row, c)

    def session_by_hash(
        self, token_hash: str, *, now: datetime | None = None
    ) -> tuple[Session, ApiKey] | None:
        c = self.codec
        with self.driver.read() as tx:
            row = tx.one(
                self.q["session_by_hash"], {"token_hash": token_hash, "now": self.driver.at(now)}
            )
            if row is None:
                return None
            session = rows.session(row, c)
            if session.last_seen_at < c.from_time(row["now"]) - SESSION_SEEN_EVERY:
                tx.count(self.q["see_session"], {"id": session.id, "now": row["now"]})
        return session, rows.session_key(row, c)

    def sign_out(self, token_hash: str, *, now: datetime | None = None) -> bool:
        params = {"token_hash": token_hash, "now": self.driver.at(now)}
        with self.driver.read() as tx:
            return tx.one(self.q["sign_out"], params) is not None

    # -- leadership -------------------------------------------------------------------------

    def acquire_leadership(
        self, node_id: str, ttl: timedelta, *, now: datetime | None = None
    ) -> Lease | None:
        params = {"node": node_id, "ttl": self.codec.duration(ttl), "now": self.driver.at(now)}
        try:
            with self.driver.write() as tx:
                tx.give_up_on_held_locks()
                row = tx.one(self.q["acquire_leadership"], params)
                # A new epoch (only then does the insert write a row) starts a term and
                # ends the one before: a standby's refused acquire and a renewal write none.
                term = {**params, "epoch": row["epoch"]} if row is not None else None
                if term is not None and tx.count(self.q["begin_leader_term"], term) == 1:
                    tx.count(self.q["end_leader_term"], term)
        except StoreUnavailable as exc:
            if not self.driver.busy(exc):
                raise
            # The row is locked although the lease it fences has expired (the acquire waits
            # only on an expired row): a stuck leader's session, ended so the next beat wins.
            self.driver.end_expired_lease_holders(now)
            return None
        self.driver.lease_row_free()
        return rows.lease(row, self.codec) if row is not None else None

    def renew_leadership(
        self, node_id: str, epoch: int, ttl: timedelta, *, now: datetime | None = None
    ) -> Lease:
        params = {
            "node": node_id,
            "epoch": epoch,
            "ttl": self.codec.duration(ttl),
            "now": self.driver.at(now),
        }
        with self.driver.read() as tx:
            row = tx.one(self.q["renew_leadership"], params)
        if row is None:
            raise LeadershipLost(node_id, epoch)
        return rows.lease(row, self.codec)

    def resign_leadership(self, node_id: str, epoch: int) -> None:
        params = {"node": node_id, "epoch": epoch, "now": self.driver.at(None)}
        with self.driver.read() as tx:
            tx.count(self.q["resign_leadership"], params)

    def leader(self, *, now: datetime | None = None) -> Lease | None:
        with self.driver.read() as tx:
            row = tx.one(self.q["leader"], {"now": self.driver.at(now)})
        return rows.lease(row, self.codec) if row is not None else None

    def leader_terms(
        self, *, since: datetime, until: datetime, now: datetime | None = None
    ) -> list[LeaderTerm]:
        time = self.codec.time
        params = {"since": time(since), "until": time(until), "now": self.driver.at(now)}
        with self.driver.read() as tx:
            found = tx.all(self.q["leader_terms"], params)
        return [rows.leader_term(r, self.codec) for r in found]
