-- v7: tenants' rate limits and fair share (as PostgreSQL's v8).
-- A rate-limited tenant's token bucket: the tokens left at refilled_at (microseconds, the
-- store's clock). NULL is a full bucket (a rate just set). The claim refills and spends it
-- under the write lock, so every process on the host draws on the one bucket.
ALTER TABLE tickwork_tenants ADD COLUMN tokens REAL;
ALTER TABLE tickwork_tenants ADD COLUMN refilled_at INTEGER;

-- Fair share: the claim walks the tenants with claimable runs (one index probe each) and
-- reads each one's runs in claim order.
CREATE INDEX tickwork_runs_fair ON tickwork_runs (tenant, priority DESC, run_at, id)
    WHERE state IN ('queued', 'failed');
