-- v16: a claim takes only runs of the tasks its worker has (Store.claim's tasks=). While
-- every waiting run is of a task the claimer has, the claim reads tickwork_runs_claim as
-- before (a gate in the statement: the waiting runs' tasks, one probe of this index each,
-- up to the first the claimer lacks). Once runs of a task it lacks are waiting (a worker
-- started without --app, an old worker in a rolling deploy, shell without --allow-shell),
-- it reads each of its own tasks' runs through this index instead, per tenant, in claim
-- order: so a backlog of another task's runs, however long, is stepped over, never read.
-- Also what a limited task's runs of one tenant are read through (before: the fair index,
-- filtered by task row by row). One more entry per run that waits (a submit, a retry, a
-- rescue, a release), as each of the claim's indexes takes.
CREATE INDEX tickwork_runs_task ON tickwork_runs (task, tenant, priority DESC, run_at, id)
    WHERE state IN ('queued', 'failed');
