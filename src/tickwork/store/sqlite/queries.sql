-- Named queries for the SQLite store. Parameters are :named; times are integer microseconds.

-- name: job_by_idempotency_key
SELECT j.*, CASE WHEN j.state = 'completed' THEN (
        SELECT r.state FROM tickwork_runs r WHERE r.job_id = j.id
        ORDER BY r.scheduled_for DESC LIMIT 1) END AS run_state
FROM tickwork_jobs j WHERE j.tenant = :tenant AND j.idempotency_key = :key;

-- name: job_by_name_for_update
-- Every write transaction holds the database's write lock (BEGIN IMMEDIATE): no row lock.
SELECT * FROM tickwork_jobs WHERE tenant = :tenant AND name = :name;

-- name: insert_job
INSERT INTO tickwork_jobs (tenant, name, task, args, schedule, state, next_run_at, queue,
    priority, max_attempts, backoff_base, backoff_cap, timeout, misfire, misfire_grace, overlap,
    idempotency_key, trace_context, created_at, updated_at)
VALUES (:tenant, :name, :task, :args, :schedule, :state, :next_run_at, :queue, :priority,
    :max_attempts, :backoff_base, :backoff_cap, :timeout, :misfire, :misfire_grace, :overlap,
    :idempotency_key, :trace_context, :now, :now)
RETURNING *;

-- name: update_job_spec
UPDATE tickwork_jobs SET task = :task, args = :args, schedule = :schedule, state = :state,
    next_run_at = :next_run_at, queue = :queue, priority = :priority,
    max_attempts = :max_attempts, backoff_base = :backoff_base, backoff_cap = :backoff_cap,
    timeout = :timeout, misfire = :misfire, misfire_grace = :misfire_grace, overlap = :overlap,
    updated_at = :now
WHERE id = :id
RETURNING *;

-- name: insert_runs
-- One run per call: SQLite has no arrays, and a statement costs no round trip here.
INSERT INTO tickwork_runs (job_id, tenant, task, args, queue, priority, max_attempts,
    backoff_base, backoff_cap, timeout, scheduled_for, run_at, state, created_at)
SELECT id, tenant, task, args, queue, priority, max_attempts, backoff_base, backoff_cap,
    timeout, :scheduled_for, :scheduled_for, 'queued', :now
FROM tickwork_jobs WHERE id = :job_id
ON CONFLICT (job_id, scheduled_for) DO NOTHING
RETURNING *;

-- name: get_job
-- A job read carries run_state: its latest run's state once its schedule is completed (a
-- one-off job reads as that run: JobState.of in tickwork/job.py).
SELECT j.*, CASE WHEN j.state = 'completed' THEN (
        SELECT r.state FROM tickwork_runs r WHERE r.job_id = j.id
        ORDER BY r.scheduled_for DESC LIMIT 1) END AS run_state
FROM tickwork_jobs j WHERE j.id = :id AND (:tenant IS NULL OR j.tenant = :tenant);

-- name: get_job_for_update
SELECT j.*, CASE WHEN j.state = 'completed' THEN (
        SELECT r.state FROM tickwork_runs r WHERE r.job_id = j.id
        ORDER BY r.scheduled_for DESC LIMIT 1) END AS run_state
FROM tickwork_jobs j WHERE j.id = :id AND (:tenant IS NULL OR j.tenant = :tenant);

-- name: list_jobs
-- :state is the job's state as JobState.of derives it (tickwork/job.py), not the stored
-- one: a one-off job is 'scheduled' until triggered, then its latest run's state
-- ('finished' when no run is left); a recurring job with no slot left is 'finished'.
SELECT * FROM (
    SELECT j.*, CASE WHEN j.state = 'completed' THEN (
        SELECT r.state FROM tickwork_runs r WHERE r.job_id = j.id
        ORDER BY r.scheduled_for DESC LIMIT 1) END AS run_state
    FROM tickwork_jobs j
    WHERE (:tenant IS NULL OR j.tenant = :tenant)
      AND (:task IS NULL OR j.task = :task) AND (:after IS NULL OR j.id < :after)
      AND (:search IS NULL OR instr(lower(coalesce(j.name, '')), lower(:search)) > 0
           OR instr(lower(j.task), lower(:search)) > 0)
      AND (:recurring IS NULL OR (json_extract(j.schedule, '$.kind') <> 'once') = :recurring)
) AS j
WHERE :state IS NULL OR :state = CASE
    WHEN j.state = 'active' AND json_extract(j.schedule, '$.kind') = 'once' THEN 'scheduled'
    WHEN j.state = 'completed' AND json_extract(j.schedule, '$.kind') = 'once'
        THEN coalesce(j.run_state, 'finished')
    WHEN j.state = 'completed' THEN 'finished'
    ELSE j.state END
ORDER BY j.id DESC LIMIT :limit;

-- name: set_job_state
UPDATE tickwork_jobs SET state = :state, next_run_at = :next_run_at, updated_at = :now
WHERE id = :id
RETURNING *;

-- name: cancel_waiting_runs_of_job
UPDATE tickwork_runs SET state = 'cancelled', finished_at = :now, lease_expires_at = NULL,
    error = :reason
WHERE job_id = :job_id AND state IN ('queued', 'failed')
RETURNING id;

-- name: trigger_head
-- The fence: does :epoch lead, unexpired? (and who holds the lease, for the error).
SELECT :now AS now, holder, (epoch = :epoch AND expires_at > :now) AS leads
FROM tickwork_leases WHERE name = 'scheduler';

-- name: due_jobs
-- A one-off job up to :lead microseconds before its time (ONE_OFF_LEAD).
SELECT * FROM tickwork_jobs
WHERE state = 'active' AND next_run_at IS NOT NULL AND next_run_at <= :now + :lead
  AND (next_run_at <= :now OR json_extract(schedule, '$.kind') = 'once')
ORDER BY next_run_at LIMIT :limit;

-- name: advance_jobs
-- Run with executemany, one parameter set per job.
UPDATE tickwork_jobs SET next_run_at = :next_run_at, state = :state, updated_at = :now
WHERE id = :id;

-- name: cancel_unfinished_runs_of_jobs
-- :ids is a JSON array of job ids.
UPDATE tickwork_runs SET state = 'cancelled', finished_at = :now, lease_expires_at = NULL,
    error = :reason
