-- v3: fewer index entries per run transition.
--
-- No update of a run can be HOT (its state is indexed), so every claim and every complete
-- writes one entry into each index whose predicate the new row version meets. Three
-- indexes took an entry on every transition for the sake of listings:
--   tickwork_runs_state   (state, id):   now only the states worth finding among millions
--                                        of succeeded runs: failed, dead, cancelled. Queued
--                                        and running runs are few and recent: the primary
--                                        key, read backwards, finds them.
--   tickwork_runs_tenant  (tenant, id):  now only for tenants other than 'default', so a
--                                        single-tenant installation pays nothing and a
--                                        tenant's listing among others' runs stays indexed.
--   tickwork_runs_started (started_at):  gone; the recent-lag sample reads the newest runs
--                                        by id instead.
-- And the lease index's predicate moves from state = 'running' to lease_expires_at IS NOT
-- NULL (the same rows: only a running run has a lease), so the planner can no longer pick
-- it, on a stale row estimate, to find runs by id and read every running run to do so.
-- Measured on the store's drain (benchmarks/drain_levers.py): 1.47x runs/s.

DROP INDEX tickwork_runs_state;
DROP INDEX tickwork_runs_tenant;
DROP INDEX tickwork_runs_started;
DROP INDEX tickwork_runs_lease;

CREATE INDEX tickwork_runs_trouble ON tickwork_runs (state, id)
    WHERE state IN ('failed', 'dead', 'cancelled');
CREATE INDEX tickwork_runs_tenant ON tickwork_runs (tenant, id) WHERE tenant <> 'default';
CREATE INDEX tickwork_runs_lease ON tickwork_runs (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;
