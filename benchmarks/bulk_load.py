"""Rows written straight into tickwork's PostgreSQL tables, by the million, in seconds.

Going through ``Store.submit`` would take minutes per million; these ``INSERT ... SELECT
generate_series`` statements write rows shaped exactly like the ones the store writes
(same columns, states and invariants), then ``VACUUM ANALYZE`` as autovacuum would have
done by the time a store had grown that large. Used by ``store_size.py``, ``trigger.py``
and the profiles in the README.
"""

from __future__ import annotations

import psycopg

RUNS_PER_JOB = 100
"""Finished and queued runs are spread over recurring jobs, this many slots each."""

_JOBS = """
INSERT INTO tickwork_jobs (tenant, task, args, schedule, state, next_run_at, queue, priority,
    max_attempts, backoff_base, backoff_cap, timeout, misfire, misfire_grace, overlap,
    created_at, updated_at)
SELECT 'default', 'noop', '{}',
    jsonb_build_object('kind', 'interval', 'every', 60.0,
        'anchor', to_char(a AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')),
    %(state)s,
    CASE WHEN %(state)s = 'active' THEN a END,
    'default', 0, 3, 1.0, 300.0, NULL, 'once', 60.0, 'allow',
    now() - interval '1 day', now() - interval '1 day'
FROM generate_series(0, %(n)s - 1) AS g,
    -- Each job's anchor is its first slot, due a second ago (a microsecond apart).
    LATERAL (SELECT now() - interval '1 second' - g * interval '1 microsecond' AS a) AS anchors
"""

_RUNS = f"""
INSERT INTO tickwork_runs (job_id, tenant, task, args, queue, priority, max_attempts,
    backoff_base, backoff_cap, timeout, scheduled_for, run_at, state, attempt, fencing_token,
    worker, started_at, finished_at, created_at)
SELECT %(first_job)s + g / {RUNS_PER_JOB},
    CASE WHEN %(tenants)s = 1 THEN 'default' ELSE 't' || lpad((g %% %(tenants)s)::text, 5, '0') END,
    'noop', '{{}}', 'default', 0, 3, 1.0, 300.0,
    NULL, t, t, %(state)s, 1, CASE WHEN %(state)s = 'succeeded' THEN 1 ELSE 0 END,
    CASE WHEN %(state)s = 'succeeded' THEN 'loader' END,
    CASE WHEN %(state)s = 'succeeded' THEN t END,
    CASE WHEN %(state)s = 'succeeded' THEN t END,
    t
FROM generate_series(0, %(n)s - 1) AS g,
    LATERAL (SELECT now() - interval '1 second' - g * interval '1 millisecond'
             - %(shift)s * interval '1 second' AS t) AS ts
"""


def load_runs(url: str, *, finished: int, queued: int, tenants: int = 1) -> None:
    """``finished`` succeeded runs and ``queued`` runs claimable now (oldest first), dealt
    round the ``tenants`` (``t00000``, ``t00001``, ...; one: all of tenant ``default``)."""
    with psycopg.connect(url, autocommit=True) as conn:
        first = _jobs(conn, -(-(finished + queued) // RUNS_PER_JOB), "completed")
        # Two slot ranges that cannot collide: finished runs lie a day further back.
        for state, n, shift in (("succeeded", finished, 86_400 * 30), ("queued", queued, 0)):
            if n:
                params = {
                    "first_job": first,
                    "state": state,
                    "n": n,
                    "shift": shift,
                    "tenants": tenants,
                }
                conn.execute(_RUNS, params)
                first += -(-n // RUNS_PER_JOB)
        conn.execute("VACUUM ANALYZE tickwork_jobs")
        conn.execute("VACUUM ANALYZE tickwork_runs")


def load_due_jobs(url: str, n: int) -> None:
    """``n`` active interval jobs (every 60 s, each its own anchor) whose first slot fell
    one second ago: each is due exactly once now, and next a minute later."""
    with psycopg.connect(url, autocommit=True) as conn:
        _jobs(conn, n, "active")
        conn.execute("VACUUM ANALYZE tickwork_jobs")


def _jobs(conn: psycopg.Connection[tuple[object, ...]], n: int, state: str) -> int:
    """Insert ``n`` jobs; return the first new id."""
    row = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM tickwork_jobs").fetchone()
    assert row is not None
    conn.execute(_JOBS, {"n": n, "state": state})
    return int(str(row[0]))
