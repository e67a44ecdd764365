"""Measuring a :class:`~dogs_core.runtime.plumbing.clock.ServerClock`'s offset against its store.

``_async/clock_sync.py`` is the source of truth; ``_sync/clock_sync.py`` (for the sync client)
is generated from it by ``scripts/generate_sync.py``.
"""

from __future__ import annotations

import logging

from dogs_core.domain.clock_offset import SAMPLES_PER_MEASUREMENT, ClockSample
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.clock import ServerClock

__all__ = ["ensure_clock", "sync_clock"]

logger = logging.getLogger("dogs.clock")


async def sync_clock(store: AsyncJobStore, clock: ServerClock) -> bool:
    """Measure ``clock``'s offset to ``store`` when it is due (never with ``interval=None``): a
    few timed ``server_time`` reads, the tightest kept. A store error propagates with the offset
    in force unchanged, and the measurement stays due. Returns whether the offset changed."""
    local = clock.local
    if not clock.tracker.due(local.now()):
        return False
    before = clock.offset
    samples: list[ClockSample] = []
    for _ in range(SAMPLES_PER_MEASUREMENT):
        sent = local.now()
        server = await store.server_time()
        received = local.now()
        if server is None:
            break
        samples.append(ClockSample(sent, server, received))
    if clock.tracker.adopt(samples, local.now()):
        estimate = clock.tracker.estimate
        assert estimate is not None  # adopt warns only about a measured offset
        skew = -estimate.offset.total_seconds()
        logger.warning(
            "this machine's clock is %.3f s %s the database's (+- %.3f s): lock and run times "
            "are computed on the database's clock; fix this machine's clock (NTP)",
            abs(skew),
            "ahead of" if skew > 0 else "behind",
            estimate.uncertainty.total_seconds(),
        )
    return clock.offset != before


async def ensure_clock(store: AsyncJobStore, clock: ServerClock, *, deadline: float | None) -> bool:
    """A client's measurement before a call that computes times, when one is due: retried like
    the call itself, within its ``deadline`` (so a database that is down fails the call once,
    within ``operation_timeout``). Returns whether the offset changed. Not due (nearly every
    call), it returns at once, without entering the retry loop."""
    if not clock.tracker.due(clock.local.now()):
        return False
    return await retry_transient(
        lambda: sync_clock(store, clock), what="clock sync", deadline=deadline
    )
