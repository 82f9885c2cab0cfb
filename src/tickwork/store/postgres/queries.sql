-- Named queries for the PostgreSQL store. Parameters are %(named)s; %(now)s is the
-- transaction's time, resolved once per call (coalesce(given, now())).
-- Arrays are sent as %(name)b (binary): psycopg writes the text form of a
-- timestamptz[] in Python, element by element, and the binary form costs a tenth of it
-- (benchmarks/README.md, "Figures behind the store's comments").

-- name: insert_job
INSERT INTO tickwork_jobs (tenant, name, task, args, schedule, state, next_run_at, queue,
    priority, max_attempts, backoff_base, backoff_cap, timeout, misfire, misfire_grace, overlap,
    idempotency_key, created_at, updated_at)
VALUES (%(tenant)s, %(name)s, %(task)s, %(args)s, %(schedule)s, %(state)s, %(next_run_at)s,
    %(queue)s, %(priority)s, %(max_attempts)s, %(backoff_base)s, %(backoff_cap)s, %(timeout)s,
    %(misfire)s, %(misfire_grace)s, %(overlap)s, %(idempotency_key)s, %(now)s, %(now)s)
ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING *;

-- name: insert_jobs
INSERT INTO tickwork_jobs (tenant, task, args, schedule, state, next_run_at, queue, priority,
    max_attempts, backoff_base, backoff_cap, timeout, misfire, misfire_grace, overlap,
    created_at, updated_at)
SELECT s.tenant, s.task, s.args, s.schedule, s.state, s.next_run_at, s.queue, s.priority,
    s.max_attempts, s.backoff_base, s.backoff_cap, s.timeout, s.misfire, s.misfire_grace,
    s.overlap, %(now)s, %(now)s
FROM unnest(%(tenants)s::text[], %(tasks)s::text[], %(args)s::jsonb[], %(schedules)s::jsonb[],
    %(states)s::text[], %(next_run_ats)s::timestamptz[], %(queues)s::text[],
    %(priorities)s::integer[], %(max_attempts)s::integer[], %(backoff_bases)s::float8[],
    %(backoff_caps)s::float8[], %(timeouts)s::float8[], %(misfires)s::text[],
    %(graces)s::float8[], %(overlaps)s::text[]) WITH ORDINALITY
    AS s (tenant, task, args, schedule, state, next_run_at, queue, priority, max_attempts,
          backoff_base, backoff_cap, timeout, misfire, misfire_grace, overlap, ord)
ORDER BY s.ord
RETURNING *;

-- name: job_by_idempotency_key
SELECT * FROM tickwork_jobs WHERE tenant = %(tenant)s AND idempotency_key = %(key)s;

-- name: job_by_name_for_update
SELECT * FROM tickwork_jobs WHERE tenant = %(tenant)s AND name = %(name)s FOR UPDATE;

-- name: update_job_spec
UPDATE tickwork_jobs SET task = %(task)s, args = %(args)s, schedule = %(schedule)s,
    state = %(state)s, next_run_at = %(next_run_at)s, queue = %(queue)s,
    priority = %(priority)s, max_attempts = %(max_attempts)s, backoff_base = %(backoff_base)s,
    backoff_cap = %(backoff_cap)s, timeout = %(timeout)s, misfire = %(misfire)s,
    misfire_grace = %(misfire_grace)s, overlap = %(overlap)s, updated_at = %(now)s
WHERE id = %(id)s
RETURNING *;

-- name: insert_runs
-- Answers only what the caller cannot know: it holds the jobs the runs copy.
INSERT INTO tickwork_runs (job_id, tenant, task, args, queue, priority, max_attempts,
    backoff_base, backoff_cap, timeout, scheduled_for, run_at, state, created_at)
SELECT j.id, j.tenant, j.task, j.args, j.queue, j.priority, j.max_attempts, j.backoff_base,
    j.backoff_cap, j.timeout, s.slot, s.slot, 'queued', %(now)s
FROM unnest(%(job_ids)b::bigint[], %(slots)b::timestamptz[]) WITH ORDINALITY
    AS s (job_id, slot, ord)
JOIN tickwork_jobs j ON j.id = s.job_id
ORDER BY s.ord
ON CONFLICT ON CONSTRAINT tickwork_runs_slot DO NOTHING
RETURNING id, job_id, scheduled_for, created_at;

-- name: get_job
SELECT * FROM tickwork_jobs
WHERE id = %(id)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s);

-- name: get_job_for_update
SELECT * FROM tickwork_jobs
WHERE id = %(id)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
FOR UPDATE;

