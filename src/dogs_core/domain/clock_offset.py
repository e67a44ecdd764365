"""How far the application clock is from the database's clock, from timed samples.

Lock expiry and eligibility are decided with one "now" that every worker must share: a worker
whose clock runs 60 s fast takes live locks for expired ones and runs a job twice. Oban and River
ask the database for its ``now()``; a MongoDB claim could do the same only with ``$expr``
filters, which the claim's partition indexes do not serve. Instead each process measures the
offset between its clock and the server's (the ``localTime`` of ``hello``) and adds it to every
time it computes, so the filters keep their constants and their index plans.

A sample is NTP's simplest form: the local time ``sent`` just before the request, the server's
time in the reply, and the local time ``received`` just after. The server read its clock
somewhere between the two, so the offset is ``server - midpoint`` give or take half the round
trip. Of a few samples the one with the shortest round trip is the tightest, and is kept.

:class:`ClockOffsetTracker` is the sans-I/O machine the runtime drives: it says when to sample
again, takes the samples of one measurement, and says whether the offset is worth a warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = [
    "DEFAULT_CLOCK_SYNC_INTERVAL",
    "SAMPLES_PER_MEASUREMENT",
    "SERVER_RESOLUTION",
    "SKEW_WARNING",
    "ClockOffsetTracker",
    "ClockSample",
    "OffsetEstimate",
    "best_estimate",
]

#: How often a process measures the offset again (clocks drift, and NTP steps them).
DEFAULT_CLOCK_SYNC_INTERVAL = timedelta(seconds=60)
#: Round trips per measurement; the shortest wins.
SAMPLES_PER_MEASUREMENT = 3
#: The server's clock reads in whole milliseconds (MongoDB's dates).
SERVER_RESOLUTION = timedelta(milliseconds=1)
#: An offset at least this large is logged as a WARNING (once, and again when it moves by as much).
SKEW_WARNING = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class ClockSample:
    """One timed read of the server's clock: local ``sent``, the server's ``server``, local
    ``received`` (all timezone-aware)."""

    sent: datetime
    server: datetime
    received: datetime

    @property
    def round_trip(self) -> timedelta:
        return max(self.received - self.sent, timedelta(0))

    @property
    def offset(self) -> timedelta:
        """Server time minus local time at the midpoint of the round trip."""
        return self.server - (self.sent + self.round_trip / 2)


@dataclass(frozen=True, slots=True)
class OffsetEstimate:
    """``offset`` to add to the local clock to get the server's; the true offset lies within
    ``offset +- uncertainty`` (half the round trip of the sample it came from, plus the
    server's resolution), or within twice that of an offset taken as zero."""

    offset: timedelta
    uncertainty: timedelta


def best_estimate(samples: Sequence[ClockSample]) -> OffsetEstimate | None:
    """The estimate of the sample with the shortest round trip, or ``None`` without samples.

    An offset within its own uncertainty cannot be told from none and is taken as zero (the
    error is then at most twice the uncertainty, a millisecond or two): two clocks that agree
    (one machine, or NTP-synced ones) then compute exactly the same times."""
    if not samples:
        return None
    best = min(samples, key=lambda sample: sample.round_trip)
    uncertainty = best.round_trip / 2 + SERVER_RESOLUTION
    offset = best.offset if abs(best.offset) > uncertainty else timedelta(0)
    return OffsetEstimate(offset, uncertainty)


class ClockOffsetTracker:
    """When to measure, and the offset in force.

    ``due(now)`` is true before the first measurement and once ``interval`` has passed since the
    last one (``now`` is the local clock). ``adopt(samples, now)`` takes a measurement: the best
    sample's offset replaces the current one, and the return value says whether to warn about it
    (its size reached :data:`SKEW_WARNING` and moved by at least as much since the last warning).
    A measurement without samples (the store has no clock of its own, or every read failed)
    keeps the offset in force and is retried at the next interval.
    """

    def __init__(self, interval: timedelta | None = DEFAULT_CLOCK_SYNC_INTERVAL) -> None:
        self.interval = interval
        self.offset = timedelta(0)
        self.estimate: OffsetEstimate | None = None
        self._measured_at: datetime | None = None
        self._warned_offset: timedelta | None = None

    def due(self, now: datetime) -> bool:
        if self.interval is None:
            return False
        if self._measured_at is None:
            return True
        return now - self._measured_at >= self.interval or now < self._measured_at

    def adopt(self, samples: Sequence[ClockSample], now: datetime) -> bool:
        self._measured_at = now
        estimate = best_estimate(samples)
        if estimate is None:
            return False
        self.estimate = estimate
        self.offset = estimate.offset
        return self._worth_warning(estimate.offset)

    def _worth_warning(self, offset: timedelta) -> bool:
        if abs(offset) < SKEW_WARNING:
            return False
        if self._warned_offset is not None and abs(offset - self._warned_offset) < SKEW_WARNING:
            return False
        self._warned_offset = offset
        return True
