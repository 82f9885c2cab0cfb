-- Named queries for the PostgreSQL store. Parameters are %(named)s; %(now)s is the
-- transaction's time, resolved once per call (coalesce(given, now())).
-- Arrays are sent as %(name)b (binary): psycopg writes the text form of a
-- timestamptz[] in Python, element by element, and the binary form costs a tenth of it
-- (benchmarks/README.md, "Figures behind the store's comments").

-- name: insert_job
INSERT INTO tickwork_jobs (tenant, name, task, args, schedule, state, next_run_at, queue,
    priority, max_attempts, backoff_base, backoff_cap, timeout, misfire, misfire_grace, overlap,
    idempotency_key, trace_context, created_at, updated_at)
VALUES (%(tenant)s, %(name)s, %(task)s, %(args)s, %(schedule)s, %(state)s, %(next_run_at)s,
    %(queue)s, %(priority)s, %(max_attempts)s, %(backoff_base)s, %(backoff_cap)s, %(timeout)s,
    %(misfire)s, %(misfire_grace)s, %(overlap)s, %(idempotency_key)s, %(trace_context)s, %(now)s, %(now)s)
ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING *;

-- name: submit_jobs
-- Bulk submit, one statement: each job's id is drawn first, so the run of a job due now
-- is inserted beside it; a job whose idempotency key is taken (before, or by an earlier
-- row of the batch) is not inserted and gets no run. One row per input row, in order:
-- the id drawn for it, whether it was inserted, and its run's id (NULL: none).
-- The batch comes as two JSON arrays of objects (absent members are NULL): templates,
-- the columns a group of jobs shares (a fan-out of one task is one), and per job its
-- template (tpl, its ix) and its own columns. Encoding them is one C call each in the client,
-- where a dozen array parameters of 1,000 values cost a Python call per value. Parsing a
-- few fields a job instead of nineteen typed ones takes a quarter of the time
-- (benchmarks/README.md, "Figures behind code comments").
WITH shared AS MATERIALIZED (
    SELECT * FROM json_to_recordset(%(templates)s::json)
        AS x (ix integer, tenant text, task text, schedule jsonb, state text,
            next_run_at timestamptz, queue text, priority integer, max_attempts integer,
            backoff_base float8, backoff_cap float8, timeout float8, misfire text,
            misfire_grace float8, overlap text, slot timestamptz)
), s AS MATERIALIZED (
    -- The ids are drawn in the batch's order: over the rows sorted by ord.
    SELECT nextval('tickwork_jobs_id_seq'::regclass) AS id, o.*
    FROM (
        SELECT u.ord, u.name, coalesce(u.args, '{}') AS args, u.idempotency_key,
            u.trace_context, x.tenant, x.task, x.schedule, x.state, x.next_run_at, x.queue,
            x.priority, x.max_attempts, x.backoff_base, x.backoff_cap, x.timeout, x.misfire,
            x.misfire_grace, x.overlap, x.slot
        FROM ROWS FROM (json_to_recordset(%(jobs)s::json)
            AS (tpl integer, name text, args jsonb, idempotency_key text, trace_context text))
            WITH ORDINALITY AS u (tpl, name, args, idempotency_key, trace_context, ord)
        JOIN shared x ON x.ix = u.tpl
        ORDER BY u.ord
    ) o
), j AS (
    INSERT INTO tickwork_jobs (id, tenant, name, task, args, schedule, state, next_run_at,
        queue, priority, max_attempts, backoff_base, backoff_cap, timeout, misfire,
        misfire_grace, overlap, idempotency_key, trace_context, created_at, updated_at)
    SELECT id, tenant, name, task, args, schedule, state, next_run_at, queue, priority,
        max_attempts, backoff_base, backoff_cap, timeout, misfire, misfire_grace, overlap,
        idempotency_key, trace_context, %(now)s, %(now)s
    FROM s ORDER BY ord
    ON CONFLICT (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id
), r AS (
    INSERT INTO tickwork_runs (job_id, tenant, task, args, queue, priority, max_attempts,
        backoff_base, backoff_cap, timeout, scheduled_for, run_at, state, created_at)
    SELECT s.id, s.tenant, s.task, s.args, s.queue, s.priority, s.max_attempts,
        s.backoff_base, s.backoff_cap, s.timeout, s.slot, s.slot, 'queued', %(now)s
    FROM s JOIN j ON j.id = s.id
    WHERE s.slot IS NOT NULL
    ORDER BY s.ord
    RETURNING id, job_id
)
SELECT s.id, j.id IS NOT NULL AS created, r.id AS run_id
FROM s LEFT JOIN j ON j.id = s.id LEFT JOIN r ON r.job_id = s.id
ORDER BY s.ord;

-- name: jobs_by_idempotency_keys
SELECT j.*, CASE WHEN j.state = 'completed' THEN (
        SELECT r.state FROM tickwork_runs r WHERE r.job_id = j.id
        ORDER BY r.scheduled_for DESC LIMIT 1) END AS run_state FROM tickwork_jobs j
JOIN unnest(%(tenants)s::text[], %(keys)s::text[]) AS k (tenant, key)
    ON j.tenant = k.tenant AND j.idempotency_key = k.key;

-- name: jobs_by_names
SELECT j.tenant, j.name FROM tickwork_jobs j
JOIN unnest(%(tenants)s::text[], %(names)s::text[]) AS k (tenant, name)
    ON j.tenant = k.tenant AND j.name = k.name;

-- name: job_by_idempotency_key
SELECT j.*, CASE WHEN j.state = 'completed' THEN (
        SELECT r.state FROM tickwork_runs r WHERE r.job_id = j.id
        ORDER BY r.scheduled_for DESC LIMIT 1) END AS run_state
FROM tickwork_jobs j WHERE j.tenant = %(tenant)s AND j.idempotency_key = %(key)s;

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
-- A job read carries run_state: its latest run's state once its schedule is completed (a
-- one-off job reads as that run: JobState.of in tickwork/job.py).
SELECT j.*, CASE WHEN j.state = 'completed' THEN (
        SELECT r.state FROM tickwork_runs r WHERE r.job_id = j.id
        ORDER BY r.scheduled_for DESC LIMIT 1) END AS run_state
FROM tickwork_jobs j
WHERE j.id = %(id)s AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s);

-- name: get_job_for_update
SELECT j.*, CASE WHEN j.state = 'completed' THEN (
        SELECT r.state FROM tickwork_runs r WHERE r.job_id = j.id
        ORDER BY r.scheduled_for DESC LIMIT 1) END AS run_state
FROM tickwork_jobs j
WHERE j.id = %(id)s AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s)
FOR UPDATE OF j;

