-- v13: a rate or a weight is a finite positive number. The store's checks refuse the rest
-- (parse_rate, check_rate), but the columns' own CHECKs (rate > 0, weight > 0) let NaN and
-- Infinity in from SQL written by hand: PostgreSQL sorts NaN above every number. An
-- infinite rate or weight would break the claim's bucket and share arithmetic.
ALTER TABLE tickwork_tenants
    ADD CONSTRAINT tickwork_tenants_rate_finite CHECK (rate IS NULL OR rate < 'Infinity'),
    ADD CONSTRAINT tickwork_tenants_weight_finite CHECK (weight < 'Infinity');
ALTER TABLE tickwork_task_limits
    ADD CONSTRAINT tickwork_task_limits_rate_finite CHECK (rate IS NULL OR rate < 'Infinity');
