-- v16: who led when (as PostgreSQL's v19). A row per leadership term, written by the
-- acquire that takes the lease at a new epoch, in its transaction; renewals write nothing
-- here. ``ended_at`` is set when the next term starts: the expiry of the lease the term
-- held (its last renewal plus the TTL, or the moment it was resigned), which the acquire
-- keeps in ``tickwork_leases.previous_expires_at`` as it overwrites ``expires_at``. NULL
-- while the term is the latest: the lease row tells then. Pruned by retention with the
-- runs, the latest KEEP_LEADER_TERMS kept (store/base.py).
CREATE TABLE tickwork_leader_terms (
    epoch      INTEGER PRIMARY KEY,
    holder     TEXT    NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at   INTEGER
);
ALTER TABLE tickwork_leases ADD COLUMN previous_expires_at INTEGER NOT NULL DEFAULT 0;
