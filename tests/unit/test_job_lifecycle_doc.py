"""docs/job-lifecycle.md draws the state machines the code enforces; the glossary defines
each word once."""

from __future__ import annotations

import re
from pathlib import Path

from tickwork.job import RUN_TRANSITIONS, JobState, RunState, ScheduleState
from tickwork.store.base import Store

DOCS = Path(__file__).resolve().parents[2] / "docs"
EDGE = re.compile(r"^\s*(\S+) --> (\S+): (.+)$")
START_OR_END = "[*]"


def diagrams() -> list[list[tuple[str, str, list[str]]]]:
    text = (DOCS / "job-lifecycle.md").read_text()
    blocks = re.findall(r"```mermaid\n(.*?)```", text, flags=re.S)
    return [
        [
            (m[1], m[2], [label.strip() for label in m[3].split("/")])
            for m in map(EDGE.match, block.splitlines())
            if m
        ]
        for block in blocks
    ]


def test_run_diagram_draws_exactly_the_allowed_transitions() -> None:
    runs = diagrams()[0]
    drawn = {(a, b) for a, b, _ in runs if START_OR_END not in (a, b)}
    allowed = {(src.value, dst.value) for src, dsts in RUN_TRANSITIONS.items() for dst in dsts}
    assert drawn == allowed


def test_runs_are_born_queued_and_only_finished_runs_are_pruned() -> None:
    runs = diagrams()[0]
    assert {b for a, b, _ in runs if a == START_OR_END} == {RunState.QUEUED.value}
    assert {a for a, b, _ in runs if b == START_OR_END} == {"succeeded", "dead", "cancelled"}


def test_schedule_diagram_uses_only_schedule_states() -> None:
    jobs = diagrams()[1]
    states = {s for a, b, _ in jobs for s in (a, b)} - {START_OR_END}
    assert states == {state.value for state in ScheduleState}


def test_the_job_state_table_names_every_job_state() -> None:
    text = (DOCS / "job-lifecycle.md").read_text()
    table = text[text.index("| The job | Its state | When |") : text.index("### The schedule")]
    rows = [line.split("|")[2] for line in table.splitlines()[2:] if line.startswith("|")]
    assert set(re.findall(r"`([a-z]+)`", "".join(rows))) == {state.value for state in JobState}


def test_every_edge_is_labelled_with_store_methods() -> None:
    for diagram in diagrams():
        for a, b, labels in diagram:
            for label in labels:
                assert callable(getattr(Store, label, None)), f"{a} --> {b}: {label!r}"


def test_glossary_defines_each_word_once() -> None:
    words = re.findall(r"^\| \*\*([a-z ]+)\*\* \|", (DOCS / "glossary.md").read_text(), re.M)
    assert len(words) > 40
    assert len(words) == len(set(words)), sorted(w for w in words if words.count(w) > 1)


def test_glossary_names_every_run_and_job_state_transition_word() -> None:
    text = (DOCS / "glossary.md").read_text()
    for word in (
        "claim",
        "heartbeat",
        "complete",
        "fail",
        "retry",
        "rescue",
        "release",
        "cancel",
        "pause",
        "resume",
        "prune",
        "trigger",
        "submit",
    ):
        assert f"| **{word}** |" in text, word
