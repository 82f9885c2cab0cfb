-- v19: who led when (``explain`` of a slot that ran late during a failover). A row per
-- leadership term, written by the acquire that takes the lease at a new epoch, in its
-- transaction; renewals write nothing here. ``ended_at`` is set when the next term starts:
-- the expiry of the lease the term held (its last renewal plus the TTL, or the moment it
-- was resigned), which the acquire keeps in ``tickwork_leases.previous_expires_at`` as it
-- overwrites ``expires_at``. NULL while the term is the latest: the lease row tells then.
-- Pruned by retention with the runs, the latest KEEP_LEADER_TERMS kept (store/base.py).
CREATE TABLE tickwork_leader_terms (
    epoch      bigint      PRIMARY KEY,
    holder     text        NOT NULL,
    started_at timestamptz NOT NULL,
    ended_at   timestamptz
);
ALTER TABLE tickwork_leases ADD COLUMN previous_expires_at timestamptz NOT NULL
    DEFAULT '-infinity';
