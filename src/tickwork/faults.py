"""Fault injection for staging: the faults a worker can inject, and their rates.

``tickwork worker --inject-faults 'crash-after-handler=0.05,stall-past-lease=0.02,fail=0.1'``
(or ``TICKWORK_INJECT_FAULTS``) makes a worker fail on purpose, so that a handler's
side effects can be shown deduplicated before production shows it. For each run it
claims, the worker draws once: with the probability given, the attempt gets one fault
(at most one; the rates add up to at most 1):

- ``crash-after-handler``: the worker process exits right after the handler returned,
  before the completion is written. The run is rescued when its lease expires and runs
  again: the case that makes handlers run twice. Runs whose handlers this process had
  started and not yet reported are re-executed too, and are marked with it.
- ``stall-past-lease``: the handler returned, and the attempt stops heartbeating and
  holds its outcome back past its lease (a worker paused right then: a long GC, a VM
  migration), so the run is rescued and runs again elsewhere; the zombie's late outcome
  is refused (fenced).
- ``fail``: the handler runs, then the attempt fails as if the handler had raised: the
  run is retried (the handler's side effects happened once already).

Each injected fault is marked on its run (``tickwork runs --injected`` lists the runs
that executed more than once because of one). A worker refuses to inject faults on a
database that has not opted in with ``tickwork db allow-fault-injection``, and a running
one stops within a heartbeat interval of ``--revoke`` (it re-reads the opt-in; a new grant
makes it inject again: :mod:`tickwork.worker.faults`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from datetime import datetime

from tickwork.errors import ValidationError

INJECT_FAULTS_FLAG = "--inject-faults"
CRASH_AFTER_HANDLER = "crash-after-handler"
STALL_PAST_LEASE = "stall-past-lease"
FAIL = "fail"
FAULTS = (CRASH_AFTER_HANDLER, STALL_PAST_LEASE, FAIL)
"""Every fault's name, as the flag, the marks and the docs spell it."""


@dataclass(frozen=True, slots=True)
class FaultRates:
    """The probability of each fault per claimed run (0 to 1, together at most 1)."""

    crash_after_handler: float = 0.0
    stall_past_lease: float = 0.0
    fail: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1):
                raise ValidationError(
                    f"{INJECT_FAULTS_FLAG}: {_name(f.name)} must be a probability from 0 to 1, "
                    f"got {value!r}",
                    field="inject_faults",
                )
        if self.total > 1:
            raise ValidationError(
                f"{INJECT_FAULTS_FLAG}: the rates add up to {self.total:g}; at most 1 "
                "(an attempt gets one fault at most)",
                field="inject_faults",
            )

    @property
    def total(self) -> float:
        return self.crash_after_handler + self.stall_past_lease + self.fail

    @classmethod
    def parse(cls, text: str) -> FaultRates:
        """``name=rate`` pairs, comma-separated: ``crash-after-handler=0.05,fail=0.1``."""
        rates: dict[str, float] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name, eq, raw = part.partition("=")
            name = name.strip()
            if not eq or name not in FAULTS:
                raise ValidationError(
                    f"{INJECT_FAULTS_FLAG} {text!r}: {part!r} is not FAULT=RATE with a fault "
                    f"among {', '.join(FAULTS)}",
                    field="inject_faults",
                )
            if name in rates:
                raise ValidationError(
                    f"{INJECT_FAULTS_FLAG} {text!r}: {name} is given twice", field="inject_faults"
                )
            try:
                rates[name] = float(raw)
            except ValueError:
                raise ValidationError(
                    f"{INJECT_FAULTS_FLAG} {text!r}: {name}'s rate {raw.strip()!r} is not a number",
                    field="inject_faults",
                ) from None
        if not rates:
            raise ValidationError(
                f"{INJECT_FAULTS_FLAG} {text!r} names no fault", field="inject_faults"
            )
        return cls(**{_field(name): rate for name, rate in rates.items()})

    def pick(self, draw: float) -> str | None:
        """The fault a uniform ``draw`` in [0, 1) lands on, or None (most draws)."""
        edge = 0.0
        for name in FAULTS:
            edge += getattr(self, _field(name))
            if draw < edge:
                return name
        return None

    def describe(self) -> str:
        return ",".join(f"{name}={getattr(self, _field(name)):g}" for name in FAULTS)


@dataclass(frozen=True, slots=True)
class InjectedFault:
    """A fault injected into one attempt of a run, as marked on the run."""

    attempt: int
    fault: str
    at: datetime
    worker: str
    by_run: int | None = None
    """For a crash: the run whose handler's return the worker crashed after, when that is
    another run (this one was executing in the same process, and is re-executed too)."""


def _field(name: str) -> str:
    return name.replace("-", "_")


def _name(field: str) -> str:
    return field.replace("_", "-")
