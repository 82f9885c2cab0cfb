-- v4: tenants' limits. A tenant without a row has none. Only max_running is enforced
-- (by the claim); rate, burst and weight are reserved for rate limits and fair share.
-- Times in microseconds, as everywhere in this file.
CREATE TABLE tickwork_tenants (
    tenant      TEXT    PRIMARY KEY,
    max_running INTEGER CHECK (max_running IS NULL OR max_running >= 1),
    rate        REAL    CHECK (rate IS NULL OR rate > 0),
    burst       INTEGER CHECK (burst IS NULL OR burst >= 1),
    weight      REAL    NOT NULL DEFAULT 1 CHECK (weight > 0),
    updated_at  INTEGER NOT NULL
);
