"""Both dialects name the same queries, and fill the same templates the same way."""

from __future__ import annotations

import re
from pathlib import Path

import tickwork.store
from tickwork.store.queries import ONLY_QUEUES, ONLY_TASKS, for_claimer, for_queues, load_queries

STORE = Path(tickwork.store.__file__).parent
POSTGRES = load_queries(STORE / "postgres" / "queries.sql")
SQLITE = load_queries(STORE / "sqlite" / "queries.sql")

HOT_PATH_ONLY = {
    # PostgreSQL's worker batch: complete and claim in one statement (SQLite's two
    # statements share one transaction instead), and which completions took when not all.
    "complete_then_claim": "postgres",
    "complete_then_claim_own": "postgres",
    "completed_with_tokens": "postgres",
    # PostgreSQL's bulk submit: the batch in one unnest statement, then the jobs whose
    # idempotency key matched and the names taken, each in one statement (SQLite's bulk
    # submit goes job by job in one transaction).
    "submit_jobs": "postgres",
    "jobs_by_idempotency_keys": "postgres",
    "jobs_by_names": "postgres",
    # SQLite's heartbeat: one run per statement, then why a lease was not extended
    # (PostgreSQL's heartbeat statement answers both for a whole batch).
    "held_run_state": "sqlite",
    # The limited claim (limits, fair share): PostgreSQL's two statements in one round trip
    # (the walk and the locks, then everything else); SQLite's steps under its write lock,
    # the pick in Python (store/limits.py).
    "hold_limits": "postgres",
    "claim_limited": "postgres",
    "limited_tenants": "sqlite",
    "limited_tasks": "sqlite",
    "running_of_tenants": "sqlite",
    "running_of_tasks": "sqlite",
    "claimable_tenants": "sqlite",
    "walk_tenants": "sqlite",
    "claim_candidates": "sqlite",
    "claim_ids": "sqlite",
    "take_tokens": "sqlite",
    "take_task_tokens": "sqlite",
    # The claim's tasks filter: PostgreSQL's gate (do runs of a task the claimer lacks
    # wait?) and its tasks with waiting runs are CTEs of the claim statements; SQLite asks
    # them apart under its write lock, and then reads each task's candidates apart.
    "others_waiting": "sqlite",
    "active_tasks": "sqlite",
    "claim_candidates_of_task": "sqlite",
    # PostgreSQL's limited claim comes back lean (ClaimedRun's columns); Store.claim, which
    # returns whole runs, reads them after it (SQLite's claim reads whole rows itself).
    "runs_by_ids": "postgres",
}
"""The only names one dialect lacks: statements of a hot path whose shape really differs."""


def _params(query: str) -> set[str]:
    """The parameter names of a query in either dialect (``%(name)s`` or ``:name``)."""
    return set(re.findall(r"%\((\w+)\)[sb]", query)) | set(
        re.findall(r"(?<![:\w]):(\w+)", re.sub(r"--[^\n]*", "", query))
    )


def test_both_dialects_define_the_same_query_names() -> None:
    only_postgres = set(POSTGRES) - set(SQLITE)
    only_sqlite = set(SQLITE) - set(POSTGRES)
    assert only_postgres == {n for n, d in HOT_PATH_ONLY.items() if d == "postgres"}
    assert only_sqlite == {n for n, d in HOT_PATH_ONLY.items() if d == "sqlite"}


def test_insert_slot_skip_takes_the_same_parameters_in_both_dialects() -> None:
    expected = {"job_id", "first_slot", "last_slot", "count", "fate", "run_id", "more", "now"}
    assert _params(POSTGRES["insert_slot_skip"]) == expected
    assert _params(SQLITE["insert_slot_skip"]) == expected


