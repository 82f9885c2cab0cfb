-- v13: every limit within the range the claim's arithmetic handles (as PostgreSQL's v15;
-- records.py: RATE_FLOOR, RATE_CEILING, WEIGHT_FLOOR, WEIGHT_CEILING, MAX_RUNNING_CEILING;
-- docs/tenant-limits.md). The columns' CHECKs said only "above 0", which let in an infinite
-- rate (SQLite's REAL holds one) and a weight of 1e-310, whose rank / weight the claim
-- cannot compute. SQLite cannot add a CHECK in place: both tables are rebuilt, each row
-- moved into its range as it is copied (only SQL by hand, or a weight below 0.001 that the
-- store accepted before, was out of it).
CREATE TABLE tickwork_tenants_v13 (
    tenant      TEXT    PRIMARY KEY,
    max_running INTEGER CHECK (max_running IS NULL OR max_running BETWEEN 1 AND 1000000),
    rate        REAL    CHECK (rate IS NULL OR rate BETWEEN 0.00001 AND 1000000),
    burst       INTEGER CHECK (burst IS NULL OR burst BETWEEN 1 AND 1000000),
    weight      REAL    NOT NULL DEFAULT 1 CHECK (weight BETWEEN 0.001 AND 1000),
    updated_at  INTEGER NOT NULL,
    tokens      REAL,
    refilled_at INTEGER
);
INSERT INTO tickwork_tenants_v13
    (tenant, max_running, rate, burst, weight, updated_at, tokens, refilled_at)
SELECT tenant, min(max_running, 1000000), min(max(rate, 0.00001), 1000000),
    min(burst, 1000000), min(max(weight, 0.001), 1000), updated_at, tokens, refilled_at
FROM tickwork_tenants;
DROP TABLE tickwork_tenants;
ALTER TABLE tickwork_tenants_v13 RENAME TO tickwork_tenants;

CREATE TABLE tickwork_task_limits_v13 (
    task        TEXT    PRIMARY KEY,
    max_running INTEGER CHECK (max_running IS NULL OR max_running BETWEEN 1 AND 1000000),
    rate        REAL    CHECK (rate IS NULL OR rate BETWEEN 0.00001 AND 1000000),
    burst       INTEGER CHECK (burst IS NULL OR burst BETWEEN 1 AND 1000000),
    tokens      REAL,
    refilled_at INTEGER,
    updated_at  INTEGER NOT NULL,
    CHECK (max_running IS NOT NULL OR rate IS NOT NULL)
);
INSERT INTO tickwork_task_limits_v13
    (task, max_running, rate, burst, tokens, refilled_at, updated_at)
SELECT task, min(max_running, 1000000), min(max(rate, 0.00001), 1000000),
    min(burst, 1000000), tokens, refilled_at, updated_at
FROM tickwork_task_limits;
DROP TABLE tickwork_task_limits;
ALTER TABLE tickwork_task_limits_v13 RENAME TO tickwork_task_limits;
