-- v8: tenants' rate limits and fair share.
-- A rate-limited tenant's token bucket: the tokens left at refilled_at (the database's
-- clock). NULL is a full bucket (a rate just set). The claim refills and spends it while it
-- holds the tenant's row, so every worker on every host draws on the one bucket.
ALTER TABLE tickwork_tenants
    ADD COLUMN tokens      double precision,
    ADD COLUMN refilled_at timestamptz;

-- The claim reads the tenants with a limit (a max_running or a rate) on every call.
DROP INDEX tickwork_tenants_limited;
CREATE INDEX tickwork_tenants_limited ON tickwork_tenants (tenant)
    WHERE max_running IS NOT NULL OR rate IS NOT NULL;

-- Fair share: the claim walks the tenants with claimable runs (one index probe each, past
-- a tenant's whole backlog at once) and reads each one's runs in claim order.
CREATE INDEX tickwork_runs_fair ON tickwork_runs (tenant, priority DESC, run_at, id)
    WHERE state IN ('queued', 'failed');