-- name: list_jobs
-- %(state)s is the job's state as JobState.of derives it (tickwork/job.py), not the stored
-- one: a one-off job is 'scheduled' until triggered, then its latest run's state
-- ('finished' when no run is left); a recurring job with no slot left is 'finished'.
SELECT * FROM (
    SELECT j.*, CASE WHEN j.state = 'completed' THEN (
        SELECT r.state FROM tickwork_runs r WHERE r.job_id = j.id
        ORDER BY r.scheduled_for DESC LIMIT 1) END AS run_state
    FROM tickwork_jobs j
    WHERE (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s)
      AND (%(task)s::text IS NULL OR j.task = %(task)s)
      AND (%(search)s::text IS NULL
           OR strpos(lower(coalesce(j.name, '')), lower(%(search)s)) > 0
           OR strpos(lower(j.task), lower(%(search)s)) > 0)
      AND (%(after)s::bigint IS NULL OR j.id < %(after)s)
      AND (%(recurring)s::boolean IS NULL
           OR (j.schedule->>'kind' <> 'once') = %(recurring)s::boolean)
) AS j
WHERE %(state)s::text IS NULL OR %(state)s::text = CASE
    WHEN j.state = 'active' AND j.schedule->>'kind' = 'once' THEN 'scheduled'
    WHEN j.state = 'completed' AND j.schedule->>'kind' = 'once'
        THEN coalesce(j.run_state, 'finished')
    WHEN j.state = 'completed' THEN 'finished'
    ELSE j.state END
ORDER BY j.id DESC LIMIT %(limit)s;

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
  AND next_run_at <= coalesce(%(now)s::timestamptz, now()) + %(lead)s::interval
  AND (next_run_at <= coalesce(%(now)s::timestamptz, now()) OR schedule->>'kind' = 'once')
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
-- When the trigger next has work: the earliest job's next_run_at, less the lead for a
-- one-off (ONE_OFF_LEAD: due_jobs takes it that early). A one-off due a hair after an
-- earlier recurring job is then triggered with it, still before its time; of jobs due at
-- the same instant, a one-off comes first. With the store's clock: the trigger sleeps
-- from it.
SELECT (SELECT CASE WHEN schedule->>'kind' = 'once' THEN next_run_at - %(lead)s::interval
                    ELSE next_run_at END
        FROM tickwork_jobs WHERE state = 'active' AND next_run_at IS NOT NULL
        ORDER BY next_run_at, schedule->>'kind' = 'once' DESC LIMIT 1) AS at,
    coalesce(%(now)s::timestamptz, clock_timestamp()) AS now;

-- name: claimable
-- The claim's eligibility predicate, written once: a run (tickwork_runs as r) a claim may
-- take waits (queued, or failed and waiting for its retry), is due by the claim's clock,
-- is in a queue the claimer takes and of a task it has. claim, complete_then_claim and
-- claim_limited include it (a line "-- include: claimable", store/queries.py); the
-- "-- only-queues" and "-- only-tasks" lines are dropped as in any query. A claim's other
-- conditions (limits, fair share, the gate) are its own.
AND r.state IN ('queued', 'failed') AND r.run_at <= coalesce(%(now)s::timestamptz, now())
AND r.queue = ANY(%(queues)s::text[])  -- only-queues
AND r.task = ANY(%(tasks)s::text[])  -- only-tasks

-- name: complete_then_claim
-- A busy worker's one statement per batch: complete what it finished (as complete_ids),
-- then claim (as claim); one round trip, one commit. The two updates cannot meet: one takes
-- running runs, the other queued or failed ones. The claimed runs come back lean (the
-- columns of ClaimedRun, in claim order); at least one row comes back: with no run claimed,
-- one row of NULLs carrying the count of completions applied. A line ending
-- "-- only-queues" is dropped for a worker that takes every queue (see for_queues).
-- With any tenant or task limited, or runs of more than one tenant claimable (fair share),
-- it claims nothing (the limited path claims, in a transaction: hold_limits, claim_limited)
-- and "limited" says so. Both read one materialized check, the gate (tickwork_claim_gate,
-- migration 0018: two empty tables and the two ends of tickwork_runs_fair); the gate is
-- pseudo-constant, a one-time filter that leaves the planner's estimate, and so its plan
-- (the claim index read in order, stopping at the limit), as it was without it. A
-- function, not a CTE: this statement is planned on every call, and the gate's recursive
-- walk was a third of its planning; the function's plan is kept for the session.
-- Tasks: only runs of tasks (NULL: the claimer has every task; "-- only-tasks" lines
-- are dropped then, as "-- only-queues" ones for every queue). The gate also walks the
-- waiting runs' tasks in name order, one probe of tickwork_runs_task each, up to the
-- first not in tasks ("others": while every waiting run is of one task, two probes).
-- While none waits, the claim index is read as above. While some do, a backlog of theirs
-- could lie ahead in that index: it claims nothing and "others" says so, and
-- complete_then_claim_own claims instead (reading each of the claimer's tasks apart).
-- So the claimable predicate's "-- only-tasks" line is dropped here (and in claim): in
-- this statement's snapshot every waiting run is of the claimer's tasks, or the gate
-- claims nothing, and a run's task never changes. With it, a planner whose statistics lag
-- a drain (estimating one waiting run) read tickwork_runs_task, which matches the line,
-- and sorted every waiting run: half the drain (benchmarks/README.md).
WITH limits AS MATERIALIZED (
    SELECT g.limited AS set, g.tenant, g.others FROM tickwork_claim_gate(%(tasks)s::text[]) g
), done AS (
    UPDATE tickwork_runs r
    SET state = 'succeeded', finished_at = coalesce(%(now)s::timestamptz, now()), lease_expires_at = NULL,
        result = c.result, error = NULL
    FROM unnest(%(ids)b::bigint[], %(tokens)b::bigint[], %(results)b::jsonb[])
        AS c (id, token, result)
    WHERE r.id = c.id AND r.fencing_token = c.token AND r.state = 'running'
    RETURNING r.id
), picked AS (
    SELECT id FROM (
        SELECT r.id FROM tickwork_runs r
        WHERE NOT (SELECT set OR others FROM limits)
          -- include: claimable
        ORDER BY r.priority DESC, r.run_at, r.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) every
), claimed AS (
    UPDATE tickwork_runs r
    SET state = 'running', worker = %(worker)s, fencing_token = r.fencing_token + 1,
        lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
        started_at = coalesce(%(now)s::timestamptz, now())
    FROM picked WHERE r.id = picked.id
    RETURNING r.id, r.fencing_token, r.job_id, r.tenant, r.task, r.args, r.scheduled_for,
        r.attempt, r.max_attempts, make_interval(secs => r.timeout) AS timeout,
        r.queue, r.priority, r.run_at
)
SELECT d.completed,
    (SELECT set FROM limits) AS limited, (SELECT others FROM limits) AS others,
    c.id, c.fencing_token, c.job_id, c.tenant, c.task, c.args,
    c.scheduled_for, c.attempt, c.max_attempts, c.timeout, c.queue
FROM (SELECT count(*) AS completed FROM done) d
LEFT JOIN claimed c ON true
ORDER BY c.priority DESC, c.run_at, c.id;

-- name: complete_then_claim_own
-- complete_then_claim while runs of a task not in tasks wait ("others"): the same
-- completions and gate, and the claim reads each task of tasks with waiting runs
-- ("active", a probe each) apart through tickwork_runs_task, in claim order, its first
-- %(limit)s locked; the batch is the first %(limit)s of those (the rest, locked by this
-- statement, are free again at its commit). So a backlog of the other task's runs, however
-- far ahead in the claim index, is never read. A statement of its own, not a branch of
-- complete_then_claim: that one is planned on every call, and this branch doubled its
-- planning time. Comes back as complete_then_claim, with "others" (false: the next call
-- may take complete_then_claim again).
WITH limits AS MATERIALIZED (
    SELECT g.limited AS set, g.tenant, g.others FROM tickwork_claim_gate(%(tasks)s::text[]) g
), active AS MATERIALIZED (
    SELECT k.task FROM unnest(%(tasks)s::text[]) AS k (task)
    WHERE NOT (SELECT set FROM limits)
      AND (SELECT min(r.task) FROM tickwork_runs r
           WHERE r.state IN ('queued', 'failed') AND r.task >= k.task) = k.task
), done AS (
    UPDATE tickwork_runs r
    SET state = 'succeeded', finished_at = coalesce(%(now)s::timestamptz, now()), lease_expires_at = NULL,
        result = c.result, error = NULL
    FROM unnest(%(ids)b::bigint[], %(tokens)b::bigint[], %(results)b::jsonb[])
        AS c (id, token, result)
    WHERE r.id = c.id AND r.fencing_token = c.token AND r.state = 'running'
    RETURNING r.id
), picked AS (
    SELECT o.id FROM active a CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM tickwork_runs r
        WHERE r.task = a.task AND r.tenant = (SELECT tenant FROM limits)
          AND r.state IN ('queued', 'failed')
          AND r.run_at <= coalesce(%(now)s::timestamptz, now())
          AND r.queue = ANY(%(queues)s::text[])  -- only-queues
        ORDER BY r.priority DESC, r.run_at, r.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) o
    ORDER BY o.priority DESC, o.run_at, o.id
    LIMIT %(limit)s
), claimed AS (
    UPDATE tickwork_runs r
    SET state = 'running', worker = %(worker)s, fencing_token = r.fencing_token + 1,
        lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
        started_at = coalesce(%(now)s::timestamptz, now())
    FROM picked WHERE r.id = picked.id
    RETURNING r.id, r.fencing_token, r.job_id, r.tenant, r.task, r.args, r.scheduled_for,
        r.attempt, r.max_attempts, make_interval(secs => r.timeout) AS timeout,
        r.queue, r.priority, r.run_at
)
SELECT d.completed,
    (SELECT set FROM limits) AS limited, (SELECT others FROM limits) AS others,
    c.id, c.fencing_token, c.job_id, c.tenant, c.task, c.args,
    c.scheduled_for, c.attempt, c.max_attempts, c.timeout, c.queue
