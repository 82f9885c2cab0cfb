-- v11: the dashboard's time axis. A compact per-minute rollup of finished runs, start lag
-- and queue depth, per tenant and queue, folded by the leader once a minute from finished
-- runs (the hot claim and complete paths write nothing here) and pruned past a day.

-- A run an operator asked for (tickwork trigger, a manual retry): its start lag says
-- nothing about the scheduler, so the lag figures leave it out. A constant default adds
-- the column without rewriting the table.
ALTER TABLE tickwork_runs ADD COLUMN manual boolean NOT NULL DEFAULT false;

CREATE TABLE tickwork_run_minutes (
    minute    timestamptz NOT NULL,            -- the minute's start
    tenant    text        NOT NULL,
    queue     text        NOT NULL,
    succeeded integer     NOT NULL DEFAULT 0,  -- runs that finished in the minute, by outcome
    failed    integer     NOT NULL DEFAULT 0,  -- attempts that failed and will be retried
    dead      integer     NOT NULL DEFAULT 0,
    lag       jsonb       NOT NULL DEFAULT '{}', -- start lag histogram of runs started in it
    depth     integer     NOT NULL DEFAULT 0,  -- due runs waiting, sampled once in the minute
    PRIMARY KEY (minute, tenant, queue)
);

-- How far the fold has read finished runs (exclusive).
CREATE TABLE tickwork_rollup (
    name      text        PRIMARY KEY,
    folded_to timestamptz NOT NULL
);
INSERT INTO tickwork_rollup (name, folded_to) VALUES ('runs', 'epoch');