WHERE job_id IN (SELECT value FROM json_each(:ids)) AND state IN ('queued', 'running', 'failed')
RETURNING id;

-- name: insert_slot_skip
INSERT INTO tickwork_slot_skips (job_id, first_slot, last_slot, count, fate, run_id, more,
    recorded_at)
VALUES (:job_id, :first_slot, :last_slot, :count, :fate, :run_id, :more, :now);

-- name: insert_slot_skips
-- The trigger's ledger: insert_slot_skip, run with executemany.
INSERT INTO tickwork_slot_skips (job_id, first_slot, last_slot, count, fate, run_id, more,
    recorded_at)
VALUES (:job_id, :first_slot, :last_slot, :count, :fate, :run_id, :more, :now);

-- name: next_due_at
-- When the trigger next has work (see PostgreSQL's): less the lead for a one-off.
SELECT (SELECT CASE WHEN json_extract(schedule, '$.kind') = 'once' THEN next_run_at - :lead
                    ELSE next_run_at END
        FROM tickwork_jobs WHERE state = 'active' AND next_run_at IS NOT NULL
        ORDER BY next_run_at, json_extract(schedule, '$.kind') = 'once' DESC LIMIT 1) AS at,
    :now AS now;

-- name: claimable
-- The claim's eligibility predicate, written once: a run a claim may take waits (queued,
-- or failed and waiting for its retry), is due by the claim's clock, is in a queue the
-- claimer takes and of a task it has. claim and claim_candidates include it (a line
-- "-- include: claimable", store/queries.py); the "-- only-queues" and "-- only-tasks"
-- lines are dropped as in any query.
AND state IN ('queued', 'failed') AND run_at <= :now
AND queue IN (SELECT value FROM json_each(:queues))  -- only-queues
AND task IN (SELECT value FROM json_each(:tasks))  -- only-tasks

-- name: claim
-- A line ending "-- only-queues" is dropped for a worker that takes every queue, one ending
-- "-- only-tasks" for one that has every task; :queues and :tasks are JSON arrays. Only
-- while no run of a task outside :tasks waits (others_waiting), so the filter drops no row
-- the index hands it.
UPDATE tickwork_runs
SET state = 'running', worker = :worker, fencing_token = fencing_token + 1,
    lease_expires_at = :now + :lease, started_at = :now
WHERE id IN (
    SELECT id FROM tickwork_runs INDEXED BY tickwork_runs_claim
    WHERE true
      -- include: claimable
    ORDER BY priority DESC, run_at, id LIMIT :limit)
RETURNING *;

-- name: next_claimable_at
-- With tasks, through tickwork_runs_task: this claimer's own waiting runs, not a backlog of
-- another task's (whose runs, due long ago, would wake it for nothing).
SELECT min(run_at) AS at FROM tickwork_runs
WHERE state IN ('queued', 'failed')
  AND task IN (SELECT value FROM json_each(:tasks))  -- only-tasks
  AND queue IN (SELECT value FROM json_each(:queues));  -- only-queues

-- name: heartbeat
UPDATE tickwork_runs SET lease_expires_at = :lease_expires_at
WHERE id = :id AND fencing_token = :token AND state = 'running'
RETURNING lease_expires_at;

-- name: held_run_state
SELECT state FROM tickwork_runs WHERE id = :id AND fencing_token = :token;

-- name: complete
UPDATE tickwork_runs SET state = 'succeeded', finished_at = :now, lease_expires_at = NULL,
    result = :result, error = NULL
WHERE id = :id AND fencing_token = :token AND state = 'running'
RETURNING *;

-- name: complete_ids
UPDATE tickwork_runs SET state = 'succeeded', finished_at = :now, lease_expires_at = NULL,
    result = :result, error = NULL
WHERE id = :id AND fencing_token = :token AND state = 'running'
RETURNING id;

-- name: held_run_for_fail
-- With what the totals count of a failed attempt (`limited` as in finished_between).
SELECT r.attempt, r.max_attempts, r.backoff_base, r.backoff_cap, r.tenant, r.task, r.queue,
    r.started_at, r.scheduled_for, r.manual,
    EXISTS (SELECT 1 FROM tickwork_tenants t WHERE t.tenant = r.tenant
            AND (t.max_running IS NOT NULL OR t.rate IS NOT NULL))
    OR EXISTS (SELECT 1 FROM tickwork_task_limits k WHERE k.task = r.task) AS limited
FROM tickwork_runs r
WHERE r.id = :id AND r.fencing_token = :token AND r.state = 'running';

-- name: fail_retry
UPDATE tickwork_runs SET state = 'failed', attempt = attempt + 1, run_at = :now + :wait,
    lease_expires_at = NULL, error = :error, result = :result
WHERE id = :id AND fencing_token = :token AND state = 'running'
RETURNING *;

-- name: fail_dead
UPDATE tickwork_runs SET state = 'dead', finished_at = :now, lease_expires_at = NULL,
    error = :error, result = :result
WHERE id = :id AND fencing_token = :token AND state = 'running'
RETURNING *;

-- name: release
UPDATE tickwork_runs SET state = 'queued', run_at = :now, lease_expires_at = NULL
WHERE id = :id AND fencing_token = :token AND state = 'running'
RETURNING *;

-- name: end_rescued_attempts
-- The rescue's first step: the runs whose lease expired (running, lease_expires_at < now),
-- earliest first, at most :limit; each one's attempt ends in its history, lease_lost
-- (injected_fault when a fault was marked since its claim: the worker crashed or stalled
-- on purpose). The write lock holds off every other rescuer until `rescue` moved them.
INSERT INTO tickwork_attempts (run_id, n, attempt, fencing_token, worker, started_at,
    ended_at, ended, error, traceback)
SELECT e.id, coalesce((SELECT max(a.n) FROM tickwork_attempts a WHERE a.run_id = e.id), 0) + 1,
    e.attempt, e.fencing_token, e.worker, e.started_at, :now,
    CASE WHEN e.fault IS NULL THEN 'lease_lost' ELSE 'injected_fault' END,
    CASE WHEN e.fault IS NULL THEN '' ELSE 'injected fault: ' || e.fault || '; ' END
        || 'lease expired: worker ' || coalesce(e.worker, '?') || ' stopped heartbeating',
    NULL
