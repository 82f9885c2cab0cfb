-- v14: cumulative totals for /metrics: runs finished by task, queue and outcome, and
-- histograms of execution duration and start lag by queue. Counted once, by the leader's
-- fold (finished runs), the fail path (failed attempts) and the pruner (runs it deletes
-- before a fold read them), and never pruned: they only grow, and every API replica reads
-- the same figures (docs/observability.md).
CREATE TABLE tickwork_run_totals (
    task    text   NOT NULL,
    queue   text   NOT NULL,
    outcome text   NOT NULL,            -- succeeded, dead, cancelled; failed: attempts retried
    runs    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (task, queue, outcome)
);

CREATE TABLE tickwork_run_histograms (
    name    text             NOT NULL,  -- duration, lag, limited_lag
    queue   text             NOT NULL,
    le      double precision NOT NULL,  -- the bucket's upper bound in seconds ('Infinity' last)
    runs    bigint           NOT NULL DEFAULT 0,  -- observations above the bound below, up to le
    seconds double precision NOT NULL DEFAULT 0,  -- their sum
    PRIMARY KEY (queue, name, le)      -- by queue first: a queue seen before is one probe
);