def test_the_shared_transitions_take_the_same_parameters_in_both_dialects() -> None:
    shared = set(POSTGRES) & set(SQLITE)
    # The hot paths' statements differ in shape (arrays against one row per statement).
    per_dialect_shape = {
        "claim",
        "claim_candidates",
        "claim_ids",
        "running_of_tenants",
        "running_of_tasks",
        "complete",
        "complete_ids",
        "heartbeat",
        "insert_runs",
        "advance_jobs",
        "insert_slot_skips",
        "due_jobs",
        "unfinished_jobs",
        "cancel_unfinished_runs_of_jobs",
        "trigger_head",
    }
    differing = {
        name
        for name in shared - per_dialect_shape
        if _params(POSTGRES[name]) != _params(SQLITE[name])
    }
    assert differing == set()


def test_no_query_is_a_format_template() -> None:
    """One templating rule: a line ending ``-- only-queues`` is dropped; nothing is
    ``str.format``-ed into SQL."""
    for queries in (POSTGRES, SQLITE):
        for name, query in queries.items():
            assert not re.search(r"\{\w+\}", query), name


def test_both_dialects_filter_queues_in_the_same_queries() -> None:
    def filtered(queries: dict[str, str]) -> set[str]:
        return {n for n, q in queries.items() if ONLY_QUEUES in q}

    assert filtered(SQLITE) == {
        "claimable",  # the claim's predicate, included by the claims below
        "claim",
        "claim_candidates",
        "claim_candidates_of_task",
        "walk_tenants",
        "next_claimable_at",
    }
    assert filtered(POSTGRES) - set(HOT_PATH_ONLY) == filtered(SQLITE) - set(HOT_PATH_ONLY)


def test_both_dialects_filter_tasks_in_the_same_queries() -> None:
    def filtered(queries: dict[str, str]) -> set[str]:
        return {n for n, q in queries.items() if ONLY_TASKS in q}

    assert filtered(SQLITE) == {"claimable", "claim", "claim_candidates", "next_claimable_at"}
    assert filtered(POSTGRES) == {
        "claimable",
        "claim",
        "complete_then_claim",
        "hold_limits",
        "claim_limited",
        "next_claimable_at",
    }


def test_for_claimer_drops_each_filters_lines_only_for_every_queue_or_task() -> None:
    query = "SELECT 1\nWHERE queue = ANY(%(queues)s)  -- only-queues\n  AND t  -- only-tasks"
    assert for_claimer(query, ["a"], ["t"]) == query
    assert for_claimer(query, None, ["t"]) == "SELECT 1\n  AND t  -- only-tasks"
    queues_only = "SELECT 1\nWHERE queue = ANY(%(queues)s)  -- only-queues"
    assert for_claimer(query, ["a"], None) == queues_only
    assert for_claimer(query, None, None) == "SELECT 1"


def test_no_parameter_is_named_only_in_a_comment() -> None:
    """psycopg numbers %(name)s in comments too: one named nowhere else (once the filter
    lines are dropped) would be a parameter of no type, which PostgreSQL refuses."""
    named = re.compile(r"%\((\w+)\)[sb]")
    for name, query in POSTGRES.items():
        for queues, tasks in ((None, None), (None, ["t"]), (["q"], None), (["q"], ["t"])):
            lines = for_claimer(query, queues, tasks).splitlines()
            code = {p for line in lines if not line.lstrip().startswith("--")
                    for p in named.findall(line.split("--")[0])}  # fmt: skip
            comments = {p for line in lines for p in named.findall(line.partition("--")[2])}
            assert comments <= code, (name, queues, tasks)


def test_for_queues_drops_the_filter_lines_only_for_every_queue() -> None:
    query = "SELECT 1\nWHERE queue = ANY(%(queues)s)  -- only-queues\nLIMIT 1"
    assert for_queues(query, ["a"]) == query
    assert for_queues(query, None) == "SELECT 1\nLIMIT 1"


def test_the_claims_include_their_eligibility_predicate_written_once() -> None:
    for queries, names in (
        (POSTGRES, ["claim", "complete_then_claim", "claim_limited"]),
        (SQLITE, ["claim", "claim_candidates"]),
    ):
        predicate = [ln for ln in queries["claimable"].splitlines() if not ln.startswith("--")]
        for name in names:
            assert "include:" not in queries[name], name
            assert all(ln.strip() in queries[name] for ln in predicate), name