FROM (
    SELECT r.id, r.attempt, r.fencing_token, r.worker, r.started_at,
        (SELECT m.value ->> '$.fault' FROM json_each(r.injected) AS m
         WHERE m.value ->> '$.attempt' = r.attempt AND m.value ->> '$.at' >= r.started_at
         LIMIT 1) AS fault
    FROM tickwork_runs r
    WHERE r.state = 'running' AND r.lease_expires_at < :now
    ORDER BY r.lease_expires_at, r.id LIMIT :limit
) AS e
RETURNING run_id, n;

-- name: rescue
-- The runs end_rescued_attempts took (:ids, a JSON array) -> queued with attempt + 1, or
-- dead on their last attempt.
UPDATE tickwork_runs
SET state = CASE WHEN attempt >= max_attempts THEN 'dead' ELSE 'queued' END,
    attempt = CASE WHEN attempt >= max_attempts THEN attempt ELSE attempt + 1 END,
    finished_at = CASE WHEN attempt >= max_attempts THEN :now END,
    run_at = :now, lease_expires_at = NULL,
    error = 'lease expired: worker ' || coalesce(worker, '?') || ' stopped heartbeating'
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'running'
RETURNING id, state;

-- name: end_attempt
-- The attempt that holds the run under :token ends (fail, release, cancel_run): its row
-- in the history, `n` one past the run's last. One a fault was injected into (a mark since
-- its claim) ends injected_fault, unless it was cancelled. No row when the run is not
-- running under :token: the caller raises LeaseLost.
INSERT INTO tickwork_attempts (run_id, n, attempt, fencing_token, worker, started_at,
    ended_at, ended, error, traceback)
SELECT r.id, coalesce((SELECT max(a.n) FROM tickwork_attempts a WHERE a.run_id = r.id), 0) + 1,
    r.attempt, r.fencing_token, r.worker, r.started_at, :now,
    CASE WHEN :ended <> 'cancelled' AND r.injected IS NOT NULL AND EXISTS (
            SELECT 1 FROM json_each(r.injected) AS m
            WHERE m.value ->> '$.attempt' = r.attempt AND m.value ->> '$.at' >= r.started_at)
         THEN 'injected_fault' ELSE :ended END,
    :error, :traceback
FROM tickwork_runs r
WHERE r.id = :id AND r.fencing_token = :token AND r.state = 'running'
RETURNING run_id, n;

-- name: end_replaced_attempts
-- Overlap 'replace' cancels the running runs of jobs :ids (a JSON array) too: their
-- attempts end cancelled, before cancel_unfinished_runs_of_jobs moves them.
INSERT INTO tickwork_attempts (run_id, n, attempt, fencing_token, worker, started_at,
    ended_at, ended, error, traceback)
SELECT r.id, coalesce((SELECT max(a.n) FROM tickwork_attempts a WHERE a.run_id = r.id), 0) + 1,
    r.attempt, r.fencing_token, r.worker, r.started_at, :now, 'cancelled', :reason, NULL
FROM tickwork_runs r
WHERE r.job_id IN (SELECT value FROM json_each(:ids)) AND r.state = 'running'
RETURNING run_id, n;

-- name: trim_attempts
-- A run's history keeps its last ATTEMPTS_KEPT ended attempts: the older ones go.
DELETE FROM tickwork_attempts WHERE run_id = :id AND n <= :through;

-- name: run_attempts
SELECT * FROM tickwork_attempts WHERE run_id = :id ORDER BY n;

-- name: get_run
SELECT * FROM tickwork_runs WHERE id = :id AND (:tenant IS NULL OR tenant = :tenant);

-- name: get_run_for_update
SELECT * FROM tickwork_runs WHERE id = :id AND (:tenant IS NULL OR tenant = :tenant);

-- name: list_runs
SELECT * FROM tickwork_runs
WHERE (:tenant IS NULL OR tenant = :tenant) AND (:job_id IS NULL OR job_id = :job_id)
  AND (:state IS NULL OR state = :state) AND (:after IS NULL OR id < :after)
  AND (:task IS NULL OR task = :task) AND (:queue IS NULL OR queue = :queue)
  AND (:since IS NULL OR scheduled_for >= :since)
  AND (:until IS NULL OR scheduled_for < :until)
  AND (:error IS NULL OR instr(lower(error), :error) > 0)
ORDER BY id DESC LIMIT :limit;

-- name: bulk_retry
-- Dead runs matching a filter -> queued, at most :limit (the caller asks for one more
-- than it allows, and rolls back when it gets it).
UPDATE tickwork_runs SET state = 'queued', attempt = 1, run_at = :now, finished_at = NULL,
    lease_expires_at = NULL, manual = 1
WHERE id IN (
    SELECT id FROM tickwork_runs
    WHERE state = 'dead' AND (:tenant IS NULL OR tenant = :tenant)
      AND (:job_id IS NULL OR job_id = :job_id)
      AND (:task IS NULL OR task = :task) AND (:queue IS NULL OR queue = :queue)
      AND (:since IS NULL OR scheduled_for >= :since)
      AND (:until IS NULL OR scheduled_for < :until)
      AND (:error IS NULL OR instr(lower(error), :error) > 0)
    ORDER BY id LIMIT :limit)
RETURNING id;

-- name: bulk_cancel
-- Waiting runs (queued, or failed and waiting to retry) matching a filter -> cancelled.
UPDATE tickwork_runs SET state = 'cancelled', finished_at = :now, lease_expires_at = NULL,
    error = 'cancelled'
WHERE id IN (
    SELECT id FROM tickwork_runs
    WHERE state IN ('queued', 'failed') AND (:tenant IS NULL OR tenant = :tenant)
      AND (:job_id IS NULL OR job_id = :job_id)
      AND (:task IS NULL OR task = :task) AND (:queue IS NULL OR queue = :queue)
      AND (:since IS NULL OR scheduled_for >= :since)
      AND (:until IS NULL OR scheduled_for < :until)
      AND (:error IS NULL OR instr(lower(error), :error) > 0)
    ORDER BY id LIMIT :limit)
RETURNING id;

