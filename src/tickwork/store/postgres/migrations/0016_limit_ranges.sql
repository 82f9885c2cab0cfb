-- v15: every limit within the range the claim's arithmetic handles (records.py: RATE_FLOOR,
-- RATE_CEILING, WEIGHT_FLOOR, WEIGHT_CEILING, MAX_RUNNING_CEILING; docs/tenant-limits.md).
-- "Above 0" let a weight of 1e-310 in: the claim's rank / weight overflowed a double, and
-- while only such tenants had runs waiting every claim failed. A rate as small underflowed
-- its bucket's refill (rate * elapsed) the same way. The store's checks refuse such values
-- at input; these CHECKs refuse them from SQL written by hand. A row already out of range
-- (only SQL by hand, or a weight below 0.001 that the store accepted before) is moved to
-- the nearest end of its range first, so the constraints can be added.
UPDATE tickwork_tenants
SET weight = least(greatest(weight, 0.001::float8), 1000::float8)
WHERE weight < 0.001::float8 OR weight > 1000::float8;
UPDATE tickwork_tenants
SET rate = least(greatest(rate, 0.00001::float8), 1000000::float8)
WHERE rate < 0.00001::float8 OR rate > 1000000::float8;
UPDATE tickwork_tenants SET max_running = 1000000 WHERE max_running > 1000000;
UPDATE tickwork_tenants SET burst = 1000000 WHERE burst > 1000000;
UPDATE tickwork_task_limits
SET rate = least(greatest(rate, 0.00001::float8), 1000000::float8)
WHERE rate < 0.00001::float8 OR rate > 1000000::float8;
UPDATE tickwork_task_limits SET max_running = 1000000 WHERE max_running > 1000000;
UPDATE tickwork_task_limits SET burst = 1000000 WHERE burst > 1000000;

ALTER TABLE tickwork_tenants
    ADD CONSTRAINT tickwork_tenants_max_running_range CHECK (max_running <= 1000000),
    ADD CONSTRAINT tickwork_tenants_rate_range
        CHECK (rate BETWEEN 0.00001::float8 AND 1000000::float8),
    ADD CONSTRAINT tickwork_tenants_burst_range CHECK (burst <= 1000000),
    ADD CONSTRAINT tickwork_tenants_weight_range
        CHECK (weight BETWEEN 0.001::float8 AND 1000::float8);
ALTER TABLE tickwork_task_limits
    ADD CONSTRAINT tickwork_task_limits_max_running_range CHECK (max_running <= 1000000),
    ADD CONSTRAINT tickwork_task_limits_rate_range
        CHECK (rate BETWEEN 0.00001::float8 AND 1000000::float8),
    ADD CONSTRAINT tickwork_task_limits_burst_range CHECK (burst <= 1000000);
