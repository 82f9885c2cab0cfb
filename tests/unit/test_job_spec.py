"""JobSpec validation, args limits, and the run state machine's table."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tickwork.errors import InvalidArgs, ValidationError
from tickwork.job import (
    FINISHED_RUN_STATES,
    MAX_ARGS_BYTES,
    MAX_ARGS_DEPTH,
    RUN_TRANSITIONS,
    TOO_DEEP,
    JobSpec,
    MisfirePolicy,
    OverlapPolicy,
    RunState,
    can_transition,
    check_args,
    parse_args,
    shown_json,
)
from tickwork.schedule import Once

SOON = Once(delay=timedelta(seconds=1))


def spec(**overrides: Any) -> JobSpec:
    fields: dict[str, Any] = {"task": "send_report", "schedule": SOON}
    fields.update(overrides)
    return JobSpec(**fields)


def args_of_encoded_size(size: int) -> dict[str, Any]:
    """``{"k":"xxx..."}``: 8 bytes of JSON around the string."""
    return {"k": "x" * (size - 8)}


# -- args ------------------------------------------------------------------------------------


def test_args_default_to_an_empty_object() -> None:
    assert spec().args == {}
    assert spec().args_json == "{}"


def test_args_json_is_compact_and_sorted() -> None:
    assert spec(args={"b": 1, "a": [1, 2]}).args_json == '{"a":[1,2],"b":1}'


@pytest.mark.parametrize(("args", "kind"), [([1, 2], "list"), ("x", "str"), (None, "NoneType")])
def test_args_that_are_not_an_object_are_rejected(args: object, kind: str) -> None:
    with pytest.raises(InvalidArgs, match=f"args must be a JSON object, got {kind}") as caught:
        spec(args=args)
    assert caught.value.field == "args"


@pytest.mark.parametrize(
    "args",
    [{"when": datetime(2026, 1, 1, tzinfo=UTC)}, {"ids": {1, 2}}, {"ratio": float("nan")}],
    ids=["datetime", "set", "nan"],
)
def test_args_that_are_not_json_serialisable_are_rejected(args: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgs, match="args are not JSON-serialisable"):
        spec(args=args)


def test_args_of_exactly_256_kib_are_accepted() -> None:
    args = args_of_encoded_size(256 * 1024)
    assert len(json.dumps(args, separators=(",", ":")).encode()) == 256 * 1024
    assert spec(args=args).args == args


def test_args_one_byte_over_256_kib_are_rejected_with_both_sizes() -> None:
    with pytest.raises(InvalidArgs, match="args are 262145 bytes encoded; the limit is 262144"):
        spec(args=args_of_encoded_size(256 * 1024 + 1))


def test_args_limit_can_be_lowered_per_job() -> None:
    with pytest.raises(InvalidArgs, match="the limit is 100 bytes"):
        spec(args=args_of_encoded_size(101), max_args_bytes=100)


def test_default_args_limit_is_256_kib() -> None:
    assert MAX_ARGS_BYTES == 262_144
    check_args(args_of_encoded_size(MAX_ARGS_BYTES))
    with pytest.raises(InvalidArgs):
        check_args(args_of_encoded_size(MAX_ARGS_BYTES + 1))


def test_args_text_is_parsed_as_a_json_object() -> None:
    assert parse_args('{"to": "ops@example.com"}') == {"to": "ops@example.com"}


@pytest.mark.parametrize(
    ("text", "message"),
    [("{to: 1}", "args are not valid JSON"), ("[1]", "args must be a JSON object, got list")],
)
def test_bad_args_text_is_rejected(text: str, message: str) -> None:
    with pytest.raises(InvalidArgs, match=message):
        parse_args(text)


def nested(depth: int) -> dict[str, Any]:
    """Args whose containers nest ``depth`` deep, the args object itself included."""
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    return {"k": value}


def test_nested_counts_the_args_object_as_the_first_level() -> None:
    assert nested(1) == {"k": 1}
    assert nested(3) == {"k": [[1]]}


def test_args_nested_as_deep_as_the_limit_are_accepted() -> None:
    assert spec(args=nested(MAX_ARGS_DEPTH)).args == nested(MAX_ARGS_DEPTH)


@pytest.mark.parametrize("depth", [MAX_ARGS_DEPTH + 1, 256, 5000])
def test_args_nested_deeper_than_the_limit_are_refused_naming_the_limit(depth: int) -> None:
    with pytest.raises(InvalidArgs, match=f"nested deeper than {MAX_ARGS_DEPTH} levels"):
        check_args(nested(depth))


@pytest.mark.parametrize("depth", [MAX_ARGS_DEPTH + 1, 256, 5000, 100_000])
def test_args_text_nested_deeper_than_the_limit_is_refused(depth: int) -> None:
    text = '{"k": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"

    with pytest.raises(InvalidArgs, match=f"nested deeper than {MAX_ARGS_DEPTH} levels"):
        parse_args(text)


def test_a_shown_value_is_cut_where_it_nests_too_deep_and_keeps_the_rest() -> None:
    deep = nested(5000)
    deep["url"] = "https://example.com/"

    shown = shown_json(deep, depth=3)

    assert shown == {"k": [[TOO_DEEP]], "url": "https://example.com/"}
    assert json.loads(json.dumps(shown, allow_nan=False)) == shown


def test_a_shown_value_has_text_and_numbers_every_encoder_can_write() -> None:
    value = {"lone": "a\ud800b", "\udfff": [float("nan"), float("inf"), 1.5], "ok": "é"}

    shown = shown_json(value)

    assert shown == {"lone": "a\ufffdb", "\ufffd": [None, None, 1.5], "ok": "é"}
    json.dumps(shown, allow_nan=False).encode()


def test_a_shown_value_within_bounds_is_the_value_itself() -> None:
    value = {"a": [1, {"b": None, "c": True}], "d": "text", "e": 2.5}

    assert shown_json(value) == value


# -- other fields ----------------------------------------------------------------------------


@pytest.mark.parametrize("priority", [-1000, 0, 1000])
def test_priority_within_range_is_accepted(priority: int) -> None:
    assert spec(priority=priority).priority == priority


@pytest.mark.parametrize("priority", [-1001, 1001])
def test_priority_out_of_range_is_rejected(priority: int) -> None:
    with pytest.raises(ValidationError, match="priority must be between -1000 and 1000") as c:
        spec(priority=priority)
    assert c.value.field == "priority"


@pytest.mark.parametrize("priority", [1.0, 2.5, True, "3", None])
def test_priority_that_is_not_an_integer_is_rejected(priority: object) -> None:
    # A float or a bool would reach the store's integer column (and an equal int's bulk
    # template); it is refused here, with the field named.
    with pytest.raises(ValidationError, match="priority must be an integer") as c:
        spec(priority=priority)
    assert c.value.field == "priority"


@pytest.mark.parametrize("field", ["task", "tenant", "queue", "name", "idempotency_key"])
@pytest.mark.parametrize(
    "value",
    [
        "",
        " padded",
        "padded ",
        "two\nlines",
        "tab\there",
        "nul\x00",
        "esc\x1b[2J",
        "del\x7f",
        "c1\x85",
        "right\u202eto-left",
        "isolate\u2066d\u2069",
        "x" * 201,
        42,
    ],
    ids=[
        "empty",
        "leading",
        "trailing",
        "newline",
        "tab",
        "nul",
        "escape",
        "delete",
        "c1-control",
        "bidi-override",
        "bidi-isolate",
        "too-long",
        "not-str",
    ],
)
def test_bad_label_is_rejected_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as caught:
        spec(**{field: value})
    assert caught.value.field == field
    assert caught.value.message.startswith(field)


def test_label_of_200_characters_is_accepted() -> None:
    assert spec(name="n" * 200).name == "n" * 200


def test_a_label_in_a_right_to_left_script_is_accepted() -> None:
    assert spec(name="גיבוי לילי").name == "גיבוי לילי"


def test_policies_given_as_strings_become_enums() -> None:
    job = spec(misfire="all", overlap="forbid")
    assert job.misfire is MisfirePolicy.ALL
    assert job.overlap is OverlapPolicy.FORBID


@pytest.mark.parametrize(
    ("field", "choices"), [("misfire", "skip, once, all"), ("overlap", "allow, forbid, replace")]
)
def test_unknown_policy_is_rejected_listing_the_choices(field: str, choices: str) -> None:
    with pytest.raises(ValidationError, match=f"{field} must be one of {choices}, got 'bogus'"):
        spec(**{field: "bogus"})


@pytest.mark.parametrize("timeout", [timedelta(0), timedelta(seconds=-1)])
def test_timeout_must_be_positive(timeout: timedelta) -> None:
    with pytest.raises(ValidationError, match="timeout must be positive"):
        spec(timeout=timeout)


def test_negative_misfire_grace_is_rejected() -> None:
    with pytest.raises(ValidationError, match="misfire_grace must not be negative"):
        spec(misfire_grace=timedelta(seconds=-1))


# -- run transitions -------------------------------------------------------------------------


def test_finished_runs_never_change_except_dead_runs_retried_by_an_operator() -> None:
    assert not RUN_TRANSITIONS[RunState.SUCCEEDED]
    assert not RUN_TRANSITIONS[RunState.CANCELLED]
    assert RUN_TRANSITIONS[RunState.DEAD] == {RunState.QUEUED}
    assert set(FINISHED_RUN_STATES) == {RunState.SUCCEEDED, RunState.DEAD, RunState.CANCELLED}


def test_only_a_claim_makes_a_run_running() -> None:
    into_running = {src for src, dsts in RUN_TRANSITIONS.items() if RunState.RUNNING in dsts}
    assert into_running == {RunState.QUEUED, RunState.FAILED}


def test_queued_run_cannot_finish_without_running() -> None:
    assert not can_transition(RunState.QUEUED, RunState.SUCCEEDED)
    assert not can_transition(RunState.QUEUED, RunState.DEAD)
    assert can_transition(RunState.QUEUED, RunState.CANCELLED)


def test_every_state_has_a_row_in_the_transition_table() -> None:
    assert set(RUN_TRANSITIONS) == set(RunState)