-- name: cancel_run
UPDATE tickwork_runs SET state = 'cancelled', finished_at = :now, lease_expires_at = NULL,
    error = 'cancelled'
WHERE id = :id AND state IN ('queued', 'running', 'failed')
RETURNING *;

-- name: retry_run
UPDATE tickwork_runs SET state = 'queued', attempt = 1, run_at = :now, finished_at = NULL,
    lease_expires_at = NULL, manual = 1
WHERE id = :id AND state IN ('dead', 'failed')
RETURNING *;

-- name: prune_runs
DELETE FROM tickwork_runs WHERE id IN (
    SELECT id FROM tickwork_runs
    WHERE state IN ('succeeded', 'dead', 'cancelled') AND finished_at < :cutoff
    LIMIT :limit)
RETURNING id;

-- name: prune_attempts
-- The histories of the runs prune_runs deleted (:ids, a JSON array), in its transaction.
DELETE FROM tickwork_attempts WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: prune_slot_skips
DELETE FROM tickwork_slot_skips WHERE recorded_at < :cutoff;

-- name: slot_skips
SELECT s.* FROM tickwork_slot_skips s JOIN tickwork_jobs j ON j.id = s.job_id
WHERE s.job_id = :job_id AND (:tenant IS NULL OR j.tenant = :tenant)
ORDER BY s.first_slot DESC, s.id DESC LIMIT :limit;

-- name: unfinished_jobs
-- :ids is a JSON array of job ids.
SELECT DISTINCT job_id FROM tickwork_runs
WHERE job_id IN (SELECT value FROM json_each(:ids)) AND state IN ('queued', 'running', 'failed');

-- name: acquire_leadership
UPDATE tickwork_leases
SET epoch = CASE WHEN holder = :node AND expires_at > :now THEN epoch ELSE epoch + 1 END,
    previous_expires_at = CASE WHEN holder = :node AND expires_at > :now
                               THEN previous_expires_at ELSE expires_at END,
    holder = :node, expires_at = :now + :ttl
WHERE name = 'scheduler' AND (expires_at <= :now OR holder = :node)
RETURNING holder, epoch, expires_at;

-- name: begin_leader_term
INSERT INTO tickwork_leader_terms (epoch, holder, started_at) VALUES (:epoch, :node, :now)
ON CONFLICT (epoch) DO NOTHING;

-- name: end_leader_term
UPDATE tickwork_leader_terms
SET ended_at = (SELECT previous_expires_at FROM tickwork_leases WHERE name = 'scheduler')
WHERE epoch = :epoch - 1 AND ended_at IS NULL;

-- name: leader_terms
SELECT t.epoch, t.holder, t.started_at,
    coalesce(t.ended_at, CASE WHEN l.epoch = t.epoch AND l.expires_at <= :now
                              THEN l.expires_at END) AS ended_at
FROM tickwork_leader_terms t JOIN tickwork_leases l ON l.name = 'scheduler'
WHERE t.started_at <= :until
  AND t.epoch >= coalesce((SELECT max(epoch) FROM tickwork_leader_terms
                           WHERE started_at <= :since), 0)
ORDER BY t.epoch;

-- name: prune_leader_terms
DELETE FROM tickwork_leader_terms
WHERE ended_at < :cutoff AND epoch <= (SELECT max(epoch) FROM tickwork_leader_terms) - :keep;

-- name: renew_leadership
UPDATE tickwork_leases SET expires_at = :now + :ttl
WHERE name = 'scheduler' AND holder = :node AND epoch = :epoch AND expires_at > :now
RETURNING holder, epoch, expires_at;

-- name: resign_leadership
UPDATE tickwork_leases SET expires_at = :now
WHERE name = 'scheduler' AND holder = :node AND epoch = :epoch AND expires_at > :now;

-- name: leader
SELECT holder, epoch, expires_at FROM tickwork_leases
WHERE name = 'scheduler' AND expires_at > :now AND holder <> '';

-- name: trigger_job
INSERT INTO tickwork_runs (job_id, tenant, task, args, queue, priority, max_attempts,
    backoff_base, backoff_cap, timeout, scheduled_for, run_at, state, created_at, manual)
SELECT id, tenant, task, args, queue, priority, max_attempts, backoff_base, backoff_cap,
    timeout, :now, :now, 'queued', :now, 1
FROM tickwork_jobs WHERE id = :job_id
ON CONFLICT (job_id, scheduled_for) DO NOTHING
RETURNING *;

-- name: run_at_slot
SELECT * FROM tickwork_runs WHERE job_id = :job_id AND scheduled_for = :slot;

-- name: skips_covering
SELECT * FROM tickwork_slot_skips
WHERE job_id = :job_id AND first_slot <= :slot AND last_slot >= :slot
ORDER BY id;

-- name: run_counts
SELECT state, count(*) AS n FROM tickwork_runs
WHERE (:tenant IS NULL OR tenant = :tenant) GROUP BY state;

-- name: due_backlog
-- With, apart, the due runs of a tenant or task that has a limit (a limit may hold them
-- back on purpose: their wait is not lag) and the oldest of the others.
SELECT count(*) AS n, min(run_at) AS oldest, coalesce(sum(limited), 0) AS limited_n,
    min(CASE WHEN NOT limited THEN run_at END) AS open_oldest
FROM (
    SELECT run_at,
        tenant IN (SELECT tenant FROM tickwork_tenants
                   WHERE max_running IS NOT NULL OR rate IS NOT NULL)
        OR task IN (SELECT task FROM tickwork_task_limits) AS limited
    FROM tickwork_runs
    WHERE state IN ('queued', 'failed') AND run_at <= :now AND (:tenant IS NULL OR tenant = :tenant)
) AS due;

-- name: recent_lag
SELECT (started_at - scheduled_for) / 1000.0 AS lag_ms FROM tickwork_runs INDEXED BY tickwork_runs_started
WHERE attempt = 1 AND started_at IS NOT NULL AND NOT manual
  AND (:tenant IS NULL OR tenant = :tenant)
  -- A limit may hold these back on purpose (as in due_backlog): their wait is not lag.
  AND tenant NOT IN (SELECT tenant FROM tickwork_tenants
                     WHERE max_running IS NOT NULL OR rate IS NOT NULL)
  AND task NOT IN (SELECT task FROM tickwork_task_limits)
