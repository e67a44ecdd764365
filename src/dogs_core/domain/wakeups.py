"""Change notifications turned into wake-ups: which changes concern an instance, and when.

A store's change feed (``AsyncJobStore.watch_records``) reports records that may have become
claimable: inserted, rescheduled, released. It is a notification, never a queue: a change can
be missed (a reconnect, a feed that is not open yet) and polling stays the safety net, so
acting on a change twice or not at all is harmless. :func:`plan_wakeups` decides, for one batch
of changes, whether the claim lanes look now (and in which partitions first), and which soon-due
times get a local timer so that a job due before the next poll starts on time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["RecordChange", "WakePlan", "plan_wakeups"]


@dataclass(frozen=True, slots=True)
class RecordChange:
    """A record that may have become claimable. ``None`` fields are unknown to the feed (an
    update that did not carry them): such a change concerns every instance, due now."""

    job_name: str | None = None
    partition: int | None = None
    next_run_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class WakePlan:
    """What one batch of changes asks of an instance."""

    now: bool = False
    """Wake the claim lanes now."""
    partitions: tuple[int, ...] = ()
    """Partitions to claim in first (known partitions of the changes due now)."""
    later: tuple[datetime, ...] = ()
    """Distinct due times, soonest first, within the horizon: wake the lanes at each."""


def plan_wakeups(
    changes: Iterable[RecordChange],
    *,
    job_names: frozenset[str],
    now: datetime,
    horizon: timedelta,
    max_later: int = 1_000,
) -> WakePlan:
    """The wake-ups for ``changes`` of an instance that runs ``job_names``.

    A change of another job name is ignored. One due at or before ``now`` (or at an unknown
    time) wakes the lanes now; one due within ``horizon`` of ``now`` gets a timer (at most
    ``max_later`` distinct times, the soonest: the poll catches the rest); a later one is left
    to the poll. A whole burst makes at most one wake-up now."""
    wake_now = False
    partitions: dict[int, None] = {}
    later: set[datetime] = set()
    until = now + horizon
    for change in changes:
        if change.job_name is not None and change.job_name not in job_names:
            continue
        due = change.next_run_at
        if due is None or due <= now:
            wake_now = True
            if change.partition is not None:
                partitions[change.partition] = None
        elif due <= until:
            later.add(due)
    return WakePlan(
        now=wake_now, partitions=tuple(partitions), later=tuple(sorted(later)[:max_later])
    )
