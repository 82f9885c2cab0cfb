"""Pages of a listing (:class:`Page`, with its limits) and the bounds and filters of a bulk
retry or cancel."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypedDict, TypeVar

from tickwork.errors import ValidationError

DEFAULT_PAGE = 100
"""Rows in one page of a listing when the caller names no limit."""
MAX_PAGE = 1000
"""The most rows one page of a listing may hold."""
T = TypeVar("T")
When = TypeVar("When")
MAX_BULK = 10_000
"""The most runs one bulk retry or cancel may change; a filter matching more is refused
whole (narrow it, or raise ``max_count`` up to this)."""
DEFAULT_BULK = 1000
"""The bulk operations' ``max_count`` when the caller names none."""


class RunFilter(TypedDict, Generic[When], total=False):
    """The filters of a bulk retry or cancel, as keywords; each one given must match
    (``since <= scheduled_for < until``). ``When`` is ``datetime`` in the store, and
    datetime or ISO-8601 text (:data:`tickwork.inputs.Instant`) in the client."""

    tenant: str | None
    job_id: int | None
    task: str | None
    queue: str | None
    since: When | None
    until: When | None
    error: str | None  # the run's error holds this text, in any case


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing: ``for run in client.dead_runs()`` walks its ``items`` (this
    page only: pass ``next_cursor`` as ``after`` for the next), ``len(page)`` counts them."""

    items: list[T]
    next_cursor: int | None  # pass as `after` for the next page; None: this was the last

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def page_of(items: list[T], limit: int, cursor: Callable[[T], int]) -> Page[T]:
    """A page of up to ``limit`` from ``items``, read with one row more than ``limit``:
    that row, when it came, says there is a next page (so a listing that ends exactly at a
    page's end gives no cursor to an empty page)."""
    if len(items) <= limit:
        return Page(items, None)
    del items[limit:]
    return Page(items, cursor(items[-1]))


def page_limit(limit: int) -> int:
    """``limit`` for a listing, or ValidationError outside 1..MAX_PAGE."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValidationError(f"limit must be between 1 and {MAX_PAGE}, got {limit}", field="limit")
    return limit


def bulk_limit(max_count: int) -> int:
    """``max_count`` for a bulk command, or ValidationError outside 1..MAX_BULK."""
    if isinstance(max_count, bool) or not isinstance(max_count, int):
        raise ValidationError(
            f"max_count must be a whole number, got {max_count!r}", field="max_count"
        )
    if not 1 <= max_count <= MAX_BULK:
        raise ValidationError(
            f"max_count must be between 1 and {MAX_BULK}, got {max_count}", field="max_count"
        )
    return max_count
