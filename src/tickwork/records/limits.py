"""Tenants' and tasks' limits: the records, their ranges and checks, and :data:`KEEP` for a
field a change leaves as it is."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from tickwork.errors import ValidationError


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """A tenant's limits, enforced when workers claim; ``None`` is no limit.

    ``max_running``: runs of the tenant in state running at once, counted across every
    worker; a run whose worker died counts until its lease expires and it is rescued.
    ``rate``: runs started per second across every worker, a token bucket holding up to
    ``burst`` starts (``burst`` is set only with a rate; unset, it is one second's worth,
    :attr:`bucket`). ``weight``: the tenant's share when tenants with due runs compete for
    claims (default 1).
    """

    tenant: str
    max_running: int | None = None
    rate: float | None = None
    burst: int | None = None
    weight: float = 1.0

    @property
    def bucket(self) -> int | None:
        """The token bucket's size (:func:`bucket_size`); None without a rate."""
        return bucket_size(self.rate, self.burst)

    @property
    def unlimited(self) -> bool:
        """No limit set and the default weight: a tenant the store need not keep a row for."""
        return (
            self.max_running is None
            and self.rate is None
            and self.burst is None
            and self.weight == DEFAULT_WEIGHT
        )


RATE_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
"""Seconds per unit of a rate's text: ``20/s``, ``30/m``, ``100/h``."""


def format_rate(per_second: float) -> str:
    """A rate as people write it: per second from 1 a second up (``20/s``, ``1.5/s``);
    below that per minute or per hour if that is a whole number (``30/m`` for 0.5,
    ``100/h``), else per second (``0.0125/s``). :func:`parse_rate` reads each back."""
    if per_second < 1:
        for unit in ("m", "h"):
            count = per_second * RATE_UNITS[unit]
            if count >= 1 and math.isclose(count, round(count), rel_tol=1e-9):
                return f"{round(count)}/{unit}"
    return f"{per_second:.10g}/s"


def bucket_size(rate: float | None, burst: int | None) -> int | None:
    """A token bucket's size, a tenant's or a task's: ``burst``, or one second's worth of
    ``rate`` (at least 1); None without a rate."""
    if rate is None:
        return None
    return burst if burst is not None else max(1, math.ceil(rate))


@dataclass(frozen=True, slots=True)
class TaskLimits:
    """A task's limits, declared in code (``@app.task(max_running=1, rate="10/s")``) and
    enforced when workers claim, whoever owns the runs; ``None`` is no limit.

    ``max_running``: runs of the task in state running at once, across every worker.
    ``rate``: runs of the task started per second across every worker, a token bucket of
    ``burst`` starts (unset: one second's worth, :attr:`bucket`), as a tenant's rate.
    """

    max_running: int | None = None
    rate: float | None = None
    burst: int | None = None

    @property
    def unlimited(self) -> bool:
        """No limit set: a task the store keeps no row for."""
        return self.max_running is None and self.rate is None and self.burst is None


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """A task now: its limits, and how many of its runs its rate lets start."""

    task: str
    limits: TaskLimits
    starts: int | None = None
    """How many runs its rate lets start now (whole tokens in its bucket); None: no rate."""

    @property
    def rate_held(self) -> bool:
        """No run of this task can start now: its rate's bucket is empty."""
        return self.starts == 0


class Keep(Enum):
    """The type of :data:`KEEP`."""

    KEEP = "KEEP"


KEEP = Keep.KEEP
"""For a field of a change (a limit in :meth:`~tickwork.store.base.Store.set_tenant_limits`,
a part of a calendar in :meth:`~tickwork.store.base.Store.update_calendar`): leave it as it
is."""


@dataclass(frozen=True, slots=True)
class TenantStatus:
    """A tenant now: its limits, its runs in state running, and its queued-and-due runs
    (queued or failed-awaiting-retry with ``run_at`` passed)."""

    limits: TenantLimits
    running: int
    due: int
    starts: int | None = None
    """How many runs its rate lets start now (whole tokens in its bucket); None: no rate."""

    @property
    def tenant(self) -> str:
        return self.limits.tenant

    @property
    def at_limit(self) -> bool:
        """No run of this tenant can be claimed now: it is at its ``max_running``."""
        cap = self.limits.max_running
        return cap is not None and self.running >= cap

    @property
    def rate_held(self) -> bool:
        """No run of this tenant can start now: its rate's bucket is empty."""
        return self.starts == 0

    @property
    def held(self) -> int:
        """Queued-and-due runs its ``max_running`` or its rate keeps from starting now:
        those beyond the room it has left."""
        cap = self.limits.max_running
        rooms = [] if cap is None else [max(0, cap - self.running)]
        rooms += [] if self.starts is None else [self.starts]
        return max(0, self.due - min(rooms)) if rooms else 0


