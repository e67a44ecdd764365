"""Claiming ahead: slots claimed beyond the free ones while jobs are shorter than a claim.

A claim reserves the slots its jobs will run in, so while it is in flight those slots wait. When
jobs take longer than a claim's round trip that wait is a small part of a slot's time; when they
take less (short jobs against a remote database) most of a slot's time is spent waiting for the
next claim, and the worker runs far below its ``workers_count``. Claiming ahead lets the next
claim fly while the jobs of the last one run: the ledger holds up to ``ceiling`` slots beyond
``workers_count``, and jobs claimed into them wait in a queue of the worker until a slot frees
(about one job's duration, shorter than a claim by construction). As soon as jobs take longer
than a claim, claiming ahead stops: a job must not wait in a queue for long while its lock runs;
so it does against a store that answers claims within :data:`MIN_CLAIM_SECONDS`.

Both durations are exponentially weighted moving averages of what the runtime observed (loop
seconds): a claim's round trip, and a job's time from its start to its free slot.
"""

from __future__ import annotations

import math

from dogs_core.errors import InvalidOptionError

__all__ = ["MIN_CLAIM_SECONDS", "Lookahead"]

_WEIGHT = 0.1  # of each new observation in the moving averages
#: Claims faster than this (an in-process store) are not worth claiming ahead of: the queue
#: costs more CPU than the wait it saves (measured: 12,000 against 10,000 no-op jobs/s).
MIN_CLAIM_SECONDS = 0.002


class Lookahead:
    """How many slots to claim beyond ``workers_count`` (see the module docstring)."""

    __slots__ = ("_ceiling", "_claim", "_job")

    def __init__(self, ceiling: int) -> None:
        if isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling < 0:
            raise InvalidOptionError("ceiling", ceiling, "must be an int >= 0")
        self._ceiling = ceiling
        self._claim: float | None = None
        self._job: float | None = None

    @property
    def extra_slots(self) -> int:
        """``ceiling`` while jobs have been shorter than claims taking at least
        :data:`MIN_CLAIM_SECONDS`, else 0 (and before both were seen)."""
        claim, job = self._claim, self._job
        if claim is None or job is None or claim < MIN_CLAIM_SECONDS:
            return 0
        return self._ceiling if job < claim else 0

    @property
    def claim_seconds(self) -> float | None:
        return self._claim

    @property
    def job_seconds(self) -> float | None:
        return self._job

    def claim_took(self, seconds: float) -> None:
        """A claim came back after ``seconds`` (hit or miss)."""
        self._claim = _average(self._claim, _seconds("seconds", seconds))

    def job_took(self, seconds: float) -> None:
        """A job's handler ended ``seconds`` after it started (called once per job: the common
        case, a float, is checked without a call)."""
        if seconds.__class__ is not float or not 0 <= seconds < math.inf:
            seconds = _seconds("seconds", seconds)
        current = self._job
        self._job = seconds if current is None else current + _WEIGHT * (seconds - current)


def _average(current: float | None, observed: float) -> float:
    return observed if current is None else current + _WEIGHT * (observed - current)


def _seconds(field: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise InvalidOptionError(field, value, "must be a finite number of seconds >= 0")
    return float(value)