-- name: list_jobs
SELECT * FROM tickwork_jobs
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
  AND (%(state)s::text IS NULL OR state = %(state)s)
  AND (%(task)s::text IS NULL OR task = %(task)s)
  AND (%(search)s::text IS NULL
       OR strpos(lower(coalesce(name, '')), lower(%(search)s)) > 0
       OR strpos(lower(task), lower(%(search)s)) > 0)
  AND (%(after)s::bigint IS NULL OR id < %(after)s)
ORDER BY id DESC LIMIT %(limit)s;

-- name: set_job_state
UPDATE tickwork_jobs SET state = %(state)s, next_run_at = %(next_run_at)s, updated_at = %(now)s
WHERE id = %(id)s
RETURNING *;

-- name: cancel_waiting_runs_of_job
UPDATE tickwork_runs SET state = 'cancelled', finished_at = %(now)s, lease_expires_at = NULL,
    error = %(reason)s
WHERE job_id = %(job_id)s AND state IN ('queued', 'failed')
RETURNING id;

-- name: trigger_head
-- The transaction's time and the fence: does %(epoch)s lead, unexpired? The lease row is
-- held FOR SHARE until commit, so a new leader's acquire waits for this trigger to end.
SELECT coalesce(%(now)s::timestamptz, now()) AS now, holder,
    (epoch = %(epoch)s AND expires_at > coalesce(%(now)s::timestamptz, now())) AS leads
FROM tickwork_leases WHERE name = 'scheduler'
FOR SHARE;

-- name: due_jobs
-- Only what planning and the new runs need, for tuple rows. A well-typed interval schedule
-- comes as the text of its two fields, for schedule.interval_from_json (decoding the JSON in
-- Python costs more per job than planning it); any other schedule as its JSON, for from_json
-- to read or reject.
SELECT id, next_run_at, misfire, misfire_grace, overlap,
    CASE WHEN schedule->>'kind' = 'interval' AND jsonb_typeof(schedule->'every') = 'number'
              AND coalesce(jsonb_typeof(schedule->'anchor'), 'null') IN ('string', 'null')
         THEN NULL ELSE schedule END AS schedule,
    schedule->>'every' AS every, schedule->>'anchor' AS anchor,
    tenant, task, args, queue, priority, max_attempts, timeout
FROM tickwork_jobs
WHERE state = 'active' AND next_run_at IS NOT NULL
  AND next_run_at <= coalesce(%(now)s::timestamptz, now())
ORDER BY next_run_at LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: unfinished_jobs
SELECT DISTINCT job_id FROM tickwork_runs
WHERE job_id = ANY(%(ids)b::bigint[]) AND state IN ('queued', 'running', 'failed');

-- name: cancel_unfinished_runs_of_jobs
UPDATE tickwork_runs SET state = 'cancelled', finished_at = %(now)s, lease_expires_at = NULL,
    error = %(reason)s
WHERE job_id = ANY(%(ids)b::bigint[]) AND state IN ('queued', 'running', 'failed')
RETURNING id;

-- name: advance_jobs
UPDATE tickwork_jobs j SET next_run_at = a.next_run_at, state = a.state, updated_at = %(now)s
FROM unnest(%(ids)b::bigint[], %(next_run_ats)b::timestamptz[], %(states)b::text[])
    AS a (id, next_run_at, state)
WHERE j.id = a.id;

-- name: insert_slot_skips
INSERT INTO tickwork_slot_skips (job_id, first_slot, last_slot, count, fate, run_id, more,
    recorded_at)
SELECT s.job_id, s.first_slot, s.last_slot, s.count, s.fate, s.run_id, s.more, %(now)s
FROM unnest(%(job_ids)b::bigint[], %(first_slots)b::timestamptz[],
    %(last_slots)b::timestamptz[], %(counts)b::integer[], %(fates)b::text[],
    %(run_ids)b::bigint[], %(mores)b::boolean[])
    AS s (job_id, first_slot, last_slot, count, fate, run_id, more);

-- name: next_due_at
SELECT min(next_run_at) AS at FROM tickwork_jobs
WHERE state = 'active' AND next_run_at IS NOT NULL;

-- name: next_due_at_with_clock
SELECT min(next_run_at) AS at, coalesce(%(now)s::timestamptz, clock_timestamp()) AS now
FROM tickwork_jobs WHERE state = 'active' AND next_run_at IS NOT NULL;

