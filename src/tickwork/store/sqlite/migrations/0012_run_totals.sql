-- v12: cumulative totals for /metrics: runs finished by task, queue and outcome, and
-- histograms of execution duration and start lag by queue. Counted once, by the leader's
-- fold (finished runs), the fail path (failed attempts) and the pruner (runs it deletes
-- before a fold read them), and never pruned: they only grow (docs/observability.md).
CREATE TABLE tickwork_run_totals (
    task    TEXT    NOT NULL,
    queue   TEXT    NOT NULL,
    outcome TEXT    NOT NULL,           -- succeeded, dead, cancelled; failed: attempts retried
    runs    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task, queue, outcome)
);

CREATE TABLE tickwork_run_histograms (
    name    TEXT    NOT NULL,           -- duration, lag, limited_lag
    queue   TEXT    NOT NULL,
    le      REAL    NOT NULL,           -- the bucket's upper bound in seconds (Inf last)
    runs    INTEGER NOT NULL DEFAULT 0, -- observations above the bound below, up to le
    seconds REAL    NOT NULL DEFAULT 0, -- their sum
    PRIMARY KEY (queue, name, le)      -- by queue first: a queue seen before is one probe
);