MAX_RUNNING_CEILING = 1_000_000
"""The largest ``max_running`` accepted: far above any cluster's concurrency, and well
inside every store's integer column."""


def check_max_running(value: int | None) -> int | None:
    """``value`` if it is a valid ``max_running`` (a whole number from 1 to
    MAX_RUNNING_CEILING, or None for no limit); ValidationError otherwise."""
    return _check_count("max_running", value)


RATE_FLOOR = 0.00001
RATE_CEILING = 1_000_000.0
"""The range of ``rate``, in runs per second: from about one run a day to a million a
second. The claim refills a bucket by ``rate * elapsed`` with elapsed down to a
microsecond: from RATE_FLOOR that is 1e-11 at least, far from a double's underflow (which
PostgreSQL raises as an error), and at RATE_CEILING a year's refill is still exact."""
WEIGHT_FLOOR = 0.001


WEIGHT_CEILING = 1_000.0
"""The range of ``weight``. Weights are relative, so the range bounds the ratio of two
tenants' shares (a million); the claim divides by it (``rank / weight``, a batch's worth
of ranks at most), which from WEIGHT_FLOOR stays far inside a double (a weight of 1e-310
overflowed it, and PostgreSQL's claim failed)."""
DEFAULT_WEIGHT = 1.0


def check_rate(value: float | None) -> float | None:
    """``value`` if it is a valid ``rate`` (runs per second from RATE_FLOOR to RATE_CEILING,
    or None for no limit); ValidationError otherwise."""
    return _check_range("rate", value, RATE_FLOOR, RATE_CEILING)


def check_weight(value: float | None) -> float:
    """``value`` if it is a valid ``weight`` (from WEIGHT_FLOOR to WEIGHT_CEILING); None is
    the default weight. ValidationError otherwise."""
    checked = _check_range("weight", value, WEIGHT_FLOOR, WEIGHT_CEILING)
    return DEFAULT_WEIGHT if checked is None else checked


def check_burst(value: int | None) -> int | None:
    """``value`` if it is a valid ``burst`` (a whole number from 1 to MAX_RUNNING_CEILING, or
    None for one second's worth of the rate); ValidationError otherwise."""
    return _check_count("burst", value)


def check_tenant_limits(limits: TenantLimits) -> TenantLimits:
    """``limits`` if every field is valid and they agree (a burst needs a rate);
    ValidationError naming the field otherwise."""
    check_max_running(limits.max_running)
    check_rate(limits.rate)
    check_burst(limits.burst)
    check_weight(limits.weight)
    if limits.burst is not None and limits.rate is None:
        raise ValidationError("burst needs a rate: set a rate too, or unset burst", field="burst")
    return limits


def check_task_limits(limits: TaskLimits) -> TaskLimits:
    """``limits`` if every field is valid and they agree (a burst needs a rate);
    ValidationError naming the field otherwise."""
    check_max_running(limits.max_running)
    check_rate(limits.rate)
    check_burst(limits.burst)
    if limits.burst is not None and limits.rate is None:
        raise ValidationError("burst needs a rate: set a rate too, or unset burst", field="burst")
    return limits


def _check_count(field: str, value: int | None) -> int | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_RUNNING_CEILING
    ):
        raise ValidationError(
            f"{field} must be a whole number from 1 to {MAX_RUNNING_CEILING}, not {value!r}",
            field=field,
        )
    return value


def plain(number: float) -> str:
    """A range's end as people write it: 0.00001, 1000000 (not 1e-05, 1e+06)."""
    return format(number, "f").rstrip("0").rstrip(".")


def _check_range(field: str, value: float | None, floor: float, ceiling: float) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not floor <= value <= ceiling
    ):
        raise ValidationError(
            f"{field} must be a number from {plain(floor)} to {plain(ceiling)}, not {value!r}",
            field=field,
        )
    return float(value)