-- name: complete_then_claim
-- A busy worker's one statement per batch: complete what it finished (as complete_ids),
-- then claim (as claim); one round trip, one commit. The two updates cannot meet: one takes
-- running runs, the other queued or failed ones. The claimed runs come back lean (the
-- columns of ClaimedRun, in claim order); at least one row comes back: with no run claimed,
-- one row of NULLs carrying the count of completions applied. A line ending
-- "-- only-queues" is dropped for a worker that takes every queue (see for_queues).
-- With any tenant or task limited it claims nothing (the limited path claims, in a
-- transaction: claim_candidates) and "limited" says so. Both read one materialized
-- check (two empty tables, once per statement); the gate is pseudo-constant, a one-time
-- filter that leaves the planner's estimate, and so its plan (the claim index read in
-- order, stopping at the limit), as it was without it.
WITH limits AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM tickwork_tenants WHERE max_running IS NOT NULL
                   UNION ALL SELECT 1 FROM tickwork_task_limits) AS set
), done AS (
    UPDATE tickwork_runs r
    SET state = 'succeeded', finished_at = coalesce(%(now)s::timestamptz, now()), lease_expires_at = NULL,
        result = c.result, error = NULL
    FROM unnest(%(ids)b::bigint[], %(tokens)b::bigint[], %(results)b::jsonb[])
        AS c (id, token, result)
    WHERE r.id = c.id AND r.fencing_token = c.token AND r.state = 'running'
    RETURNING r.id
), picked AS (
    SELECT id FROM tickwork_runs
    WHERE state IN ('queued', 'failed') AND run_at <= coalesce(%(now)s::timestamptz, now())
      AND queue = ANY(%(queues)s::text[])  -- only-queues
      AND NOT (SELECT set FROM limits)
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE tickwork_runs r
    SET state = 'running', worker = %(worker)s, fencing_token = r.fencing_token + 1,
        lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
        started_at = coalesce(%(now)s::timestamptz, now())
    FROM picked WHERE r.id = picked.id
    RETURNING r.id, r.fencing_token, r.job_id, r.tenant, r.task, r.args, r.scheduled_for,
        r.attempt, r.max_attempts, make_interval(secs => r.timeout) AS timeout,
        r.priority, r.run_at
)
SELECT d.completed,
    (SELECT set FROM limits) AS limited,
    c.id, c.fencing_token, c.job_id, c.tenant, c.task, c.args,
    c.scheduled_for, c.attempt, c.max_attempts, c.timeout
FROM (SELECT count(*) AS completed FROM done) d
LEFT JOIN claimed c ON true
ORDER BY c.priority DESC, c.run_at, c.id;