FROM (SELECT count(*) AS completed FROM done) d
LEFT JOIN claimed c ON true
ORDER BY c.priority DESC, c.run_at, c.id;


-- name: claim
-- The one-statement claim, only while no tenant or task is limited and one tenant's runs
-- are claimable (the gate of complete_then_claim, and its reading of the tasks given);
-- "limited" on each row says whether the limited path must claim instead. At least one
-- row comes back: with no run claimed, one row of NULLs carrying "limited" (so an idle
-- worker's poll is one statement, not two). A line ending "-- only-queues" is dropped for
-- a worker that takes every queue, "-- only-tasks" for one that has every task.
WITH limits AS MATERIALIZED (
    SELECT g.limited AS set, g.tenant, g.others FROM tickwork_claim_gate(%(tasks)s::text[]) g
), picked AS (
    SELECT id FROM (
        SELECT r.id FROM tickwork_runs r
        WHERE NOT (SELECT set OR others FROM limits)
          -- include: claimable
        ORDER BY r.priority DESC, r.run_at, r.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) every
), claimed AS (
    UPDATE tickwork_runs r
    SET state = 'running', worker = %(worker)s, fencing_token = r.fencing_token + 1,
        lease_expires_at = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval,
        started_at = coalesce(%(now)s::timestamptz, now())
    FROM picked WHERE r.id = picked.id
    RETURNING r.*
)
SELECT c.*, (SELECT set FROM limits) AS limited, (SELECT others FROM limits) AS others
FROM (SELECT 1) one
LEFT JOIN claimed c ON true;

-- name: next_claimable_at
-- With tasks, through tickwork_runs_task: this claimer's own waiting runs, not a backlog of
-- another task's (whose runs, due long ago, would wake it for nothing).
SELECT min(run_at) AS at FROM tickwork_runs
WHERE state IN ('queued', 'failed')
  AND task = ANY(%(tasks)s::text[])  -- only-tasks
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
-- statement_timestamp(), not now(): in a handler's ctx.transaction() the completion is
-- the block's last statement, and now() (its transaction's start) would date the finish
-- before the block's work, past the fold's settling time for a long block.
UPDATE tickwork_runs r
SET state = 'succeeded', finished_at = coalesce(%(now)s::timestamptz, statement_timestamp()),
    lease_expires_at = NULL, result = c.result, error = NULL
FROM unnest(%(ids)b::bigint[], %(tokens)b::bigint[], %(results)b::jsonb[])
    AS c (id, token, result)
WHERE r.id = c.id AND r.fencing_token = c.token AND r.state = 'running'
RETURNING r.id;

-- name: held_run_for_fail
-- With what the totals count of a failed attempt (`limited` as in finished_between).
SELECT r.attempt, r.max_attempts, r.backoff_base, r.backoff_cap, r.tenant, r.task, r.queue,
    r.started_at, r.scheduled_for, r.manual,
    EXISTS (SELECT 1 FROM tickwork_tenants t WHERE t.tenant = r.tenant
            AND (t.max_running IS NOT NULL OR t.rate IS NOT NULL))
    OR EXISTS (SELECT 1 FROM tickwork_task_limits k WHERE k.task = r.task) AS limited
FROM tickwork_runs r
WHERE r.id = %(id)s AND r.fencing_token = %(token)s AND r.state = 'running'
FOR UPDATE OF r;

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

-- name: end_rescued_attempts
-- The rescue's first step: the runs whose lease expired (running, lease_expires_at < now),
-- earliest first, at most the limit, locked (SKIP LOCKED: concurrent rescuers never take
-- one twice); each one's attempt ends in its history, lease_lost (injected_fault when a
-- fault was marked since its claim: the worker crashed or stalled on purpose). Marks'
-- times are epoch microseconds.
INSERT INTO tickwork_attempts (run_id, n, attempt, fencing_token, worker, started_at,
    ended_at, ended, error, traceback)
SELECT e.id, coalesce((SELECT max(a.n) FROM tickwork_attempts a WHERE a.run_id = e.id), 0) + 1,
    e.attempt, e.fencing_token, e.worker, e.started_at, coalesce(%(now)s::timestamptz, now()),
    CASE WHEN e.fault IS NULL THEN 'lease_lost' ELSE 'injected_fault' END,
    CASE WHEN e.fault IS NULL THEN '' ELSE 'injected fault: ' || e.fault || '; ' END
        || 'lease expired: worker ' || coalesce(e.worker, '?') || ' stopped heartbeating',
    NULL
FROM (
    SELECT r.id, r.attempt, r.fencing_token, r.worker, r.started_at,
        (SELECT m.mark ->> 'fault' FROM jsonb_array_elements(r.injected) AS m (mark)
         WHERE (m.mark ->> 'attempt')::integer = r.attempt
           AND (m.mark ->> 'at')::bigint >= (extract(epoch FROM r.started_at) * 1000000)::bigint
         LIMIT 1) AS fault
    FROM tickwork_runs r
    WHERE r.state = 'running' AND r.lease_expires_at < coalesce(%(now)s::timestamptz, now())
    ORDER BY r.lease_expires_at LIMIT %(limit)s
    FOR UPDATE OF r SKIP LOCKED
) AS e
RETURNING run_id, n;

