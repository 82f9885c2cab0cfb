-- v14: a claim takes only runs of the tasks its worker has (as PostgreSQL's v16): the index
-- its gate probes (the waiting runs' tasks, up to the first the claimer lacks) and that,
-- once runs of a task it lacks are waiting, it reads each of its own tasks' runs through,
-- per tenant in claim order, stepping over the other tasks' backlog.
CREATE INDEX tickwork_runs_task ON tickwork_runs (task, tenant, priority DESC, run_at, id)
    WHERE state IN ('queued', 'failed');
