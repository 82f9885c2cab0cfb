"""The CLI's plain coercion (:class:`tickwork.cli.app.PlainParam`) answers as typer's
pydantic adapter does, for every value it answers at all; the rest goes to the adapter."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from typer._adapters import build_adapter
from typer.models import OptionInfo

from tickwork.cli.app import _NOT_PLAIN, _plain

BOUNDS = st.one_of(st.none(), st.integers(-50, 50))
VALUES = st.one_of(
    st.text(max_size=25),
    st.from_regex(r"\A[-+ ]?[0-9_ ]{0,22}\Z"),
    st.integers(-(10**20), 10**20),
    st.booleans(),
    st.none(),
)


def typers(annotation: type, info: OptionInfo, value: Any) -> Any:
    return build_adapter(annotation, info).validate_python(value)


@given(annotation=st.sampled_from([str, int, bool]), low=BOUNDS, high=BOUNDS, value=VALUES)
def test_a_plain_answer_is_the_adapters_answer(
    annotation: type, low: int | None, high: int | None, value: Any
) -> None:
    info = OptionInfo(min=low, max=high)
    plain = _plain(annotation, info, value)
    if plain is _NOT_PLAIN:
        return
    expected = typers(annotation, info, value)
    assert plain == expected
    assert type(plain) is type(expected)


def test_the_values_a_command_line_gives_are_answered_plainly() -> None:
    info = OptionInfo(min=1, max=1000)
    assert _plain(int, info, "5") == 5
    assert _plain(int, info, "0005") == 5
    assert _plain(int, OptionInfo(), "-3") == -3
    assert _plain(str, OptionInfo(), "Europe/Berlin") == "Europe/Berlin"
    assert _plain(int, info, "0") is _NOT_PLAIN  # out of bounds: typer's message
    assert _plain(int, info, "abc") is _NOT_PLAIN
    assert _plain(bool, OptionInfo(), "1") is _NOT_PLAIN  # an env var's text: typer reads it