-- name: claim
-- The one-statement claim, only while no tenant or task is limited (one-time gates, as in
-- complete_then_claim); "limited" on each row says whether any limit exists. A line
-- ending "-- only-queues" is dropped for a worker that takes every queue.
WITH picked AS (
    SELECT id FROM tickwork_runs
    WHERE state IN ('queued', 'failed') AND run_at <= coalesce(%(now)s::timestamptz, now())
      AND queue = ANY(%(queues)s::text[])  -- only-queues
      AND NOT EXISTS (SELECT 1 FROM tickwork_tenants WHERE max_running IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM tickwork_task_limits)
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE tickwork_runs r
SET state = 'running', worker = %(worker)s, fencing_token = r.fencing_token + 1,
    lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
    started_at = coalesce(%(now)s::timestamptz, now())
FROM picked WHERE r.id = picked.id
RETURNING r.*,
    (EXISTS (SELECT 1 FROM tickwork_tenants WHERE max_running IS NOT NULL)
     OR EXISTS (SELECT 1 FROM tickwork_task_limits)) AS limited;

-- name: next_claimable_at
SELECT min(run_at) AS at FROM tickwork_runs
WHERE state IN ('queued', 'failed')
  AND queue = ANY(%(queues)s::text[]);  -- only-queues

-- name: heartbeat
-- Runs are found by primary key, one lookup per lease (the unnest is the outer side).
WITH held AS (
    UPDATE tickwork_runs r
    SET lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval
    FROM unnest(%(ids)b::bigint[], %(tokens)b::bigint[]) AS c (id, token)
    WHERE r.id = c.id AND r.fencing_token = c.token AND r.state = 'running'
    RETURNING r.id, r.lease_expires_at
)
SELECT id, 'held' AS status, lease_expires_at FROM held
UNION ALL
SELECT c.id, CASE WHEN r.state = 'cancelled' THEN 'cancelled' ELSE 'lost' END, NULL
FROM unnest(%(ids)b::bigint[], %(tokens)b::bigint[]) AS c (id, token)
LEFT JOIN tickwork_runs r ON r.id = c.id AND r.fencing_token = c.token
WHERE c.id NOT IN (SELECT id FROM held);

-- name: complete
UPDATE tickwork_runs r
SET state = 'succeeded', finished_at = coalesce(%(now)s::timestamptz, now()),
    lease_expires_at = NULL, result = c.result, error = NULL
FROM unnest(%(ids)b::bigint[], %(tokens)b::bigint[], %(results)b::jsonb[])
    AS c (id, token, result)
WHERE r.id = c.id AND r.fencing_token = c.token AND r.state = 'running'
RETURNING r.*;

-- name: complete_ids
UPDATE tickwork_runs r
SET state = 'succeeded', finished_at = coalesce(%(now)s::timestamptz, now()),
    lease_expires_at = NULL, result = c.result, error = NULL
FROM unnest(%(ids)b::bigint[], %(tokens)b::bigint[], %(results)b::jsonb[])
    AS c (id, token, result)
WHERE r.id = c.id AND r.fencing_token = c.token AND r.state = 'running'
RETURNING r.id;

-- name: held_run_for_fail
SELECT attempt, max_attempts, backoff_base, backoff_cap, tenant, queue FROM tickwork_runs
WHERE id = %(id)s AND fencing_token = %(token)s AND state = 'running'
FOR UPDATE;

-- name: fail_retry
UPDATE tickwork_runs SET state = 'failed', attempt = attempt + 1,
    run_at = %(now)s + %(wait)s::interval, lease_expires_at = NULL, error = %(error)s,
    result = %(result)s
WHERE id = %(id)s AND fencing_token = %(token)s AND state = 'running'
RETURNING *;

-- name: fail_dead
UPDATE tickwork_runs SET state = 'dead', finished_at = %(now)s, lease_expires_at = NULL,
    error = %(error)s, result = %(result)s
WHERE id = %(id)s AND fencing_token = %(token)s AND state = 'running'
RETURNING *;

-- name: release
UPDATE tickwork_runs SET state = 'queued', run_at = coalesce(%(now)s::timestamptz, now()),
    lease_expires_at = NULL
WHERE id = %(id)s AND fencing_token = %(token)s AND state = 'running'
RETURNING *;

-- name: rescue
WITH expired AS (
    SELECT id FROM tickwork_runs
    WHERE state = 'running' AND lease_expires_at < coalesce(%(now)s::timestamptz, now())
    ORDER BY lease_expires_at LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE tickwork_runs r
SET state = CASE WHEN r.attempt >= r.max_attempts THEN 'dead' ELSE 'queued' END,
    attempt = CASE WHEN r.attempt >= r.max_attempts THEN r.attempt ELSE r.attempt + 1 END,
    finished_at = CASE WHEN r.attempt >= r.max_attempts
                       THEN coalesce(%(now)s::timestamptz, now()) END,
    run_at = coalesce(%(now)s::timestamptz, now()), lease_expires_at = NULL,
    error = 'lease expired: worker ' || coalesce(r.worker, '?') || ' stopped heartbeating'
FROM expired WHERE r.id = expired.id
RETURNING r.id, r.state;

-- name: get_run
SELECT * FROM tickwork_runs
WHERE id = %(id)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s);

-- name: get_run_for_update
SELECT * FROM tickwork_runs
WHERE id = %(id)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
FOR UPDATE;

-- name: list_runs
SELECT * FROM tickwork_runs
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
  AND (%(job_id)s::bigint IS NULL OR job_id = %(job_id)s)
  AND (%(state)s::text IS NULL OR state = %(state)s)
  AND (%(after)s::bigint IS NULL OR id < %(after)s)
  AND (%(task)s::text IS NULL OR task = %(task)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(since)s::timestamptz IS NULL OR scheduled_for >= %(since)s)
  AND (%(until)s::timestamptz IS NULL OR scheduled_for < %(until)s)
ORDER BY id DESC LIMIT %(limit)s;

-- name: bulk_retry
-- Dead runs matching a filter -> queued, at most limit (the caller asks for one more
-- than it allows, and rolls back when it gets it).
UPDATE tickwork_runs SET state = 'queued', attempt = 1, run_at = %(now)s, finished_at = NULL,
    lease_expires_at = NULL, manual = true
WHERE id IN (
    SELECT id FROM tickwork_runs
    WHERE state = 'dead' AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
      AND (%(job_id)s::bigint IS NULL OR job_id = %(job_id)s)
      AND (%(task)s::text IS NULL OR task = %(task)s)
      AND (%(queue)s::text IS NULL OR queue = %(queue)s)
      AND (%(since)s::timestamptz IS NULL OR scheduled_for >= %(since)s)
      AND (%(until)s::timestamptz IS NULL OR scheduled_for < %(until)s)
    ORDER BY id LIMIT %(limit)s FOR UPDATE)
  AND state = 'dead'
RETURNING id;

-- name: bulk_cancel
-- Waiting runs (queued, or failed and waiting to retry) matching a filter -> cancelled.
-- A run a worker claimed meanwhile fails the state check after the lock and is left.
UPDATE tickwork_runs SET state = 'cancelled', finished_at = %(now)s, lease_expires_at = NULL,
    error = 'cancelled'
WHERE id IN (
    SELECT id FROM tickwork_runs
    WHERE state IN ('queued', 'failed') AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
      AND (%(job_id)s::bigint IS NULL OR job_id = %(job_id)s)
      AND (%(task)s::text IS NULL OR task = %(task)s)
      AND (%(queue)s::text IS NULL OR queue = %(queue)s)
      AND (%(since)s::timestamptz IS NULL OR scheduled_for >= %(since)s)
      AND (%(until)s::timestamptz IS NULL OR scheduled_for < %(until)s)
    ORDER BY id LIMIT %(limit)s FOR UPDATE)
  AND state IN ('queued', 'failed')
RETURNING id;

-- name: cancel_run
UPDATE tickwork_runs SET state = 'cancelled', finished_at = %(now)s, lease_expires_at = NULL,
    error = 'cancelled'
WHERE id = %(id)s AND state IN ('queued', 'running', 'failed')
RETURNING *;

-- name: retry_run
UPDATE tickwork_runs SET state = 'queued', attempt = 1, run_at = %(now)s, finished_at = NULL,
    lease_expires_at = NULL, manual = true
WHERE id = %(id)s AND state IN ('dead', 'failed')
RETURNING *;

-- name: prune_runs
DELETE FROM tickwork_runs WHERE id IN (
    SELECT id FROM tickwork_runs
    WHERE state IN ('succeeded', 'dead', 'cancelled') AND finished_at < %(cutoff)s
    LIMIT %(limit)s);

-- name: prune_slot_skips
DELETE FROM tickwork_slot_skips WHERE recorded_at < %(cutoff)s;

-- name: slot_skips
SELECT s.* FROM tickwork_slot_skips s JOIN tickwork_jobs j ON j.id = s.job_id
WHERE s.job_id = %(job_id)s AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s)
ORDER BY s.first_slot DESC, s.id DESC LIMIT %(limit)s;

