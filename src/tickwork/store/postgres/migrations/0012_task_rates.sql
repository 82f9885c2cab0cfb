-- v12: tasks' rate limits, declared in code (@app.task(rate="10/s", burst=20)) beside
-- max_running: a task has either or both. A rate-limited task's token bucket is kept in its
-- row as a tenant's is (v8): the tokens left at refilled_at (the database's clock), NULL a
-- full bucket; the claim refills and spends it while it holds the task's row.
ALTER TABLE tickwork_task_limits
    ALTER COLUMN max_running DROP NOT NULL,
    ADD COLUMN rate        double precision CHECK (rate IS NULL OR rate > 0),
    ADD COLUMN burst       integer CHECK (burst IS NULL OR burst >= 1),
    ADD COLUMN tokens      double precision,
    ADD COLUMN refilled_at timestamptz,
    ADD CONSTRAINT tickwork_task_limits_some CHECK (max_running IS NOT NULL OR rate IS NOT NULL);
