"""Pacing of the partition reconciler (docs/concepts.md#partitions-and-the-rotation).

The reconciler gives a valid partition to records that have none (legacy records, records
written by a process with another ``n_partitions``). It runs once at start, then repeatedly:
while batches come back full there is probably more to repair, so it continues after a short
pause that leaves the database room for claims; otherwise it sleeps for minutes, with jitter so
that instances started together do not scan together.

Only the delay policy lives here; the runtime owns the timer and the store does the repair.
"""

from __future__ import annotations

import math
from datetime import timedelta

from dogs_core.errors import InvalidOptionError

__all__ = [
    "BATCH_SIZE",
    "FULL_BATCH_PAUSE",
    "IDLE_INTERVAL",
    "MAX_JITTER",
    "STARTUP_DELAY",
    "next_reconcile_delay",
]

BATCH_SIZE = 500
"""Records selected (``_id`` only) and repaired per pass."""

FULL_BATCH_PAUSE = timedelta(milliseconds=250)
"""Pause after a full batch: more records probably need repair, but claims come first."""

IDLE_INTERVAL = timedelta(minutes=5)
"""Base wait after a partial batch or a failure: nothing (or nothing reachable) is left."""

MAX_JITTER = timedelta(seconds=30)
"""Upper bound (exclusive) of the uniform jitter added to :data:`IDLE_INTERVAL`."""

STARTUP_DELAY = timedelta(0)
"""The first pass runs immediately when the workers start."""

_MAX_JITTER_US = MAX_JITTER // timedelta(microseconds=1)


def next_reconcile_delay(
    modified: int | None, jitter_fraction: float, batch_size: int = BATCH_SIZE
) -> timedelta:
    """How long to wait before the next reconciler pass.

    ``modified`` is the count the last pass reported, or ``None`` when it failed (a failure is
    logged by the runtime and counts as 0, so a failing database is retried at the slow pace).
    A count ``>= batch_size`` means the batch was full: wait :data:`FULL_BATCH_PAUSE`.
    Otherwise wait :data:`IDLE_INTERVAL` plus ``jitter_fraction * MAX_JITTER``, truncated to
    whole microseconds, so the result is in ``[5 min, 5 min 30 s)``.

    Dogs passes the *modified* count. A runtime may pass the number of ids the scan returned
    instead: a record claimed between scan and repair makes its compare-and-set miss, so a full
    scan can report fewer modifications although more records are waiting.

    ``jitter_fraction`` must be in ``[0, 1)``, as ``random.Random.random()`` returns.
    """
    if modified is not None and (
        isinstance(modified, bool) or not isinstance(modified, int) or modified < 0
    ):
        raise InvalidOptionError("modified", modified, "must be None or an int >= 0")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidOptionError("batch_size", batch_size, "must be an int >= 1")
    if (
        isinstance(jitter_fraction, bool)
        or not isinstance(jitter_fraction, int | float)
        or not 0 <= jitter_fraction < 1
    ):
        raise InvalidOptionError("jitter_fraction", jitter_fraction, "must be a float in [0, 1)")

    if modified is not None and modified >= batch_size:
        return FULL_BATCH_PAUSE
    # Integer microseconds, capped one below the maximum: float rounding can never reach it.
    jitter_us = min(math.floor(jitter_fraction * _MAX_JITTER_US), _MAX_JITTER_US - 1)
    return IDLE_INTERVAL + timedelta(microseconds=jitter_us)