-- name: rescue
-- The runs end_rescued_attempts took and holds locked (the ids) -> queued with
-- attempt + 1, or dead on their last attempt.
UPDATE tickwork_runs r
SET state = CASE WHEN r.attempt >= r.max_attempts THEN 'dead' ELSE 'queued' END,
    attempt = CASE WHEN r.attempt >= r.max_attempts THEN r.attempt ELSE r.attempt + 1 END,
    finished_at = CASE WHEN r.attempt >= r.max_attempts
                       THEN coalesce(%(now)s::timestamptz, now()) END,
    run_at = coalesce(%(now)s::timestamptz, now()), lease_expires_at = NULL,
    error = 'lease expired: worker ' || coalesce(r.worker, '?') || ' stopped heartbeating'
WHERE r.id = ANY(%(ids)b::bigint[]) AND r.state = 'running'
RETURNING r.id, r.state;

-- name: end_attempt
-- The attempt that holds the run under the token ends (fail, release, cancel_run): its row
-- in the history, `n` one past the run's last, the run's row locked. One a fault was
-- injected into (a mark since its claim) ends injected_fault, unless it was cancelled. No
-- row when the run is not running under the token: the caller raises LeaseLost.
INSERT INTO tickwork_attempts (run_id, n, attempt, fencing_token, worker, started_at,
    ended_at, ended, error, traceback)
SELECT r.id, coalesce((SELECT max(a.n) FROM tickwork_attempts a WHERE a.run_id = r.id), 0) + 1,
    r.attempt, r.fencing_token, r.worker, r.started_at, coalesce(%(now)s::timestamptz, now()),
    CASE WHEN %(ended)s::text <> 'cancelled' AND r.injected IS NOT NULL AND EXISTS (
            SELECT 1 FROM jsonb_array_elements(r.injected) AS m (mark)
            WHERE (m.mark ->> 'attempt')::integer = r.attempt
              AND (m.mark ->> 'at')::bigint
                  >= (extract(epoch FROM r.started_at) * 1000000)::bigint)
         THEN 'injected_fault' ELSE %(ended)s::text END,
    %(error)s, %(traceback)s
FROM tickwork_runs r
WHERE r.id = %(id)s AND r.fencing_token = %(token)s AND r.state = 'running'
FOR UPDATE OF r
RETURNING run_id, n;

-- name: end_replaced_attempts
-- Overlap 'replace' cancels the running runs of the jobs (ids) too: their attempts end
-- cancelled, the runs locked, before cancel_unfinished_runs_of_jobs moves them (a run
-- that completed meanwhile is no longer running when the lock is had, and is left).
INSERT INTO tickwork_attempts (run_id, n, attempt, fencing_token, worker, started_at,
    ended_at, ended, error, traceback)
SELECT r.id, coalesce((SELECT max(a.n) FROM tickwork_attempts a WHERE a.run_id = r.id), 0) + 1,
    r.attempt, r.fencing_token, r.worker, r.started_at, %(now)s, 'cancelled', %(reason)s, NULL
FROM tickwork_runs r
WHERE r.job_id = ANY(%(ids)b::bigint[]) AND r.state = 'running'
FOR UPDATE OF r
RETURNING run_id, n;

-- name: trim_attempts
-- A run's history keeps its last ATTEMPTS_KEPT ended attempts: the older ones go.
DELETE FROM tickwork_attempts WHERE run_id = %(id)s AND n <= %(through)s;

-- name: run_attempts
SELECT * FROM tickwork_attempts WHERE run_id = %(id)s ORDER BY n;

-- name: get_run
SELECT * FROM tickwork_runs
WHERE id = %(id)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s);

-- name: runs_by_ids
SELECT * FROM tickwork_runs WHERE id = ANY(%(ids)s::bigint[]);

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
  AND (%(error)s::text IS NULL OR strpos(lower(error), %(error)s) > 0)
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
      AND (%(error)s::text IS NULL OR strpos(lower(error), %(error)s) > 0)
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
      AND (%(error)s::text IS NULL OR strpos(lower(error), %(error)s) > 0)
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
    LIMIT %(limit)s)
RETURNING id;

-- name: prune_attempts
-- The histories of the runs prune_runs deleted (the ids), in its transaction.
DELETE FROM tickwork_attempts WHERE run_id = ANY(%(ids)b::bigint[]);

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
    previous_expires_at = CASE
        WHEN holder = %(node)s AND expires_at > coalesce(%(now)s::timestamptz, now())
        THEN previous_expires_at ELSE expires_at END,
    holder = %(node)s,
    expires_at = coalesce(%(now)s::timestamptz, now()) + %(ttl)s::interval
WHERE name = 'scheduler'
  AND (expires_at <= coalesce(%(now)s::timestamptz, now()) OR holder = %(node)s)
RETURNING holder, epoch, expires_at;

-- name: begin_leader_term
INSERT INTO tickwork_leader_terms (epoch, holder, started_at)
VALUES (%(epoch)s, %(node)s, coalesce(%(now)s::timestamptz, now()))
ON CONFLICT (epoch) DO NOTHING;

-- name: end_leader_term
UPDATE tickwork_leader_terms
SET ended_at = (SELECT previous_expires_at FROM tickwork_leases WHERE name = 'scheduler')
WHERE epoch = %(epoch)s - 1 AND ended_at IS NULL;

-- name: leader_terms
SELECT t.epoch, t.holder, t.started_at,
    coalesce(t.ended_at, CASE WHEN l.epoch = t.epoch
        AND l.expires_at <= coalesce(%(now)s::timestamptz, now()) THEN l.expires_at END)
        AS ended_at
FROM tickwork_leader_terms t JOIN tickwork_leases l ON l.name = 'scheduler'
WHERE t.started_at <= %(until)s
  AND t.epoch >= coalesce((SELECT max(epoch) FROM tickwork_leader_terms
                           WHERE started_at <= %(since)s), 0)
ORDER BY t.epoch;

-- name: prune_leader_terms
DELETE FROM tickwork_leader_terms
WHERE ended_at < %(cutoff)s
  AND epoch <= (SELECT max(epoch) FROM tickwork_leader_terms) - %(keep)s;

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
-- With, apart, the due runs of a tenant or task that has a limit (a limit may hold them
-- back on purpose: their wait is not lag) and the oldest of the others.
SELECT count(*) AS n, min(run_at) AS oldest, coalesce(sum(limited::int), 0) AS limited_n,
    min(CASE WHEN NOT limited THEN run_at END) AS open_oldest
FROM (
    SELECT run_at,
        tenant IN (SELECT tenant FROM tickwork_tenants
                   WHERE max_running IS NOT NULL OR rate IS NOT NULL)
        OR task IN (SELECT task FROM tickwork_task_limits) AS limited
    FROM tickwork_runs
    WHERE state IN ('queued', 'failed') AND run_at <= %(now)s
      AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
) due;

-- name: recent_lag
-- The newest runs by id (no index on started_at: it would take an entry on every claim).
-- Runs of a tenant or task that has a limit are left out, as in due_backlog: a limit may
-- hold them back on purpose, and their wait is not lag.
SELECT extract(epoch FROM started_at - scheduled_for) * 1000.0 AS lag_ms FROM tickwork_runs
WHERE attempt = 1 AND started_at IS NOT NULL AND NOT manual
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
  AND tenant NOT IN (SELECT tenant FROM tickwork_tenants
                     WHERE max_running IS NOT NULL OR rate IS NOT NULL)
  AND task NOT IN (SELECT task FROM tickwork_task_limits)
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

