-- v6: tasks' limits, declared in code (@app.task(max_running=1)) and written by each worker
-- as it starts. A task without a row has none; the claim enforces them as tenants'.
CREATE TABLE tickwork_task_limits (
    task        text PRIMARY KEY,
    max_running integer NOT NULL CHECK (max_running >= 1),
    updated_at  timestamptz NOT NULL
);
