-- v10: the dashboard's time axis. A compact per-minute rollup of finished runs, start lag
-- and queue depth, per tenant and queue, folded by the leader once a minute from finished
-- runs (the hot claim and complete paths write nothing here) and pruned past a day.
-- Times in microseconds, as everywhere in this file.

-- A run an operator asked for (tickwork trigger, a manual retry): its start lag says
-- nothing about the scheduler, so the lag figures leave it out.
ALTER TABLE tickwork_runs ADD COLUMN manual INTEGER NOT NULL DEFAULT 0;

CREATE TABLE tickwork_run_minutes (
    minute    INTEGER NOT NULL,             -- the minute's start
    tenant    TEXT    NOT NULL,
    queue     TEXT    NOT NULL,
    succeeded INTEGER NOT NULL DEFAULT 0,   -- runs that finished in the minute, by outcome
    failed    INTEGER NOT NULL DEFAULT 0,   -- attempts that failed and will be retried
    dead      INTEGER NOT NULL DEFAULT 0,
    lag       TEXT    NOT NULL DEFAULT '{}', -- start lag histogram of runs started in it
    depth     INTEGER NOT NULL DEFAULT 0,   -- due runs waiting, sampled once in the minute
    PRIMARY KEY (minute, tenant, queue)
);

-- How far the fold has read finished runs (exclusive).
CREATE TABLE tickwork_rollup (
    name      TEXT    PRIMARY KEY,
    folded_to INTEGER NOT NULL
);
INSERT INTO tickwork_rollup (name, folded_to) VALUES ('runs', 0);