-- name: get_node
SELECT * FROM tickwork_nodes WHERE id = %(id)s;

-- name: forget_node
-- A dead node's row, only if it has not beaten since it was read (last_seen_at unchanged).
DELETE FROM tickwork_nodes WHERE id = %(id)s AND last_seen_at = %(seen)s;

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
INSERT INTO tickwork_tenants (tenant, max_running, rate, burst, weight, updated_at)
VALUES (%(tenant)s, %(max_running)s, %(rate)s, %(burst)s, %(weight)s, %(now)s)
ON CONFLICT (tenant) DO UPDATE SET max_running = excluded.max_running,
    rate = excluded.rate, burst = excluded.burst, weight = excluded.weight,
    updated_at = excluded.updated_at
RETURNING *;

-- name: tenant_limits_for_update
SELECT * FROM tickwork_tenants WHERE tenant = %(tenant)s FOR UPDATE;

-- name: delete_tenant_limits
DELETE FROM tickwork_tenants WHERE tenant = %(tenant)s;

-- name: tenant_limits
SELECT * FROM tickwork_tenants WHERE tenant = %(tenant)s;

-- name: tenant_statuses
-- Every tenant with a limits row or runs running or queued-and-due, with its counts and
-- its token bucket (tokens at refilled_at).
WITH counts AS (
    SELECT tenant, count(*) FILTER (WHERE state = 'running') AS running,
        count(*) FILTER (WHERE state <> 'running' AND run_at <= %(now)s) AS due
    FROM tickwork_runs
    WHERE state IN ('running', 'queued', 'failed')
      AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
    GROUP BY tenant
)
SELECT coalesce(t.tenant, c.tenant) AS tenant, t.max_running, t.rate, t.burst, t.tokens,
    t.refilled_at,
    coalesce(t.weight, 1) AS weight, coalesce(c.running, 0) AS running,
    coalesce(c.due, 0) AS due
FROM (SELECT * FROM tickwork_tenants
      WHERE %(tenant)s::text IS NULL OR tenant = %(tenant)s) t
FULL JOIN counts c ON c.tenant = t.tenant
WHERE t.tenant IS NOT NULL OR c.running > 0 OR c.due > 0
ORDER BY 1;