-- name: insert_slot_skip
INSERT INTO tickwork_slot_skips (job_id, first_slot, last_slot, count, fate, run_id, more,
    recorded_at)
VALUES (%(job_id)s, %(first_slot)s, %(last_slot)s, %(count)s, %(fate)s, %(run_id)s, %(more)s,
    %(now)s);

-- name: acquire_leadership
UPDATE tickwork_leases
SET epoch = CASE WHEN holder = %(node)s AND expires_at > coalesce(%(now)s::timestamptz, now())
                 THEN epoch ELSE epoch + 1 END,
    holder = %(node)s,
    expires_at = coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval
WHERE name = 'scheduler'
  AND (expires_at <= coalesce(%(now)s::timestamptz, now()) OR holder = %(node)s)
RETURNING holder, epoch, expires_at;

-- name: renew_leadership
UPDATE tickwork_leases
SET expires_at = coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval
WHERE name = 'scheduler' AND holder = %(node)s AND epoch = %(epoch)s
  AND expires_at > coalesce(%(now)s::timestamptz, now())
RETURNING holder, epoch, expires_at;

-- name: resign_leadership
UPDATE tickwork_leases SET expires_at = coalesce(%(now)s::timestamptz, now())
WHERE name = 'scheduler' AND holder = %(node)s AND epoch = %(epoch)s
  AND expires_at > coalesce(%(now)s::timestamptz, now());

-- name: leader
SELECT holder, epoch, expires_at FROM tickwork_leases
WHERE name = 'scheduler' AND expires_at > coalesce(%(now)s::timestamptz, now())
  AND holder <> '';

-- name: trigger_job
INSERT INTO tickwork_runs (job_id, tenant, task, args, queue, priority, max_attempts,
    backoff_base, backoff_cap, timeout, scheduled_for, run_at, state, created_at, manual)
