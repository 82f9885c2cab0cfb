-- v5: tenants' limits. A tenant without a row has none. Only max_running is enforced
-- (by the claim); rate, burst and weight are reserved for rate limits and fair share.
CREATE TABLE tickwork_tenants (
    tenant      text PRIMARY KEY,
    max_running integer CHECK (max_running IS NULL OR max_running >= 1),
    rate        double precision CHECK (rate IS NULL OR rate > 0),
    burst       integer CHECK (burst IS NULL OR burst >= 1),
    weight      double precision NOT NULL DEFAULT 1 CHECK (weight > 0),
    updated_at  timestamptz NOT NULL
);

-- The claim reads the limited tenants on every call; unlimited ones are not in this index.
CREATE INDEX tickwork_tenants_limited ON tickwork_tenants (tenant) WHERE max_running IS NOT NULL;
