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

-- name: end_expired_lease_holders
-- Sessions that hold the lease row locked although the lease has expired, and have waited
-- on their client for over a second: a leader whose client stopped, or was cut off,
-- half-way through a pipelined trigger, before the Sync that arms
-- idle_in_transaction_session_timeout. The server waits for the rest of that batch for as
-- long as the TCP connection lives (for ever behind a stopped process, or a middlebox that
-- keeps the socket open). The lease it fenced on has expired and its client is not
-- sending: ending the session rolls it back and frees the row. A session still at work
-- (running a statement, or in a lock wait) is left to finish. The locker is found by the
-- row's xmax (one locker) or by its FOR SHARE lock on the table (several: a MultiXact).
SELECT count(*) FILTER (WHERE pg_terminate_backend(a.pid)) AS ended
FROM tickwork_leases l, pg_stat_activity a
WHERE l.name = 'scheduler' AND l.expires_at <= coalesce(%(now)s::timestamptz, now())
  AND a.pid <> pg_backend_pid()
  AND a.wait_event = 'ClientRead' AND a.state <> 'idle'
  AND a.state_change <= clock_timestamp() - interval '1 second'
  AND (a.backend_xid = l.xmax
       OR a.pid IN (SELECT k.pid FROM pg_locks k
                    WHERE k.relation = 'tickwork_leases'::regclass
                      AND k.mode = 'RowShareLock' AND k.granted));

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

-- name: schema_columns
-- The schema as schema.sql holds it (schema.PgSchema.schema_sql): tickwork's tables'
-- columns, in their order...
SELECT c.relname AS "table", a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
       a.attidentity AS identity, a.attnotnull AS not_null,
       pg_get_expr(d.adbin, d.adrelid) AS "default"
FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND c.relname LIKE 'tickwork\_%'
ORDER BY c.relname, a.attnum;

-- name: schema_constraints
-- ... their constraints (NOT NULL is the column's: PostgreSQL 18 lists it here too) ...
SELECT c.relname AS "table", k.conname AS name, pg_get_constraintdef(k.oid) AS definition
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relname LIKE 'tickwork\_%'
  AND k.contype IN ('p', 'u', 'f', 'c', 'x')
ORDER BY c.relname, k.conname;

-- name: schema_indexes
-- ... and the indexes no constraint makes.
SELECT c.relname AS "table",
       replace(pg_get_indexdef(i.indexrelid), ' ON ' || quote_ident(current_schema()) || '.',
               ' ON ') AS definition
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_class x ON x.oid = i.indexrelid
WHERE c.relnamespace = current_schema()::regnamespace AND c.relname LIKE 'tickwork\_%'
  AND NOT EXISTS (SELECT FROM pg_constraint k WHERE k.conindid = i.indexrelid)
ORDER BY c.relname, x.relname;

-- name: schema_functions
-- ... and tickwork's functions, whole.
SELECT replace(pg_get_functiondef(p.oid),
               'FUNCTION ' || quote_ident(current_schema()) || '.', 'FUNCTION ') AS definition
FROM pg_proc p
WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'tickwork\_%'
ORDER BY p.proname, p.oid::regprocedure::text;