SELECT id, tenant, task, args, queue, priority, max_attempts, backoff_base, backoff_cap,
    timeout, %(now)s, %(now)s, 'queued', %(now)s, true
FROM tickwork_jobs WHERE id = %(job_id)s
ON CONFLICT ON CONSTRAINT tickwork_runs_slot DO NOTHING
RETURNING *;

-- name: run_at_slot
SELECT * FROM tickwork_runs WHERE job_id = %(job_id)s AND scheduled_for = %(slot)s;

-- name: skips_covering
SELECT * FROM tickwork_slot_skips
WHERE job_id = %(job_id)s AND first_slot <= %(slot)s AND last_slot >= %(slot)s
ORDER BY id;

-- name: run_counts
SELECT state, count(*) AS n FROM tickwork_runs
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s) GROUP BY state;

-- name: due_backlog
SELECT count(*) AS n, min(run_at) AS oldest FROM tickwork_runs
WHERE state IN ('queued', 'failed') AND run_at <= %(now)s
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s);

-- name: recent_lag
-- The newest runs by id (no index on started_at: it would take an entry on every claim).
SELECT extract(epoch FROM started_at - scheduled_for) * 1000.0 AS lag_ms FROM tickwork_runs
WHERE attempt = 1 AND started_at IS NOT NULL AND NOT manual
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
ORDER BY id DESC LIMIT %(limit)s;

-- name: register_node
INSERT INTO tickwork_nodes (id, kind, host, pid, started_at, last_seen_at, running, info)
VALUES (%(id)s, %(kind)s, %(host)s, %(pid)s, %(now)s, %(now)s, 0, %(info)s)
ON CONFLICT (id) DO UPDATE SET last_seen_at = excluded.last_seen_at, info = excluded.info;

-- name: node_heartbeat
UPDATE tickwork_nodes SET last_seen_at = %(now)s, running = %(running)s,
    info = coalesce(%(info)s, info)
WHERE id = %(id)s;

-- name: deregister_node
DELETE FROM tickwork_nodes WHERE id = %(id)s;

-- name: forget_nodes
DELETE FROM tickwork_nodes WHERE last_seen_at < %(cutoff)s;

-- name: list_nodes
SELECT * FROM tickwork_nodes WHERE (%(since)s::timestamptz IS NULL OR last_seen_at >= %(since)s)
ORDER BY last_seen_at DESC, id;

-- name: create_api_key
INSERT INTO tickwork_api_keys (prefix, key_hash, tenant, admin, label, created_at)
VALUES (%(prefix)s, %(key_hash)s, %(tenant)s, %(admin)s, %(label)s, %(now)s)
RETURNING *;

-- name: api_key_by_hash
SELECT * FROM tickwork_api_keys WHERE key_hash = %(key_hash)s AND revoked_at IS NULL;

-- name: list_api_keys
SELECT * FROM tickwork_api_keys ORDER BY id DESC;

-- name: revoke_api_key
UPDATE tickwork_api_keys SET revoked_at = coalesce(revoked_at, %(now)s)
WHERE id::text = %(key)s OR prefix = %(key)s
RETURNING *;

-- name: revoke_key_sessions
UPDATE tickwork_sessions SET revoked_at = %(now)s
WHERE key_id = %(key_id)s AND revoked_at IS NULL;

-- name: sign_in
-- No row when the key is revoked or missing: the check and the insert are one statement.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now)
INSERT INTO tickwork_sessions
    (token_hash, key_id, created_at, last_seen_at, idle_timeout, expires_at)
SELECT %(token_hash)s, k.id, t.now, t.now, %(idle_timeout)s, t.now + %(lifetime)s
FROM tickwork_api_keys k, t WHERE k.id = %(key_id)s AND k.revoked_at IS NULL
RETURNING *;

-- name: forget_sessions
DELETE FROM tickwork_sessions
WHERE revoked_at < %(cutoff)s OR expires_at < %(cutoff)s
   OR last_seen_at + idle_timeout < %(cutoff)s;

-- name: session_by_hash
SELECT s.id, s.key_id, s.created_at, s.last_seen_at, s.idle_timeout, s.expires_at,
    s.revoked_at, k.prefix, k.tenant, k.admin, k.label, k.created_at AS key_created_at,
    k.revoked_at AS key_revoked_at, t.now
FROM tickwork_sessions s JOIN tickwork_api_keys k ON k.id = s.key_id,
    (SELECT coalesce(%(now)s::timestamptz, now()) AS now) t