ORDER BY started_at DESC LIMIT :limit;

-- name: register_node
INSERT INTO tickwork_nodes (id, kind, host, pid, started_at, last_seen_at, running, info)
VALUES (:id, :kind, :host, :pid, :now, :now, 0, :info)
ON CONFLICT (id) DO UPDATE SET last_seen_at = excluded.last_seen_at, info = excluded.info;

-- name: node_heartbeat
UPDATE tickwork_nodes SET last_seen_at = :now, running = :running,
    info = coalesce(:info, info)
WHERE id = :id;

-- name: deregister_node
DELETE FROM tickwork_nodes WHERE id = :id;

-- name: forget_nodes
DELETE FROM tickwork_nodes WHERE last_seen_at < :cutoff;

-- name: get_node
SELECT * FROM tickwork_nodes WHERE id = :id;

-- name: forget_node
-- A dead node's row, only if it has not beaten since it was read (last_seen_at unchanged).
DELETE FROM tickwork_nodes WHERE id = :id AND last_seen_at = :seen;

-- name: list_nodes
SELECT * FROM tickwork_nodes WHERE (:since IS NULL OR last_seen_at >= :since)
ORDER BY last_seen_at DESC, id;

-- name: create_api_key
INSERT INTO tickwork_api_keys (prefix, key_hash, tenant, admin, label, created_at)
VALUES (:prefix, :key_hash, :tenant, :admin, :label, :now)
RETURNING *;

-- name: api_key_by_hash
SELECT * FROM tickwork_api_keys WHERE key_hash = :key_hash AND revoked_at IS NULL;

-- name: list_api_keys
SELECT * FROM tickwork_api_keys ORDER BY id DESC;

-- name: revoke_api_key
UPDATE tickwork_api_keys SET revoked_at = coalesce(revoked_at, :now)
WHERE CAST(id AS TEXT) = :key OR prefix = :key
RETURNING *;

-- name: revoke_key_sessions
UPDATE tickwork_sessions SET revoked_at = :now WHERE key_id = :key_id AND revoked_at IS NULL;

-- name: sign_in
-- No row when the key is revoked or missing: the check and the insert are one statement.
INSERT INTO tickwork_sessions
    (token_hash, key_id, created_at, last_seen_at, idle_timeout, expires_at)
SELECT :token_hash, id, :now, :now, :idle_timeout, :now + :lifetime
FROM tickwork_api_keys WHERE id = :key_id AND revoked_at IS NULL
RETURNING *;

-- name: forget_sessions
DELETE FROM tickwork_sessions
WHERE revoked_at < :cutoff OR expires_at < :cutoff OR last_seen_at + idle_timeout < :cutoff;

-- name: session_by_hash
SELECT s.id, s.key_id, s.created_at, s.last_seen_at, s.idle_timeout, s.expires_at,
    s.revoked_at, k.prefix, k.tenant, k.admin, k.label, k.created_at AS key_created_at,
    k.revoked_at AS key_revoked_at, :now AS now
FROM tickwork_sessions s JOIN tickwork_api_keys k ON k.id = s.key_id
WHERE s.token_hash = :token_hash AND s.revoked_at IS NULL AND k.revoked_at IS NULL
  AND s.expires_at > :now AND s.last_seen_at + s.idle_timeout > :now;

-- name: see_session
UPDATE tickwork_sessions SET last_seen_at = :now WHERE id = :id AND last_seen_at < :now;

-- name: sign_out
UPDATE tickwork_sessions SET revoked_at = :now
WHERE token_hash = :token_hash AND revoked_at IS NULL
RETURNING id;

-- name: set_tenant_limits
INSERT INTO tickwork_tenants (tenant, max_running, rate, burst, weight, updated_at)
VALUES (:tenant, :max_running, :rate, :burst, :weight, :now)
ON CONFLICT (tenant) DO UPDATE SET max_running = excluded.max_running,
    rate = excluded.rate, burst = excluded.burst, weight = excluded.weight,
    updated_at = excluded.updated_at
RETURNING *;

-- name: tenant_limits_for_update
SELECT * FROM tickwork_tenants WHERE tenant = :tenant;

-- name: delete_tenant_limits
DELETE FROM tickwork_tenants WHERE tenant = :tenant;

-- name: tenant_limits
SELECT * FROM tickwork_tenants WHERE tenant = :tenant;

-- name: tenant_statuses
-- Every tenant with a limits row or runs running or queued-and-due, with its counts and
-- its token bucket (tokens at refilled_at).
WITH counts AS (
    SELECT tenant, sum(state = 'running') AS running,
        sum(state <> 'running' AND run_at <= :now) AS due
    FROM tickwork_runs
    WHERE state IN ('running', 'queued', 'failed') AND (:tenant IS NULL OR tenant = :tenant)
    GROUP BY tenant
)
SELECT coalesce(t.tenant, c.tenant) AS tenant, t.max_running, t.rate, t.burst, t.tokens,
    t.refilled_at,
    coalesce(t.weight, 1) AS weight, coalesce(c.running, 0) AS running,
    coalesce(c.due, 0) AS due
FROM (SELECT * FROM tickwork_tenants WHERE :tenant IS NULL OR tenant = :tenant) t
FULL JOIN counts c ON c.tenant = t.tenant
WHERE t.tenant IS NOT NULL OR c.running > 0 OR c.due > 0
ORDER BY 1;

-- name: limited_tenants
-- The claim's limited path, under the write lock (BEGIN IMMEDIATE holds every claimer off):
-- every tenant with a max_running or a rate, and its token bucket.
SELECT tenant, max_running, rate, burst, tokens, refilled_at, 1 AS held
FROM tickwork_tenants WHERE max_running IS NOT NULL OR rate IS NOT NULL
ORDER BY tenant;

-- name: claimable_tenants
-- The first and last tenant with runs queued or failed: fair share applies when they differ.
SELECT (SELECT tenant FROM tickwork_runs INDEXED BY tickwork_runs_fair
        WHERE state IN ('queued', 'failed') ORDER BY tenant LIMIT 1) AS first,
       (SELECT tenant FROM tickwork_runs INDEXED BY tickwork_runs_fair
        WHERE state IN ('queued', 'failed') ORDER BY tenant DESC LIMIT 1) AS last;