-- name: hold_limits
-- The limited claim's first statement (then claim_limited, in one transaction, sent in one
-- round trip). Fair share's walk (store/limits.py): the tenants with claimable runs (a
-- tenant's runs not yet due or in other queues are stepped over in the index), in name
-- order from %(after)s round to it again, one probe of tickwork_runs_fair each (past a
-- tenant's whole backlog at once), %(limit)s of them at most. Then lock those of them with
-- a limit, and every task of tasks with one, that no other claimer holds (SKIP LOCKED:
-- one that is held is left out of this claim), and name the walk and the held in the
-- transaction's settings. A held row stays locked until commit, so no other claimer
-- counts, refills or claims that tenant or task at once, and claim_limited, a later
-- statement, sees what every earlier holder committed. Costs a probe and a lock per tenant
-- walked, however many tenants have runs or limits. JIT off for the transaction:
-- claim_limited's estimates can pass jit_above_cost, and compiling would cost 300 ms.
-- Tasks: while runs of a task not in tasks wait ("others": the gate of
-- complete_then_claim), a probe of tickwork_runs_fair could read through that task's whole
-- backlog in a tenant; the walk then probes tickwork_runs_task once per task of tasks
-- with waiting runs ("active", found once), and claim_limited reads those tasks apart.
-- Those probes bound (task, tenant) with row comparisons and order by (task, tenant): only
-- tickwork_runs_task serves them, so the planner (which cannot know, for a task from a
-- list, how few of its runs there are) never reads tickwork_runs_fair with a filter on the
-- task instead, through the other task's backlog.
WITH RECURSIVE gate AS MATERIALIZED (
    SELECT others FROM tickwork_claim_gate(%(tasks)s::text[])
), active AS MATERIALIZED (
    -- One probe per task, as min(task) from it (an EXISTS ... task = k.task could be
    -- planned as a scan that reads the other tasks' runs on the way).
    SELECT k.task FROM unnest(%(tasks)s::text[]) AS k (task)
    WHERE (SELECT others FROM gate)
      AND (SELECT min(r.task) FROM tickwork_runs r
           WHERE r.state IN ('queued', 'failed') AND r.task >= k.task) = k.task
), onward (tenant, n) AS (
    SELECT CASE WHEN (SELECT others FROM gate) THEN
        (SELECT min(x.tenant) FROM active a CROSS JOIN LATERAL (
            SELECT r.tenant FROM tickwork_runs r
            WHERE (r.task, r.tenant) > (a.task, %(after)s) AND r.task <= a.task
              AND r.state IN ('queued', 'failed')
              AND r.run_at <= coalesce(%(now)s::timestamptz, now())
              AND r.queue = ANY(%(queues)s::text[])  -- only-queues
            ORDER BY r.task, r.tenant LIMIT 1
        ) x)
    ELSE
        (SELECT min(tenant) FROM tickwork_runs
         WHERE state IN ('queued', 'failed') AND tenant > %(after)s
           AND run_at <= coalesce(%(now)s::timestamptz, now())
           AND queue = ANY(%(queues)s::text[])  -- only-queues
        )
    END, 1
    UNION ALL
    SELECT CASE WHEN (SELECT others FROM gate) THEN
        (SELECT min(x.tenant) FROM active a CROSS JOIN LATERAL (
            SELECT r.tenant FROM tickwork_runs r
            WHERE (r.task, r.tenant) > (a.task, w.tenant) AND r.task <= a.task
              AND r.state IN ('queued', 'failed')
              AND r.run_at <= coalesce(%(now)s::timestamptz, now())
              AND r.queue = ANY(%(queues)s::text[])  -- only-queues
            ORDER BY r.task, r.tenant LIMIT 1
        ) x)
    ELSE
        (SELECT min(r.tenant) FROM tickwork_runs r
         WHERE r.state IN ('queued', 'failed') AND r.tenant > w.tenant
           AND r.run_at <= coalesce(%(now)s::timestamptz, now())
           AND r.queue = ANY(%(queues)s::text[])  -- only-queues
        )
    END, w.n + 1
    FROM onward w WHERE w.tenant IS NOT NULL AND w.n < %(limit)s
), around (tenant, n) AS (
    SELECT CASE WHEN (SELECT others FROM gate) THEN
        (SELECT min(x.tenant) FROM active a CROSS JOIN LATERAL (
            SELECT r.tenant FROM tickwork_runs r
            WHERE r.task >= a.task AND (r.task, r.tenant) <= (a.task, %(after)s)
              AND r.state IN ('queued', 'failed')
              AND r.run_at <= coalesce(%(now)s::timestamptz, now())
              AND r.queue = ANY(%(queues)s::text[])  -- only-queues
            ORDER BY r.task, r.tenant LIMIT 1
        ) x)
    ELSE
        (SELECT min(tenant) FROM tickwork_runs
         WHERE state IN ('queued', 'failed') AND tenant <= %(after)s
           AND run_at <= coalesce(%(now)s::timestamptz, now())
           AND queue = ANY(%(queues)s::text[])  -- only-queues
        )
    END, (SELECT count(tenant) FROM onward) + 1
    UNION ALL
    SELECT CASE WHEN (SELECT others FROM gate) THEN
        (SELECT min(x.tenant) FROM active a CROSS JOIN LATERAL (
            SELECT r.tenant FROM tickwork_runs r
            WHERE (r.task, r.tenant) > (a.task, w.tenant)
              AND (r.task, r.tenant) <= (a.task, %(after)s)
              AND r.state IN ('queued', 'failed')
              AND r.run_at <= coalesce(%(now)s::timestamptz, now())
              AND r.queue = ANY(%(queues)s::text[])  -- only-queues
            ORDER BY r.task, r.tenant LIMIT 1
        ) x)
    ELSE
        (SELECT min(r.tenant) FROM tickwork_runs r
         WHERE r.state IN ('queued', 'failed') AND r.tenant > w.tenant
           AND r.tenant <= %(after)s
           AND r.run_at <= coalesce(%(now)s::timestamptz, now())
           AND r.queue = ANY(%(queues)s::text[])  -- only-queues
        )
    END, w.n + 1
    FROM around w WHERE w.tenant IS NOT NULL AND w.n < %(limit)s
), walk AS MATERIALIZED (
    SELECT tenant, n FROM (SELECT * FROM onward UNION ALL SELECT * FROM around) w
    WHERE tenant IS NOT NULL AND n <= %(limit)s
), held AS MATERIALIZED (
    SELECT tenant FROM tickwork_tenants
    WHERE tenant IN (SELECT tenant FROM walk) AND (max_running IS NOT NULL OR rate IS NOT NULL)
    ORDER BY tenant
    FOR UPDATE SKIP LOCKED
), held_tasks AS MATERIALIZED (
    SELECT task FROM tickwork_task_limits
    WHERE task = ANY(%(tasks)s::text[])  -- only-tasks
    ORDER BY task FOR UPDATE SKIP LOCKED
)
SELECT set_config('jit', 'off', true),
    set_config('tickwork.walk',
               (SELECT coalesce(array_agg(tenant ORDER BY n), '{}')::text FROM walk), true),
    set_config('tickwork.held_tenants',
               (SELECT coalesce(array_agg(tenant), '{}')::text FROM held), true),
    set_config('tickwork.held_tasks',
               (SELECT coalesce(array_agg(task), '{}')::text FROM held_tasks), true),
    set_config('tickwork.others', (SELECT others::text FROM gate), true),
    set_config('tickwork.active',
               (SELECT coalesce(array_agg(task), '{}')::text FROM active), true);

-- name: claim_limited
-- The claim while a limit exists or several tenants' runs are claimable, after
-- hold_limits, in its transaction: one statement.
-- 1. Room: each held limited tenant of the walk may start its max_running less its
--    running runs, and no more than the whole tokens in its bucket, refilled to now (as
--    store/limits.py's refill; the conformance tests hold both to the same figures); a
--    held task, its max_running less its running runs; a limited tenant or task not held,
--    none. A held task with a rate: no more than the whole tokens in its bucket too.
-- 2. Fair share (store/limits.py, claim_fairly: the oracle it is tested against): of
--    each tenant of the walk with room, lock its first k runs in claim order (k: twice its
--    weighted share of the batch, once when %(limit)s tenants have room, at most its room:
--    limits.share), of unlimited tasks and of each limited task with room, no more than
--    that room of each; keep those within their task's room, in order of rank / weight,
--    then walk position; claim %(limit)s of them. A tenant's k at most its room, so the
--    task's room is the one that can bind there.
-- 3. Spend a token of each claimed run's rate-limited tenant, and of its rate-limited task.
-- Tasks: only runs of tasks (NULL: every task). While runs of another task wait
-- (tickwork.others, from hold_limits), each tenant's runs of each task of tasks with
-- waiting runs (tickwork.active) are read apart through tickwork_runs_task, each up to the
-- tenant's share, so that no other task's backlog is read; then merged as one tenant's.
-- Comes back: one row per claimed run in claim order, lean (with its tenant's position in
-- the walk, then the columns of ClaimedRun), or one row of NULLs; each carries how many
-- tenants the walk saw, the last of them, and whether any limit exists.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
), others AS MATERIALIZED (
    SELECT coalesce(current_setting('tickwork.others', true)::boolean, false) AS waiting
), active AS MATERIALIZED (
    SELECT unnest(current_setting('tickwork.active', true)::text[]) AS task
), walk AS MATERIALIZED (
    SELECT w.tenant, w.n FROM unnest(current_setting('tickwork.walk', true)::text[])
        WITH ORDINALITY AS w (tenant, n)
), held AS MATERIALIZED (
    SELECT unnest(current_setting('tickwork.held_tenants', true)::text[]) AS tenant
), held_tasks AS MATERIALIZED (
    SELECT unnest(current_setting('tickwork.held_tasks', true)::text[]) AS task
), limited AS MATERIALIZED (
    SELECT t.tenant, t.max_running, t.rate, t.tokens, t.refilled_at,
        coalesce(t.burst, greatest(1, ceil(t.rate)))::float8 AS bucket,
        h.tenant IS NOT NULL AS held
    FROM walk w JOIN tickwork_tenants t ON t.tenant = w.tenant
    LEFT JOIN held h ON h.tenant = t.tenant
    WHERE t.max_running IS NOT NULL OR t.rate IS NOT NULL
), running AS (
    -- Through tickwork_runs_lease (a running run, and only one, has a lease): without the
    -- lease's condition no index has the running runs, and the count read the whole table.
    SELECT tenant, count(*) AS n FROM tickwork_runs
    WHERE state = 'running' AND lease_expires_at IS NOT NULL
      AND tenant IN (SELECT tenant FROM limited WHERE held AND max_running IS NOT NULL)
    GROUP BY tenant
), buckets AS MATERIALIZED (
    SELECT l.tenant, greatest(c.now, coalesce(l.refilled_at, c.now)) AS at,
        CASE WHEN l.tokens IS NULL OR l.refilled_at IS NULL THEN l.bucket
             ELSE least(l.bucket, l.tokens + l.rate
                        * greatest(0, extract(epoch FROM c.now - l.refilled_at)::float8))
        END AS tokens
    FROM limited l, clock c WHERE l.rate IS NOT NULL AND l.held
), tenant_room AS MATERIALIZED (
    SELECT l.tenant,
        CASE WHEN NOT l.held THEN 0
             ELSE least(coalesce(l.max_running - coalesce(r.n, 0), %(limit)s),
                        coalesce(floor(b.tokens + 1e-9)::int, %(limit)s))
        END AS room
    FROM limited l LEFT JOIN running r USING (tenant) LEFT JOIN buckets b USING (tenant)
), task_running AS (
    SELECT task, count(*) AS n FROM tickwork_runs
    WHERE state = 'running' AND lease_expires_at IS NOT NULL
      AND task IN (SELECT task FROM held_tasks)
    GROUP BY task
), task_buckets AS MATERIALIZED (
    SELECT t.task, greatest(c.now, coalesce(t.refilled_at, c.now)) AS at,
        CASE WHEN t.tokens IS NULL OR t.refilled_at IS NULL
                 THEN coalesce(t.burst, greatest(1, ceil(t.rate)))::float8
             ELSE least(coalesce(t.burst, greatest(1, ceil(t.rate)))::float8, t.tokens + t.rate
                        * greatest(0, extract(epoch FROM c.now - t.refilled_at)::float8))
        END AS tokens
    FROM tickwork_task_limits t JOIN held_tasks h USING (task), clock c
    WHERE t.rate IS NOT NULL
), task_room AS MATERIALIZED (
    SELECT t.task,
        CASE WHEN h.task IS NULL THEN 0
             ELSE least(coalesce(t.max_running - coalesce(r.n, 0), %(limit)s),
                        coalesce(floor(b.tokens + 1e-9)::int, %(limit)s))
        END AS room
    FROM tickwork_task_limits t LEFT JOIN held_tasks h USING (task)
    LEFT JOIN task_running r USING (task) LEFT JOIN task_buckets b USING (task)
), open AS (
    SELECT w.tenant, w.n, coalesce(t.weight, 1) AS weight, coalesce(r.room, %(limit)s) AS room
    FROM walk w LEFT JOIN tickwork_tenants t ON t.tenant = w.tenant
    LEFT JOIN tenant_room r ON r.tenant = w.tenant
), shares AS (
    SELECT tenant, n, weight,
        least(room, greatest(1, least(%(limit)s,
            ceil((CASE WHEN count(*) OVER () >= %(limit)s THEN 1.0 ELSE 2.0 END)
                 * %(limit)s * weight / sum(weight) OVER ()))))::int AS k
    FROM open WHERE room > 0
), picked AS (
    -- Of each tenant: its first runs of unlimited tasks, and of each limited task with room
    -- its first runs up to that room; so a task held by its limit (a rate refills all the
    -- time: its room is rarely 0) never fills a tenant's share with runs it cannot take,
    -- and its backlog does not hold back the tenant's other tasks; then the first k of
    -- them all (m), so that a tenant's runs of several tasks never pass its room.
    -- With runs of another task waiting, each of this claimer's unlimited tasks is read
    -- apart (o), up to the share each: a tenant with several such tasks locks more rows
    -- than it claims (those it does not claim are free again at commit). A task's runs of
    -- one tenant (o, l) are bounded by row comparisons on (task, tenant), equal to both,
    -- and ordered by the whole of tickwork_runs_task: only that index serves it, in claim
    -- order, stopping at the limit (with "task = ... AND tenant = ..." the planner may
    -- read tickwork_runs_fair, filtering a backlog of other tasks row by row).
    SELECT c.id, c.tenant, c.task, s.n,
        (row_number() OVER (PARTITION BY c.tenant ORDER BY c.priority DESC, c.run_at, c.id)
         - 1) / s.weight AS vtime
    FROM shares s CROSS JOIN LATERAL (
        SELECT * FROM (SELECT * FROM (
            SELECT id, tenant, task, priority, run_at FROM tickwork_runs r
            WHERE r.tenant = s.tenant
              -- include: claimable
              AND r.task NOT IN (SELECT task FROM task_room)
              AND NOT (SELECT waiting FROM others)
            ORDER BY r.priority DESC, r.run_at, r.id
            LIMIT s.k
            FOR UPDATE SKIP LOCKED
        ) u
        UNION ALL
        SELECT o.id, o.tenant, o.task, o.priority, o.run_at
        FROM active a CROSS JOIN LATERAL (
            SELECT id, tenant, task, priority, run_at FROM tickwork_runs r
            WHERE r.task = a.task AND r.tenant = s.tenant AND r.state IN ('queued', 'failed')
              AND r.run_at <= (SELECT now FROM clock)
              AND r.queue = ANY(%(queues)s::text[])  -- only-queues
            ORDER BY r.priority DESC, r.run_at, r.id
            LIMIT s.k
            FOR UPDATE SKIP LOCKED
        ) o
        WHERE (SELECT waiting FROM others) AND a.task NOT IN (SELECT task FROM task_room)
        UNION ALL
        SELECT l.id, l.tenant, l.task, l.priority, l.run_at
        FROM task_room t CROSS JOIN LATERAL (
            SELECT id, tenant, task, priority, run_at FROM tickwork_runs r
            WHERE r.task = t.task AND r.tenant = s.tenant AND r.state IN ('queued', 'failed')
              AND r.run_at <= (SELECT now FROM clock)
              AND r.queue = ANY(%(queues)s::text[])  -- only-queues
            ORDER BY r.priority DESC, r.run_at, r.id
            LIMIT least(s.k, t.room)
            FOR UPDATE SKIP LOCKED
        ) l
        WHERE t.room > 0
          AND t.task = ANY(%(tasks)s::text[])  -- only-tasks
        ) m
        ORDER BY priority DESC, run_at, id
        LIMIT s.k
    ) c
), chosen AS (
    SELECT p.id, p.n FROM (
        SELECT *, row_number() OVER (PARTITION BY task ORDER BY vtime, n) AS in_task
        FROM picked) p
    LEFT JOIN task_room t ON t.task = p.task
    WHERE t.room IS NULL OR p.in_task <= t.room
    ORDER BY p.vtime, p.n
    LIMIT %(limit)s
), claimed AS (
    UPDATE tickwork_runs r
    SET state = 'running', worker = %(worker)s, fencing_token = r.fencing_token + 1,
        lease_expires_at = (SELECT now FROM clock) + %(lease)s::interval,
        started_at = (SELECT now FROM clock)
    -- By primary key, whatever the planner guesses of chosen's size (a join could turn
    -- into a hash join over the whole table).
    WHERE r.id = ANY (ARRAY(SELECT id FROM chosen))
    RETURNING r.id, r.fencing_token, r.job_id, r.tenant, r.task, r.args, r.scheduled_for,
        r.attempt, r.max_attempts, make_interval(secs => r.timeout) AS timeout,
        r.queue, r.priority, r.run_at
), spent AS (
    UPDATE tickwork_tenants t SET tokens = b.tokens - c.n, refilled_at = b.at
    FROM (SELECT tenant, count(*) AS n FROM claimed GROUP BY tenant) c
    JOIN buckets b USING (tenant)
    WHERE t.tenant = c.tenant
), task_spent AS (
    UPDATE tickwork_task_limits t SET tokens = b.tokens - c.n, refilled_at = b.at
    FROM (SELECT task, count(*) AS n FROM claimed GROUP BY task) c
    JOIN task_buckets b USING (task)
    WHERE t.task = c.task
)
SELECT f.tenants, f.last_walked, f.limited, w.n AS walked,
    c.id, c.fencing_token, c.job_id, c.tenant, c.task, c.args,
    c.scheduled_for, c.attempt, c.max_attempts, c.timeout, c.queue
FROM (SELECT (SELECT count(*) FROM walk) AS tenants,
             (SELECT tenant FROM walk ORDER BY n DESC LIMIT 1) AS last_walked,
             EXISTS (SELECT 1 FROM tickwork_tenants
                     WHERE max_running IS NOT NULL OR rate IS NOT NULL
                     UNION ALL SELECT 1 FROM tickwork_task_limits) AS limited) f
LEFT JOIN claimed c ON true
LEFT JOIN walk w ON w.tenant = c.tenant
ORDER BY c.priority DESC, c.run_at, c.id;

-- name: set_task_limit
-- A task's limits as its code declares them; a row already so is left alone. The bucket's
-- tokens are kept (refill caps them at the new bucket), so a worker's start never refills
-- it; unsetting the rate forgets it (a rate set again starts with a full bucket).
INSERT INTO tickwork_task_limits (task, max_running, rate, burst, updated_at)
VALUES (%(task)s, %(max_running)s, %(rate)s, %(burst)s, %(now)s)
ON CONFLICT (task) DO UPDATE SET max_running = excluded.max_running,
    rate = excluded.rate, burst = excluded.burst,
    tokens = CASE WHEN excluded.rate IS NULL THEN NULL ELSE tickwork_task_limits.tokens END,
    refilled_at = CASE WHEN excluded.rate IS NULL THEN NULL
                       ELSE tickwork_task_limits.refilled_at END,
    updated_at = excluded.updated_at
WHERE tickwork_task_limits.max_running IS DISTINCT FROM excluded.max_running
   OR tickwork_task_limits.rate IS DISTINCT FROM excluded.rate
   OR tickwork_task_limits.burst IS DISTINCT FROM excluded.burst;

-- name: clear_task_limit
DELETE FROM tickwork_task_limits WHERE task = %(task)s;

-- name: task_limits
SELECT task, max_running, rate, burst FROM tickwork_task_limits ORDER BY task;

-- name: task_status
SELECT task, max_running, rate, burst, tokens, refilled_at FROM tickwork_task_limits
WHERE task = %(task)s;

-- name: insert_calendar
INSERT INTO tickwork_calendars (name, definition, created_at, updated_at)
VALUES (%(name)s, %(definition)s, %(now)s, %(now)s)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: update_calendar
UPDATE tickwork_calendars SET definition = %(definition)s, updated_at = %(now)s
WHERE name = %(name)s
RETURNING *;

-- name: get_calendar
SELECT * FROM tickwork_calendars WHERE name = %(name)s;

-- name: list_calendars
SELECT * FROM tickwork_calendars ORDER BY name;

-- name: delete_calendar
DELETE FROM tickwork_calendars WHERE name = %(name)s RETURNING name;

-- name: live_jobs_of_calendar
-- Active and paused jobs whose schedule names the calendar, locked: a trigger that holds
-- one finishes first, and none triggers them while they are re-planned.
SELECT * FROM tickwork_jobs
WHERE schedule ->> 'calendar' = %(name)s AND schedule ? 'calendar'
  AND state IN ('active', 'paused')
ORDER BY id
FOR UPDATE;

-- name: replan_job
UPDATE tickwork_jobs SET schedule = %(schedule)s, next_run_at = %(next_run_at)s,
    state = %(state)s, updated_at = %(now)s
WHERE id = %(id)s;

-- name: calendar_for_share
-- A job write binding the calendar: its delete waits for us (and we for its delete).
SELECT * FROM tickwork_calendars WHERE name = %(name)s FOR SHARE;

-- name: calendar_for_update
SELECT * FROM tickwork_calendars WHERE name = %(name)s FOR UPDATE;

-- name: live_jobs_of_calendar_ids
SELECT id FROM tickwork_jobs
WHERE schedule ->> 'calendar' = %(name)s AND schedule ? 'calendar'
  AND state IN ('active', 'paused')
ORDER BY id;
-- name: set_setting
INSERT INTO tickwork_settings (name, value, updated_at) VALUES (%(name)s, %(value)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at;

-- name: delete_setting
DELETE FROM tickwork_settings WHERE name = %(name)s;

-- name: get_setting
SELECT value, updated_at FROM tickwork_settings WHERE name = %(name)s;

-- name: mark_injected
-- Each fault appended to its run's marks, with the attempt it hit; only while that attempt
-- holds the run. Times in the marks are epoch microseconds, as in SQLite's.
UPDATE tickwork_runs r
SET injected = coalesce(r.injected, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
    'attempt', r.attempt, 'fault', m.fault, 'worker', %(worker)s::text, 'by_run', m.by_run,
    'at', (extract(epoch FROM %(now)s::timestamptz) * 1000000)::bigint))
FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[], %(faults)s::text[], %(by_runs)s::bigint[])
    AS m (id, token, fault, by_run)