WHERE s.token_hash = %(token_hash)s AND s.revoked_at IS NULL AND k.revoked_at IS NULL
  AND s.expires_at > t.now AND s.last_seen_at + s.idle_timeout > t.now;

-- name: see_session
UPDATE tickwork_sessions SET last_seen_at = %(now)s WHERE id = %(id)s AND last_seen_at < %(now)s;

-- name: sign_out
UPDATE tickwork_sessions SET revoked_at = coalesce(%(now)s::timestamptz, now())
WHERE token_hash = %(token_hash)s AND revoked_at IS NULL
RETURNING id;

-- name: completed_with_tokens
-- Which completions took: the run succeeded and still carries the completion's token.
SELECT r.id FROM tickwork_runs r
JOIN unnest(%(ids)b::bigint[], %(tokens)b::bigint[]) AS c (id, token)
    ON r.id = c.id AND r.fencing_token = c.token
WHERE r.state = 'succeeded';

-- name: set_tenant_limits
INSERT INTO tickwork_tenants (tenant, max_running, updated_at)
VALUES (%(tenant)s, %(max_running)s, %(now)s)
ON CONFLICT (tenant) DO UPDATE SET max_running = excluded.max_running,
    updated_at = excluded.updated_at
RETURNING *;

-- name: tenant_limits
SELECT * FROM tickwork_tenants WHERE tenant = %(tenant)s;

-- name: tenant_statuses
-- Every tenant with a limits row or runs running or queued-and-due, with its counts.
WITH counts AS (
    SELECT tenant, count(*) FILTER (WHERE state = 'running') AS running,
        count(*) FILTER (WHERE state <> 'running' AND run_at <= %(now)s) AS due
    FROM tickwork_runs
    WHERE state IN ('running', 'queued', 'failed')
      AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
    GROUP BY tenant
)
SELECT coalesce(t.tenant, c.tenant) AS tenant, t.max_running, t.rate, t.burst,
    coalesce(t.weight, 1) AS weight, coalesce(c.running, 0) AS running,
    coalesce(c.due, 0) AS due
FROM (SELECT * FROM tickwork_tenants
      WHERE %(tenant)s::text IS NULL OR tenant = %(tenant)s) t
FULL JOIN counts c ON c.tenant = t.tenant
WHERE t.tenant IS NOT NULL OR c.running > 0 OR c.due > 0
ORDER BY 1;

-- name: limited_tenants
-- The claim's limited path, in its transaction: every limited tenant, and whether this
-- claimer holds it. A held row stays locked until commit, so no other claimer counts and
-- claims that tenant at once; a row another claimer holds is skipped (so is its tenant).
SELECT t.tenant, t.max_running, h.tenant IS NOT NULL AS held
FROM tickwork_tenants t
LEFT JOIN (SELECT tenant FROM tickwork_tenants WHERE max_running IS NOT NULL
           FOR UPDATE SKIP LOCKED) h ON h.tenant = t.tenant
WHERE t.max_running IS NOT NULL
ORDER BY t.tenant;

-- name: running_of_tenants
-- A statement of its own, after limited_tenants: its snapshot is taken once the rows are
-- locked, so it sees the runs of every claimer that held them before.
SELECT tenant, count(*) AS n FROM tickwork_runs
WHERE state = 'running' AND tenant = ANY(%(tenants)s::text[])
GROUP BY tenant;

-- name: limited_tasks
-- As limited_tenants, for tasks' limits.
SELECT t.task, t.max_running, h.task IS NOT NULL AS held
FROM tickwork_task_limits t
LEFT JOIN (SELECT task FROM tickwork_task_limits FOR UPDATE SKIP LOCKED) h ON h.task = t.task
ORDER BY t.task;

-- name: running_of_tasks
-- As running_of_tenants, for tasks.
SELECT task, count(*) AS n FROM tickwork_runs
WHERE state = 'running' AND task = ANY(%(tasks)s::text[])
GROUP BY task;

-- name: claim_candidates
-- The limited path's candidates, in claim order: due runs of every tenant and task but
-- those in %(full)s and %(full_tasks)s (at their limit, or held by another claimer). Every
-- filter is a constant array, so the planner keeps the claim index read in order. The two
-- NOT EXISTS are one-time gates: a limit set since limited_tenants read them (on a tenant
-- or task not in %(known)s, %(known_tasks)s) stops this claim rather than go uncounted.
SELECT id, tenant, task FROM tickwork_runs
WHERE state IN ('queued', 'failed') AND run_at <= coalesce(%(now)s::timestamptz, now())
  AND queue = ANY(%(queues)s::text[])  -- only-queues
  AND id <> ALL(%(taken)s::bigint[]) AND tenant <> ALL(%(full)s::text[])
  AND task <> ALL(%(full_tasks)s::text[])
  AND NOT EXISTS (SELECT 1 FROM tickwork_tenants
                  WHERE max_running IS NOT NULL AND tenant <> ALL(%(known)s::text[]))
  AND NOT EXISTS (SELECT 1 FROM tickwork_task_limits
                  WHERE task <> ALL(%(known_tasks)s::text[]))
