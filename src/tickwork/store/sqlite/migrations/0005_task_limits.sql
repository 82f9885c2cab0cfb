-- v5: tasks' limits, declared in code (@app.task(max_running=1)) and written by each worker
-- as it starts. A task without a row has none; the claim enforces them as tenants'.
CREATE TABLE tickwork_task_limits (
    task        TEXT    PRIMARY KEY,
    max_running INTEGER NOT NULL CHECK (max_running >= 1),
    updated_at  INTEGER NOT NULL
);
