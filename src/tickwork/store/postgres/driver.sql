-- The PostgreSQL driver's own statements: the clock, notifications, lock waits and the
-- migrations ledger. Plumbing, not transitions: the store's queries are in queries.sql,
-- under the same names as SQLite's (SQLite's plumbing is PRAGMAs and BEGIN IMMEDIATE).

-- name: now
SELECT coalesce(%(now)s::timestamptz, now()) AS now;

-- name: notify
SELECT pg_notify(%(channel)s, '');

-- name: leadership_lock_timeout
-- The lease row is locked only for milliseconds (a renew, or a trigger's FOR SHARE), so an
-- acquire that waits longer is behind something stuck: give up and try at the next beat
-- instead of queueing behind it (the election thread stays on its cadence).
SET LOCAL lock_timeout = '500ms';

-- name: migration_lock
SELECT pg_advisory_xact_lock(7201865394127);

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS tickwork_schema_migrations (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied_versions
SELECT version FROM tickwork_schema_migrations ORDER BY version;

-- name: record_migration
INSERT INTO tickwork_schema_migrations (version) VALUES (%(version)s);

-- name: migrations_table_exists
SELECT to_regclass('tickwork_schema_migrations') IS NOT NULL AS present;
