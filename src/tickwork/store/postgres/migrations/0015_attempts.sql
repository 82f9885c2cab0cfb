-- v15: every attempt of a run that ended other than by succeeding (failed, timed out,
-- lease lost, released, cancelled, an injected fault), a row each, written by the
-- transition that ended it in its transaction (fail, rescue, release, cancel_run, the
-- trigger's overlap 'replace'). The attempt that runs now or succeeded is read from the
-- run row itself, so claim and complete write nothing here. `n` counts a run's ended
-- attempts from 1 and is never reused: a run keeps its last ATTEMPTS_KEPT (the oldest
-- dropped: the first kept `n` less one is how many). Pruned with its run (prune deletes
-- both). No foreign key: its trigger on tickwork_runs would run on every update of a run,
-- claim and complete included.
CREATE TABLE tickwork_attempts (
    run_id        bigint      NOT NULL,
    n             integer     NOT NULL,
    attempt       integer     NOT NULL,  -- the run's attempt number then
    fencing_token bigint      NOT NULL,  -- the token its claim issued
    worker        text,
    started_at    timestamptz,
    ended_at      timestamptz NOT NULL,
    ended         text        NOT NULL CHECK (ended IN ('failed', 'timed_out', 'lease_lost',
                      'released', 'cancelled', 'injected_fault')),
    error         text,                  -- the exception line, or why it ended
    traceback     text,
    PRIMARY KEY (run_id, n)
);

-- Dead runs from before: their last attempt, as the run row tells it (its error was the
-- exception line, a blank line, and the end of the traceback).
INSERT INTO tickwork_attempts (run_id, n, attempt, fencing_token, worker, started_at,
    ended_at, ended, error, traceback)
SELECT id, 1, attempt, fencing_token, worker, started_at, coalesce(finished_at, run_at),
    CASE WHEN error LIKE 'lease expired:%' THEN 'lease_lost'
         WHEN error LIKE 'timed out after %' THEN 'timed_out'
         WHEN error LIKE 'injected fault:%' THEN 'injected_fault'
         ELSE 'failed' END,
    CASE WHEN position(E'\n\n' IN error) > 0
         THEN left(error, position(E'\n\n' IN error) - 1) ELSE error END,
    CASE WHEN position(E'\n\n' IN error) > 0
         THEN substr(error, position(E'\n\n' IN error) + 2) END
FROM tickwork_runs WHERE state = 'dead' AND started_at IS NOT NULL;