-- name: walk_tenants
-- Fair share's walk: up to :tenants tenants with claimable runs, in name order from
-- :after round to it again (one probe of tickwork_runs_fair each), with their weights.
-- While runs of a task the claimer lacks wait (:others), a probe of tickwork_runs_fair
-- could read through that task's backlog in a tenant: each probe is then one of
-- tickwork_runs_task per task of :active (the claimer's tasks with waiting runs, a JSON
-- array), the least tenant of them.
WITH RECURSIVE onward (tenant, n) AS (
    SELECT CASE WHEN :others THEN
        (SELECT min((SELECT r.tenant FROM tickwork_runs r INDEXED BY tickwork_runs_task
                     WHERE r.task = a.value AND r.state IN ('queued', 'failed')
                       AND r.tenant > :after AND r.run_at <= :now
                       AND r.queue IN (SELECT value FROM json_each(:queues))  -- only-queues
                     ORDER BY r.tenant LIMIT 1))
         FROM json_each(:active) a)
    ELSE
        (SELECT tenant FROM tickwork_runs INDEXED BY tickwork_runs_fair
         WHERE state IN ('queued', 'failed') AND tenant > :after AND run_at <= :now
           AND queue IN (SELECT value FROM json_each(:queues))  -- only-queues
         ORDER BY tenant LIMIT 1)
    END, 1
    UNION ALL
    SELECT CASE WHEN :others THEN
        (SELECT min((SELECT r.tenant FROM tickwork_runs r INDEXED BY tickwork_runs_task
                     WHERE r.task = a.value AND r.state IN ('queued', 'failed')
                       AND r.tenant > w.tenant AND r.run_at <= :now
                       AND r.queue IN (SELECT value FROM json_each(:queues))  -- only-queues
                     ORDER BY r.tenant LIMIT 1))
         FROM json_each(:active) a)
    ELSE
        (SELECT r.tenant FROM tickwork_runs r INDEXED BY tickwork_runs_fair
         WHERE r.state IN ('queued', 'failed') AND r.tenant > w.tenant AND r.run_at <= :now
           AND r.queue IN (SELECT value FROM json_each(:queues))  -- only-queues
         ORDER BY r.tenant LIMIT 1)
    END, w.n + 1
    FROM onward w WHERE w.tenant IS NOT NULL AND w.n < :tenants
), around (tenant, n) AS (
    SELECT CASE WHEN :others THEN
        (SELECT min((SELECT r.tenant FROM tickwork_runs r INDEXED BY tickwork_runs_task
                     WHERE r.task = a.value AND r.state IN ('queued', 'failed')
                       AND r.tenant <= :after AND r.run_at <= :now
                       AND r.queue IN (SELECT value FROM json_each(:queues))  -- only-queues
                     ORDER BY r.tenant LIMIT 1))
         FROM json_each(:active) a)
    ELSE
        (SELECT tenant FROM tickwork_runs INDEXED BY tickwork_runs_fair
         WHERE state IN ('queued', 'failed') AND tenant <= :after AND run_at <= :now
           AND queue IN (SELECT value FROM json_each(:queues))  -- only-queues
         ORDER BY tenant LIMIT 1)
    END, (SELECT count(tenant) FROM onward) + 1
    UNION ALL
    SELECT CASE WHEN :others THEN
        (SELECT min((SELECT r.tenant FROM tickwork_runs r INDEXED BY tickwork_runs_task
                     WHERE r.task = a.value AND r.state IN ('queued', 'failed')
                       AND r.tenant > w.tenant AND r.tenant <= :after AND r.run_at <= :now
                       AND r.queue IN (SELECT value FROM json_each(:queues))  -- only-queues
                     ORDER BY r.tenant LIMIT 1))
         FROM json_each(:active) a)
    ELSE
        (SELECT r.tenant FROM tickwork_runs r INDEXED BY tickwork_runs_fair
         WHERE r.state IN ('queued', 'failed') AND r.tenant > w.tenant
           AND r.tenant <= :after AND r.run_at <= :now
           AND r.queue IN (SELECT value FROM json_each(:queues))  -- only-queues
         ORDER BY r.tenant LIMIT 1)
    END, w.n + 1
    FROM around w WHERE w.tenant IS NOT NULL AND w.n < :tenants
)
SELECT w.tenant, w.n, coalesce(t.weight, 1) AS weight
FROM (SELECT * FROM onward UNION ALL SELECT * FROM around) w
LEFT JOIN tickwork_tenants t ON t.tenant = w.tenant
WHERE w.tenant IS NOT NULL AND w.n <= :tenants
ORDER BY w.n;

-- name: others_waiting
-- Whether a run of a task not in :tasks (a JSON array) waits: the waiting runs' tasks in
-- name order, one probe of tickwork_runs_task each, up to the first not in :tasks (while
-- every waiting run is of one task the claimer has, two probes).
WITH RECURSIVE seen (task) AS (
    SELECT (SELECT task FROM tickwork_runs INDEXED BY tickwork_runs_task
            WHERE state IN ('queued', 'failed') ORDER BY task LIMIT 1)
    UNION ALL
    SELECT (SELECT r.task FROM tickwork_runs r INDEXED BY tickwork_runs_task
            WHERE r.state IN ('queued', 'failed') AND r.task > s.task ORDER BY r.task LIMIT 1)
    FROM seen s WHERE s.task IN (SELECT value FROM json_each(:tasks))
)
SELECT EXISTS (SELECT 1 FROM seen
               WHERE task IS NOT NULL AND task NOT IN (SELECT value FROM json_each(:tasks)))
    AS waiting;

-- name: active_tasks
-- Of :tasks (a JSON array), those with waiting runs (one probe each).
SELECT k.value AS task FROM json_each(:tasks) k
WHERE EXISTS (SELECT 1 FROM tickwork_runs r INDEXED BY tickwork_runs_task
              WHERE r.task = k.value AND r.state IN ('queued', 'failed'))
ORDER BY k.value;

-- name: running_of_tenants
-- :tenants is a JSON array.
SELECT tenant, count(*) AS n FROM tickwork_runs INDEXED BY tickwork_runs_lease
WHERE state = 'running' AND tenant IN (SELECT value FROM json_each(:tenants))
GROUP BY tenant;

