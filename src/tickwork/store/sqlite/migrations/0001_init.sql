-- tickwork schema v1 (SQLite). Times are integer microseconds since the Unix epoch, UTC.

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
);
CREATE UNIQUE INDEX tickwork_jobs_idempotency ON tickwork_jobs (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX tickwork_jobs_name ON tickwork_jobs (tenant, name) WHERE name IS NOT NULL;
CREATE INDEX tickwork_jobs_due ON tickwork_jobs (next_run_at)
    WHERE state = 'active' AND next_run_at IS NOT NULL;
CREATE INDEX tickwork_jobs_tenant ON tickwork_jobs (tenant, id);

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
    created_at       INTEGER NOT NULL,
    UNIQUE (job_id, scheduled_for)
);
CREATE INDEX tickwork_runs_claim ON tickwork_runs (priority DESC, run_at, id)
    WHERE state IN ('queued', 'failed');
CREATE INDEX tickwork_runs_claim_queue ON tickwork_runs (queue, priority DESC, run_at, id)
    WHERE state IN ('queued', 'failed');
CREATE INDEX tickwork_runs_lease ON tickwork_runs (lease_expires_at) WHERE state = 'running';
CREATE INDEX tickwork_runs_state ON tickwork_runs (state, id);
CREATE INDEX tickwork_runs_tenant ON tickwork_runs (tenant, id);
CREATE INDEX tickwork_runs_finished ON tickwork_runs (finished_at)
    WHERE state IN ('succeeded', 'dead', 'cancelled');

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

CREATE TABLE tickwork_leases (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    epoch      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
INSERT INTO tickwork_leases (name, holder, epoch, expires_at) VALUES ('scheduler', '', 0, 0);
