-- v13: every attempt of a run that ended other than by succeeding (failed, timed out,
-- lease lost, released, cancelled, an injected fault), a row each, written by the
-- transition that ended it in its transaction (fail, rescue, release, cancel_run, the
-- trigger's overlap 'replace'). The attempt that runs now or succeeded is read from the
-- run row itself, so claim and complete write nothing here. `n` counts a run's ended
-- attempts from 1 and is never reused: a run keeps its last ATTEMPTS_KEPT (the oldest
-- dropped: the first kept `n` less one is how many). Pruned with its run (prune deletes
-- both). No foreign key, as in PostgreSQL's: the trigger's inserts of runs would look here.
CREATE TABLE tickwork_attempts (
    run_id        INTEGER NOT NULL,
    n             INTEGER NOT NULL,
    attempt       INTEGER NOT NULL,     -- the run's attempt number then
    fencing_token INTEGER NOT NULL,     -- the token its claim issued
    worker        TEXT,
    started_at    INTEGER,
    ended_at      INTEGER NOT NULL,
    ended         TEXT    NOT NULL CHECK (ended IN ('failed', 'timed_out', 'lease_lost',
                      'released', 'cancelled', 'injected_fault')),
    error         TEXT,                 -- the exception line, or why it ended
    traceback     TEXT,
    PRIMARY KEY (run_id, n)
) WITHOUT ROWID;

-- Dead runs from before: their last attempt, as the run row tells it (its error was the
-- exception line, a blank line, and the end of the traceback).
INSERT INTO tickwork_attempts (run_id, n, attempt, fencing_token, worker, started_at,
    ended_at, ended, error, traceback)
SELECT id, 1, attempt, fencing_token, worker, started_at, coalesce(finished_at, run_at),
    CASE WHEN error LIKE 'lease expired:%' THEN 'lease_lost'
         WHEN error LIKE 'timed out after %' THEN 'timed_out'
         WHEN error LIKE 'injected fault:%' THEN 'injected_fault'
         ELSE 'failed' END,
    CASE WHEN instr(error, char(10, 10)) > 0 THEN substr(error, 1, instr(error, char(10, 10)) - 1)
         ELSE error END,
    CASE WHEN instr(error, char(10, 10)) > 0 THEN substr(error, instr(error, char(10, 10)) + 2)
    END
FROM tickwork_runs WHERE state = 'dead' AND started_at IS NOT NULL;
