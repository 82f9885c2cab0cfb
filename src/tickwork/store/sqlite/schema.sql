-- The schema the migrations make (SQLite), version 16: read it here, change it in
-- migrations/. Written by scripts/schema.py; tests/store/test_schema_file.py keeps it true.

CREATE TABLE tickwork_api_keys (
    id         INTEGER PRIMARY KEY,
    prefix     TEXT    NOT NULL UNIQUE,
    key_hash   TEXT    NOT NULL UNIQUE,
    tenant     TEXT    NOT NULL,
    admin      INTEGER NOT NULL,
    label      TEXT,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);

CREATE TABLE tickwork_attempts (
    run_id        INTEGER NOT NULL,
    n             INTEGER NOT NULL,
    attempt       INTEGER NOT NULL,     -- the run's attempt number then
    fencing_token INTEGER NOT NULL,     -- the token its claim issued
    worker        TEXT,
    started_at    INTEGER,
    ended_at      INTEGER NOT NULL,
    ended         TEXT    NOT NULL CHECK (ended IN ('failed', 'timed_out', 'lease_lost',
                      'released', 'cancelled', 'injected_fault')),
    error         TEXT,                 -- the exception line, or why it ended
    traceback     TEXT,
    PRIMARY KEY (run_id, n)
) WITHOUT ROWID;

CREATE TABLE tickwork_calendars (
    name        TEXT    PRIMARY KEY,
    definition  TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE tickwork_jobs (
    id              INTEGER PRIMARY KEY,
    tenant          TEXT    NOT NULL,
    name            TEXT,
    task            TEXT    NOT NULL,
    args            TEXT    NOT NULL,
    schedule        TEXT    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('active', 'paused', 'cancelled', 'completed')),
    next_run_at     INTEGER,
    queue           TEXT    NOT NULL,
    priority        INTEGER NOT NULL,
    max_attempts    INTEGER NOT NULL,
    backoff_base    REAL    NOT NULL,
    backoff_cap     REAL    NOT NULL,
    timeout         REAL,
    misfire         TEXT    NOT NULL,
    misfire_grace   REAL    NOT NULL,
    overlap         TEXT    NOT NULL,
    idempotency_key TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
, trace_context TEXT);
CREATE INDEX tickwork_jobs_calendar ON tickwork_jobs (json_extract(schedule, '$.calendar'))
    WHERE json_extract(schedule, '$.calendar') IS NOT NULL;
CREATE INDEX tickwork_jobs_due ON tickwork_jobs (next_run_at)
    WHERE state = 'active' AND next_run_at IS NOT NULL;
CREATE UNIQUE INDEX tickwork_jobs_idempotency ON tickwork_jobs (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX tickwork_jobs_name ON tickwork_jobs (tenant, name) WHERE name IS NOT NULL;
CREATE INDEX tickwork_jobs_tenant ON tickwork_jobs (tenant, id);

CREATE TABLE tickwork_leader_terms (
    epoch      INTEGER PRIMARY KEY,
    holder     TEXT    NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at   INTEGER
);

CREATE TABLE tickwork_leases (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    epoch      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
, previous_expires_at INTEGER NOT NULL DEFAULT 0);

CREATE TABLE tickwork_nodes (
    id           TEXT    PRIMARY KEY,
    kind         TEXT    NOT NULL,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    running      INTEGER NOT NULL DEFAULT 0,
    info         TEXT    NOT NULL DEFAULT '{}'
);

CREATE TABLE tickwork_rollup (
    name      TEXT    PRIMARY KEY,
    folded_to INTEGER NOT NULL
);

CREATE TABLE tickwork_run_histograms (
    name    TEXT    NOT NULL,           -- duration, lag, limited_lag
    queue   TEXT    NOT NULL,
    le      REAL    NOT NULL,           -- the bucket's upper bound in seconds (Inf last)
    runs    INTEGER NOT NULL DEFAULT 0, -- observations above the bound below, up to le
    seconds REAL    NOT NULL DEFAULT 0, -- their sum
    PRIMARY KEY (queue, name, le)      -- by queue first: a queue seen before is one probe
);

CREATE TABLE tickwork_run_minutes (
    minute    INTEGER NOT NULL,             -- the minute's start
    tenant    TEXT    NOT NULL,
    queue     TEXT    NOT NULL,
    succeeded INTEGER NOT NULL DEFAULT 0,   -- runs that finished in the minute, by outcome
    failed    INTEGER NOT NULL DEFAULT 0,   -- attempts that failed and will be retried
    dead      INTEGER NOT NULL DEFAULT 0,
    lag       TEXT    NOT NULL DEFAULT '{}', -- start lag histogram of runs started in it
    depth     INTEGER NOT NULL DEFAULT 0,   -- due runs waiting, sampled once in the minute
    PRIMARY KEY (minute, tenant, queue)
);

CREATE TABLE tickwork_run_totals (
    task    TEXT    NOT NULL,
    queue   TEXT    NOT NULL,
    outcome TEXT    NOT NULL,           -- succeeded, dead, cancelled; failed: attempts retried
    runs    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task, queue, outcome)
);

