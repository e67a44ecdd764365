"""One fenced write at a time, for tests and a custom store's own checks: the settle role's
``settle_many`` of one :class:`~dogs_core.domain.settle.Settlement`, and the commands a test
writes most, built with the defaults a store ignores (the history status is the runtime's, not
the store's).

The runtime always settles in batches (:mod:`dogs_core.runtime.execution.settle`); a test that
means one
record and one lock says so in one call::

    assert await settle_one(store, job_id, lock_id, released(T0))
"""

from __future__ import annotations

from datetime import datetime

from dogs_core.domain.outcome import (
    Command,
    Defer,
    Delete,
    DemoteStale,
    MarkTerminal,
    Release,
    Reschedule,
)
from dogs_core.domain.records import HistoryStatus
from dogs_core.domain.settle import Settlement
from dogs_core.ports import AsyncSettleStore, SettleStore

__all__ = [
    "completed",
    "deferred",
    "demoted",
    "released",
    "rescheduled",
    "settle_one",
    "settle_one_sync",
    "terminal",
]


async def settle_one(store: AsyncSettleStore, job_id: str, lock_id: str, command: Command) -> bool:
    """``command`` for record ``job_id`` fenced by ``lock_id``: whether it was applied."""
    (verdict,) = await store.settle_many([Settlement(job_id, lock_id, command)])
    return verdict


def settle_one_sync(store: SettleStore, job_id: str, lock_id: str, command: Command) -> bool:
    """:func:`settle_one` on a sync store."""
    (verdict,) = store.settle_many([Settlement(job_id, lock_id, command)])
    return verdict


def completed() -> Delete:
    """A completion: the event record deleted."""
    return Delete(HistoryStatus.SUCCESS)


def rescheduled(
    next_run_at: datetime,
    *,
    priority: int | None = None,
    reset_tries: bool = False,
    tries: int | None = None,
) -> Reschedule:
    """A retry or next run at ``next_run_at``, the lock ended."""
    return Reschedule(
        next_run_at,
        priority=priority,
        reset_tries=reset_tries,
        history=HistoryStatus.ERROR,
        tries=tries,
    )


def deferred(next_run_at: datetime, *, tries: int | None = None) -> Defer:
    """A push back to ``next_run_at`` without a run, the lock ended, the priority kept."""
    return Defer(next_run_at, tries=tries)


def terminal(now: datetime, *, expires_at: datetime | None = None) -> MarkTerminal:
    """The attempt limit reached at ``now``, kept until ``expires_at`` (``None``: forever)."""
    return MarkTerminal(now, expires_at, history=HistoryStatus.ERROR)


def released(now: datetime) -> Release:
    """The lock released at ``now`` (claimable at once, not stale)."""
    return Release(now)


def demoted() -> DemoteStale:
    """Priority 0, the lock left to expire."""
    return DemoteStale()
