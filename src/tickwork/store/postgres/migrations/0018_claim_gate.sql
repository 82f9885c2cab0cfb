-- v17: the claim's gate as a function, so that the claim statements, planned on every
-- call, plan a function call instead of its recursive walk (planning it was about 0.3 ms a
-- claim, a fifth of a drain of no-op runs). PL/pgSQL keeps the plan of its query for the
-- session, generic (no parameter of it changes the plan: the walk probes
-- tickwork_runs_task, the ends probe tickwork_runs_fair, whatever the tasks).
-- What it answers (queries.sql, complete_then_claim): "limited", whether any tenant or task
-- has a limit or runs of more than one tenant wait (fair share); "tenant", the least
-- tenant with waiting runs; "others", whether a run waits of a task not in tasks (NULL:
-- the claimer has every task, and none does). The waiting runs' tasks are walked in name
-- order, one probe each, up to the first not in tasks: two probes while every waiting run
-- is of one task the claimer has.
CREATE OR REPLACE FUNCTION tickwork_claim_gate(tasks text[])
RETURNS TABLE (limited boolean, tenant text, others boolean)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE seen (task) AS (
        SELECT min(r.task) FROM tickwork_runs r
        WHERE r.state IN ('queued', 'failed') AND tasks IS NOT NULL
        UNION ALL
        SELECT (SELECT min(r.task) FROM tickwork_runs r
                WHERE r.state IN ('queued', 'failed') AND r.task > s.task)
        FROM seen s WHERE s.task = ANY(tasks)
    )
    SELECT EXISTS (SELECT 1 FROM tickwork_tenants t
                   WHERE t.max_running IS NOT NULL OR t.rate IS NOT NULL
                   UNION ALL SELECT 1 FROM tickwork_task_limits)
            OR ends.first <> ends.last,
        ends.first,
        EXISTS (SELECT 1 FROM seen WHERE seen.task <> ALL(tasks))
    FROM (SELECT (SELECT min(r.tenant) FROM tickwork_runs r
                  WHERE r.state IN ('queued', 'failed')) AS first,
                 (SELECT max(r.tenant) FROM tickwork_runs r
                  WHERE r.state IN ('queued', 'failed')) AS last) ends;
END
$$;