CREATE TABLE tickwork_runs (
    id               INTEGER PRIMARY KEY,
    job_id           INTEGER NOT NULL REFERENCES tickwork_jobs (id) ON DELETE CASCADE,
    tenant           TEXT    NOT NULL,
    task             TEXT    NOT NULL,
    args             TEXT    NOT NULL,
    queue            TEXT    NOT NULL,
    priority         INTEGER NOT NULL,
    max_attempts     INTEGER NOT NULL,
    backoff_base     REAL    NOT NULL,
    backoff_cap      REAL    NOT NULL,
    timeout          REAL,
    scheduled_for    INTEGER NOT NULL,
    run_at           INTEGER NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN
                         ('queued', 'running', 'succeeded', 'failed', 'dead', 'cancelled')),
    attempt          INTEGER NOT NULL DEFAULT 1,
    fencing_token    INTEGER NOT NULL DEFAULT 0,
    worker           TEXT,
    lease_expires_at INTEGER,
    started_at       INTEGER,
    finished_at      INTEGER,
    error            TEXT,
    result           TEXT,
    created_at       INTEGER NOT NULL, injected TEXT, manual INTEGER NOT NULL DEFAULT 0,
    UNIQUE (job_id, scheduled_for)
);
CREATE INDEX tickwork_runs_claim ON tickwork_runs (priority DESC, run_at, id)
    WHERE state IN ('queued', 'failed');
CREATE INDEX tickwork_runs_claim_queue ON tickwork_runs (queue, priority DESC, run_at, id)
    WHERE state IN ('queued', 'failed');
CREATE INDEX tickwork_runs_fair ON tickwork_runs (tenant, priority DESC, run_at, id)
    WHERE state IN ('queued', 'failed');
CREATE INDEX tickwork_runs_finished ON tickwork_runs (finished_at)
    WHERE state IN ('succeeded', 'dead', 'cancelled');
CREATE INDEX tickwork_runs_injected ON tickwork_runs (id) WHERE injected IS NOT NULL;
CREATE INDEX tickwork_runs_lease ON tickwork_runs (lease_expires_at) WHERE state = 'running';
CREATE INDEX tickwork_runs_started ON tickwork_runs (started_at) WHERE attempt = 1;
CREATE INDEX tickwork_runs_state ON tickwork_runs (state, id);
CREATE INDEX tickwork_runs_task ON tickwork_runs (task, tenant, priority DESC, run_at, id)
    WHERE state IN ('queued', 'failed');
CREATE INDEX tickwork_runs_tenant ON tickwork_runs (tenant, id);

CREATE TABLE tickwork_sessions (
    id           INTEGER PRIMARY KEY,
    token_hash   TEXT    NOT NULL UNIQUE,
    key_id       INTEGER NOT NULL REFERENCES tickwork_api_keys (id),
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    idle_timeout INTEGER NOT NULL,  -- microseconds
    expires_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);
CREATE INDEX tickwork_sessions_key ON tickwork_sessions (key_id) WHERE revoked_at IS NULL;

CREATE TABLE tickwork_settings (
    name       TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE tickwork_slot_skips (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES tickwork_jobs (id) ON DELETE CASCADE,
    first_slot  INTEGER NOT NULL,
    last_slot   INTEGER NOT NULL,
    count       INTEGER NOT NULL,
    fate        TEXT    NOT NULL,
    run_id      INTEGER,
    more        INTEGER NOT NULL DEFAULT 0,
    recorded_at INTEGER NOT NULL
);
CREATE INDEX tickwork_slot_skips_job ON tickwork_slot_skips (job_id, first_slot);

CREATE TABLE "tickwork_task_limits" (
    task        TEXT    PRIMARY KEY,
    max_running INTEGER CHECK (max_running IS NULL OR max_running BETWEEN 1 AND 1000000),
    rate        REAL    CHECK (rate IS NULL OR rate BETWEEN 0.00001 AND 1000000),
    burst       INTEGER CHECK (burst IS NULL OR burst BETWEEN 1 AND 1000000),
    tokens      REAL,
    refilled_at INTEGER,
    updated_at  INTEGER NOT NULL,
    CHECK (max_running IS NOT NULL OR rate IS NOT NULL)
);

CREATE TABLE "tickwork_tenants" (
    tenant      TEXT    PRIMARY KEY,
    max_running INTEGER CHECK (max_running IS NULL OR max_running BETWEEN 1 AND 1000000),
    rate        REAL    CHECK (rate IS NULL OR rate BETWEEN 0.00001 AND 1000000),
    burst       INTEGER CHECK (burst IS NULL OR burst BETWEEN 1 AND 1000000),
    weight      REAL    NOT NULL DEFAULT 1 CHECK (weight BETWEEN 0.001 AND 1000),
    updated_at  INTEGER NOT NULL,
    tokens      REAL,
    refilled_at INTEGER
);