ORDER BY priority DESC, run_at, id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: claim_ids
UPDATE tickwork_runs r
SET state = 'running', worker = %(worker)s, fencing_token = r.fencing_token + 1,
    lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
    started_at = coalesce(%(now)s::timestamptz, now())
WHERE r.id = ANY(%(ids)s::bigint[])
RETURNING r.*;

-- name: set_task_limit
INSERT INTO tickwork_task_limits (task, max_running, updated_at)
VALUES (%(task)s, %(max_running)s, %(now)s)
ON CONFLICT (task) DO UPDATE SET max_running = excluded.max_running,
    updated_at = excluded.updated_at
WHERE tickwork_task_limits.max_running <> excluded.max_running;

-- name: clear_task_limit
DELETE FROM tickwork_task_limits WHERE task = %(task)s;

-- name: task_limits
SELECT task, max_running FROM tickwork_task_limits ORDER BY task;

-- name: queue_stats
SELECT queue,
    count(*) FILTER (WHERE state IN ('queued', 'failed') AND run_at <= %(now)s) AS due,
    count(*) FILTER (WHERE state = 'running') AS running,
    min(run_at) FILTER (WHERE state IN ('queued', 'failed') AND run_at <= %(now)s) AS oldest
FROM tickwork_runs
WHERE state IN ('queued', 'failed', 'running')
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
GROUP BY queue ORDER BY queue;

-- name: rollup_mark
-- The lock serialises two folds (a deposed leader's and the new one's): the second reads
-- the mark the first moved, so no finished run is counted twice.
SELECT folded_to FROM tickwork_rollup WHERE name = 'runs' FOR UPDATE;

-- name: set_rollup_mark
UPDATE tickwork_rollup SET folded_to = %(to)s WHERE name = 'runs';

-- name: finished_between
-- Runs that finished in [start, to), for the per-minute rollup (the finished index).
SELECT tenant, queue, state, finished_at, started_at, scheduled_for, attempt, manual
FROM tickwork_runs
WHERE state IN ('succeeded', 'dead', 'cancelled')
  AND finished_at >= %(start)s AND finished_at < %(to)s;

-- name: depth_by_queue
SELECT tenant, queue, count(*) AS n FROM tickwork_runs
WHERE state IN ('queued', 'failed') AND run_at <= %(now)s
GROUP BY tenant, queue;

-- name: minute_lag
SELECT lag FROM tickwork_run_minutes
WHERE minute = %(minute)s AND tenant = %(tenant)s AND queue = %(queue)s;

-- name: add_minute
-- Counts add up (the fail path adds to `failed` concurrently); `lag` is the histogram
-- already merged by the fold; `depth` is replaced by a new sample only.
INSERT INTO tickwork_run_minutes AS m (minute, tenant, queue, succeeded, failed, dead, lag,
    depth)
VALUES (%(minute)s, %(tenant)s, %(queue)s, %(succeeded)s, %(failed)s, %(dead)s, %(lag)s,
    coalesce(%(depth)s::integer, 0))
ON CONFLICT (minute, tenant, queue) DO UPDATE SET
    succeeded = m.succeeded + excluded.succeeded, failed = m.failed + excluded.failed,
    dead = m.dead + excluded.dead, lag = excluded.lag,
    depth = CASE WHEN %(depth)s::integer IS NULL THEN m.depth ELSE excluded.depth END;

-- name: prune_minutes
DELETE FROM tickwork_run_minutes WHERE minute < %(cutoff)s;

-- name: count_failed
INSERT INTO tickwork_run_minutes AS m (minute, tenant, queue, failed)
VALUES (%(minute)s, %(tenant)s, %(queue)s, 1)
ON CONFLICT (minute, tenant, queue) DO UPDATE SET failed = m.failed + 1;

-- name: run_minutes
SELECT minute, succeeded, failed, dead, depth, lag FROM tickwork_run_minutes
WHERE minute >= %(since)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
ORDER BY minute;
