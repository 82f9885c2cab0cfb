"""What an attempt came to: the one value the executor, the reporter, the fault injector
and the spans pass between them (here, so that none of them imports another for it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tickwork.records import AttemptEnd


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an attempt came to. A failure's ``error`` is its exception line (``Type:
    message``) or why the worker failed it, ``traceback`` the handler's when it raised, and
    ``ended`` how its record in the run's history says it ended (``Store.fail``)."""

    succeeded: bool
    result: dict[str, Any] | None = None
    error: str | None = None
    retry_after: timedelta | None = None
    discard: bool = False
    traceback: str | None = None
    ended: AttemptEnd = AttemptEnd.FAILED
