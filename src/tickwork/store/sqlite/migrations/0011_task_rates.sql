-- v11: tasks' rate limits (as PostgreSQL's v12): max_running, a rate, or both, and a
-- rate-limited task's token bucket (tokens at refilled_at, microseconds; NULL is full).
-- SQLite cannot drop a NOT NULL or add a table CHECK in place: the table is rebuilt.
CREATE TABLE tickwork_task_limits_v11 (
    task        TEXT    PRIMARY KEY,
    max_running INTEGER CHECK (max_running IS NULL OR max_running >= 1),
    rate        REAL    CHECK (rate IS NULL OR rate > 0),
    burst       INTEGER CHECK (burst IS NULL OR burst >= 1),
    tokens      REAL,
    refilled_at INTEGER,
    updated_at  INTEGER NOT NULL,
    CHECK (max_running IS NOT NULL OR rate IS NOT NULL)
);
INSERT INTO tickwork_task_limits_v11 (task, max_running, updated_at)
SELECT task, max_running, updated_at FROM tickwork_task_limits;
DROP TABLE tickwork_task_limits;
ALTER TABLE tickwork_task_limits_v11 RENAME TO tickwork_task_limits;