-- name: limited_tasks
-- As limited_tenants, for tasks' limits: every task with one, and its token bucket.
SELECT task, max_running, rate, burst, tokens, refilled_at, 1 AS held
FROM tickwork_task_limits ORDER BY task;

-- name: running_of_tasks
-- :tasks is a JSON array.
SELECT task, count(*) AS n FROM tickwork_runs INDEXED BY tickwork_runs_lease
WHERE state = 'running' AND task IN (SELECT value FROM json_each(:tasks))
GROUP BY task;

-- name: claim_candidates
-- The limited path's candidates of one tenant (walk_tenants gave it), in claim order: its
-- first :limit due runs of :tasks without a limit (not in :full_tasks: a limited task's
-- runs are read apart, claim_candidates_of_task, up to its room); :queues, :tasks, :taken
-- and :full_tasks are JSON arrays. Only while no run of a task outside :tasks
-- waits (else claim_candidates_of_task, for each task of the claimer's apart).
SELECT id, tenant, task, priority, run_at FROM tickwork_runs INDEXED BY tickwork_runs_fair
WHERE tenant = :tenant
  -- include: claimable
  AND id NOT IN (SELECT value FROM json_each(:taken))
  AND task NOT IN (SELECT value FROM json_each(:full_tasks))
ORDER BY priority DESC, run_at, id LIMIT :limit;

-- name: claim_candidates_of_task
-- As claim_candidates, of one tenant's runs of one task (through tickwork_runs_task: no
-- other task's backlog is read), while runs of a task the claimer lacks wait.
SELECT id, tenant, task, priority, run_at FROM tickwork_runs INDEXED BY tickwork_runs_task
WHERE task = :task AND tenant = :tenant AND state IN ('queued', 'failed') AND run_at <= :now
  AND queue IN (SELECT value FROM json_each(:queues))  -- only-queues
  AND id NOT IN (SELECT value FROM json_each(:taken))
ORDER BY priority DESC, run_at, id LIMIT :limit;

-- name: take_tokens
-- The limited path, before it commits: a rate-limited tenant's token bucket, refilled and
-- spent (store/limits.py, refill).
UPDATE tickwork_tenants SET tokens = :tokens, refilled_at = :at WHERE tenant = :tenant;

-- name: take_task_tokens
-- As take_tokens, for a rate-limited task's bucket.
UPDATE tickwork_task_limits SET tokens = :tokens, refilled_at = :at WHERE task = :task;

-- name: claim_ids
-- :ids is a JSON array.
UPDATE tickwork_runs
SET state = 'running', worker = :worker, fencing_token = fencing_token + 1,
    lease_expires_at = :now + :lease, started_at = :now
WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING *;

-- name: set_task_limit
-- A task's limits as its code declares them; a row already so is left alone. The bucket's
-- tokens are kept (refill caps them at the new bucket), so a worker's start never refills
-- it; unsetting the rate forgets it (a rate set again starts with a full bucket).
INSERT INTO tickwork_task_limits (task, max_running, rate, burst, updated_at)
VALUES (:task, :max_running, :rate, :burst, :now)
ON CONFLICT (task) DO UPDATE SET max_running = excluded.max_running,
    rate = excluded.rate, burst = excluded.burst,
    tokens = CASE WHEN excluded.rate IS NULL THEN NULL ELSE tickwork_task_limits.tokens END,
    refilled_at = CASE WHEN excluded.rate IS NULL THEN NULL
                       ELSE tickwork_task_limits.refilled_at END,
    updated_at = excluded.updated_at
WHERE tickwork_task_limits.max_running IS NOT excluded.max_running
   OR tickwork_task_limits.rate IS NOT excluded.rate
   OR tickwork_task_limits.burst IS NOT excluded.burst;

-- name: clear_task_limit
DELETE FROM tickwork_task_limits WHERE task = :task;

-- name: task_limits
SELECT task, max_running, rate, burst FROM tickwork_task_limits ORDER BY task;

-- name: task_status
SELECT task, max_running, rate, burst, tokens, refilled_at FROM tickwork_task_limits
WHERE task = :task;

-- name: insert_calendar
INSERT INTO tickwork_calendars (name, definition, created_at, updated_at)
VALUES (:name, :definition, :now, :now)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: update_calendar
UPDATE tickwork_calendars SET definition = :definition, updated_at = :now
WHERE name = :name
RETURNING *;

-- name: get_calendar
SELECT * FROM tickwork_calendars WHERE name = :name;

-- name: list_calendars
SELECT * FROM tickwork_calendars ORDER BY name;

-- name: delete_calendar
DELETE FROM tickwork_calendars WHERE name = :name RETURNING name;

-- name: live_jobs_of_calendar
-- Active and paused jobs whose schedule names the calendar (the write lock orders us).
SELECT * FROM tickwork_jobs
WHERE json_extract(schedule, '$.calendar') = :name AND state IN ('active', 'paused')
ORDER BY id;

-- name: replan_job
UPDATE tickwork_jobs SET schedule = :schedule, next_run_at = :next_run_at, state = :state,
    updated_at = :now
WHERE id = :id;

-- name: calendar_for_share
SELECT * FROM tickwork_calendars WHERE name = :name;

-- name: calendar_for_update
SELECT * FROM tickwork_calendars WHERE name = :name;

-- name: live_jobs_of_calendar_ids
SELECT id FROM tickwork_jobs
WHERE json_extract(schedule, '$.calendar') = :name AND state IN ('active', 'paused')
ORDER BY id;
-- name: set_setting
INSERT INTO tickwork_settings (name, value, updated_at) VALUES (:name, :value, :now)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at;

-- name: delete_setting
DELETE FROM tickwork_settings WHERE name = :name;

-- name: get_setting
SELECT value, updated_at FROM tickwork_settings WHERE name = :name;

-- name: mark_injected
-- Each fault appended to its run's marks, with the attempt it hit; only while that attempt
-- holds the run.
UPDATE tickwork_runs
SET injected = json_insert(coalesce(injected, '[]'), '$[#]', json_object(
    'attempt', attempt, 'fault', m.value ->> '$[2]', 'worker', :worker,
    'by_run', m.value ->> '$[3]', 'at', :now))
FROM (
    SELECT json_array(i.value, t.value, f.value, b.value) AS value, i.value AS id,
        t.value AS token
    FROM json_each(:ids) AS i
    JOIN json_each(:tokens) AS t ON t.key = i.key
    JOIN json_each(:faults) AS f ON f.key = i.key
    JOIN json_each(:by_runs) AS b ON b.key = i.key
) AS m
WHERE tickwork_runs.id = m.id AND fencing_token = m.token AND state = 'running'
RETURNING tickwork_runs.id AS id;

-- name: injected_runs
-- Runs that executed again after an injected fault: a mark of an earlier attempt, and the
-- run claimed since (started_at is its latest claim's time).
SELECT * FROM tickwork_runs r
WHERE r.injected IS NOT NULL
  AND (:tenant IS NULL OR r.tenant = :tenant)
  AND (:after IS NULL OR r.id < :after)
  AND EXISTS (
    SELECT 1 FROM json_each(r.injected) AS m
    WHERE m.value ->> '$.attempt' < r.attempt AND m.value ->> '$.at' < r.started_at)
ORDER BY r.id DESC LIMIT :limit;
-- name: due_tasks
-- Each queue's due runs by task (the queues view says which no live worker can run).
SELECT queue, task, count(*) AS due, min(run_at) AS oldest FROM tickwork_runs
WHERE state IN ('queued', 'failed') AND run_at <= :now
  AND (:tenant IS NULL OR tenant = :tenant)
GROUP BY queue, task ORDER BY queue, task;

-- name: queue_stats
SELECT queue,
    sum(state IN ('queued', 'failed') AND run_at <= :now) AS due,
    sum(state = 'running') AS running,
    min(CASE WHEN state IN ('queued', 'failed') AND run_at <= :now THEN run_at END) AS oldest
FROM tickwork_runs
WHERE state IN ('queued', 'failed', 'running') AND (:tenant IS NULL OR tenant = :tenant)
GROUP BY queue ORDER BY queue;

-- name: rollup_mark
SELECT folded_to FROM tickwork_rollup WHERE name = 'runs';

-- name: set_rollup_mark
UPDATE tickwork_rollup SET folded_to = :to WHERE name = 'runs';

-- name: finished_between
-- Runs that finished in [:start, :to), for the fold (the finished index); `limited`: its
-- tenant or its task has a limit (its start lag may be time held back on purpose).
SELECT r.tenant, r.task, r.queue, r.state, r.finished_at, r.started_at, r.scheduled_for,
    r.attempt, r.manual,
    EXISTS (SELECT 1 FROM tickwork_tenants t WHERE t.tenant = r.tenant
            AND (t.max_running IS NOT NULL OR t.rate IS NOT NULL))
    OR EXISTS (SELECT 1 FROM tickwork_task_limits k WHERE k.task = r.task) AS limited
FROM tickwork_runs r INDEXED BY tickwork_runs_finished
WHERE r.state IN ('succeeded', 'dead', 'cancelled')
  AND r.finished_at >= :start AND r.finished_at < :to;

-- name: depth_by_queue
SELECT tenant, queue, count(*) AS n FROM tickwork_runs
WHERE state IN ('queued', 'failed') AND run_at <= :now
GROUP BY tenant, queue;

-- name: minute_lag
SELECT lag FROM tickwork_run_minutes
WHERE minute = :minute AND tenant = :tenant AND queue = :queue;

-- name: add_minute
-- Counts add up (the fail path adds to `failed` concurrently); `lag` is the histogram
-- already merged by the fold; `depth` is replaced by a new sample only.
INSERT INTO tickwork_run_minutes (minute, tenant, queue, succeeded, failed, dead, lag, depth)
VALUES (:minute, :tenant, :queue, :succeeded, :failed, :dead, :lag, coalesce(:depth, 0))
ON CONFLICT (minute, tenant, queue) DO UPDATE SET
    succeeded = succeeded + excluded.succeeded, failed = failed + excluded.failed,
    dead = dead + excluded.dead, lag = excluded.lag,
    depth = CASE WHEN :depth IS NULL THEN depth ELSE excluded.depth END;

-- name: prune_minutes
DELETE FROM tickwork_run_minutes WHERE minute < :cutoff;

-- name: count_failed
INSERT INTO tickwork_run_minutes (minute, tenant, queue, failed)
VALUES (:minute, :tenant, :queue, 1)
ON CONFLICT (minute, tenant, queue) DO UPDATE SET failed = failed + 1;

-- name: run_minutes
SELECT minute, succeeded, failed, dead, depth, lag FROM tickwork_run_minutes
WHERE minute >= :since AND (:tenant IS NULL OR tenant = :tenant)
  AND (:queue IS NULL OR queue = :queue)
ORDER BY minute;

-- Cumulative totals (/metrics): the fold, fail and prune add to them; nothing deletes them.

-- name: total_known
SELECT 1 AS found FROM tickwork_run_totals WHERE task = :task AND queue = :queue LIMIT 1;

-- name: total_pairs
SELECT count(*) AS n FROM (SELECT DISTINCT task, queue FROM tickwork_run_totals) AS p;

-- name: add_total
INSERT INTO tickwork_run_totals (task, queue, outcome, runs)
VALUES (:task, :queue, :outcome, :runs)
ON CONFLICT (task, queue, outcome) DO UPDATE SET runs = runs + excluded.runs;

-- name: histogram_known
SELECT 1 AS found FROM tickwork_run_histograms WHERE queue = :queue LIMIT 1;

-- name: histogram_queues
SELECT count(DISTINCT queue) AS n FROM tickwork_run_histograms;

-- name: add_histogram
INSERT INTO tickwork_run_histograms (name, queue, le, runs, seconds)
VALUES (:name, :queue, :le, :runs, :seconds)
ON CONFLICT (queue, name, le) DO UPDATE SET
    runs = runs + excluded.runs, seconds = seconds + excluded.seconds;

-- name: run_totals
SELECT task, queue, outcome, runs FROM tickwork_run_totals;

-- name: run_histograms
SELECT name, queue, le, runs, seconds FROM tickwork_run_histograms;