WHERE r.id = m.id AND r.fencing_token = m.token AND r.state = 'running'
RETURNING r.id;

-- name: injected_runs
-- Runs that executed again after an injected fault: a mark of an earlier attempt, and the
-- run claimed since (started_at is its latest claim's time).
SELECT * FROM tickwork_runs r
WHERE r.injected IS NOT NULL
  AND (%(tenant)s::text IS NULL OR r.tenant = %(tenant)s)
  AND (%(after)s::bigint IS NULL OR r.id < %(after)s)
  AND EXISTS (
    SELECT 1 FROM jsonb_array_elements(r.injected) AS m (mark)
    WHERE (m.mark ->> 'attempt')::integer < r.attempt
      AND (m.mark ->> 'at')::bigint < (extract(epoch FROM r.started_at) * 1000000)::bigint)
ORDER BY r.id DESC LIMIT %(limit)s;
-- name: due_tasks
-- Each queue's due runs by task (the queues view says which no live worker can run).
SELECT queue, task, count(*) AS due, min(run_at) AS oldest FROM tickwork_runs
WHERE state IN ('queued', 'failed') AND run_at <= %(now)s
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
GROUP BY queue, task ORDER BY queue, task;

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
-- Runs that finished in [start, to), for the fold (the finished index); `limited`: its
-- tenant or its task has a limit (its start lag may be time held back on purpose).
SELECT r.tenant, r.task, r.queue, r.state, r.finished_at, r.started_at, r.scheduled_for,
    r.attempt, r.manual,
    EXISTS (SELECT 1 FROM tickwork_tenants t WHERE t.tenant = r.tenant
            AND (t.max_running IS NOT NULL OR t.rate IS NOT NULL))
    OR EXISTS (SELECT 1 FROM tickwork_task_limits k WHERE k.task = r.task) AS limited
FROM tickwork_runs r
WHERE r.state IN ('succeeded', 'dead', 'cancelled')
  AND r.finished_at >= %(start)s AND r.finished_at < %(to)s;

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

-- Cumulative totals (/metrics): the fold, fail and prune add to them; nothing deletes them.

-- name: total_known
SELECT 1 AS found FROM tickwork_run_totals
WHERE task = %(task)s AND queue = %(queue)s LIMIT 1;

-- name: total_pairs
SELECT count(*) AS n FROM (SELECT DISTINCT task, queue FROM tickwork_run_totals) AS p;

-- name: add_total
INSERT INTO tickwork_run_totals AS t (task, queue, outcome, runs)
VALUES (%(task)s, %(queue)s, %(outcome)s, %(runs)s)
ON CONFLICT (task, queue, outcome) DO UPDATE SET runs = t.runs + excluded.runs;

-- name: histogram_known
SELECT 1 AS found FROM tickwork_run_histograms WHERE queue = %(queue)s LIMIT 1;

-- name: histogram_queues
SELECT count(DISTINCT queue) AS n FROM tickwork_run_histograms;

-- name: add_histogram
INSERT INTO tickwork_run_histograms AS h (name, queue, le, runs, seconds)
VALUES (%(name)s, %(queue)s, %(le)s, %(runs)s, %(seconds)s)
ON CONFLICT (queue, name, le) DO UPDATE SET
    runs = h.runs + excluded.runs, seconds = h.seconds + excluded.seconds;

-- name: run_totals
SELECT task, queue, outcome, runs FROM tickwork_run_totals;

-- name: run_histograms
SELECT name, queue, le, runs, seconds FROM tickwork_run_histograms;
