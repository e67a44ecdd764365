"""The steering role: the operators' reads and writes of records (find, inspect, cancel,
retry, reschedule, delete). Not fenced by a lock: each write is one atomic compare-and-set, so
a live execution of the record loses its lock at its next fenced write."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.records import JobRecord, JobState
from dogs_core.domain.steering import JobChange

__all__ = ["AsyncSteeringStore"]


@runtime_checkable
class AsyncSteeringStore(Protocol):
    """The operators' reads and writes of records."""

    async def get_record(self, job_id: str) -> JobRecord | None:
        """One record by id."""
        ...

    async def find_records(
        self,
        *,
        job_name: str | None = None,
        state: JobState | None = None,
        unique_identifier: str | None = None,
        after: str | None = None,
        limit: int = 100,
        now: datetime | None = None,
        tags: Sequence[str] | None = None,
    ) -> list[JobRecord]:
        """At most ``limit`` records matching every given filter, in ascending ``id`` order,
        only ids greater than ``after`` (a stable cursor: ids are UUIDv7, so creation order).
        ``state`` is :meth:`JobRecord.state` at ``now``, which is then required
        (``InvalidOptionError``); ``limit`` must be at least 1. ``tags``: only records carrying
        every one of them (callers pass it only when filtering, so a store written before it
        keeps answering the other filters)."""
        ...

    async def delete_record(
        self,
        job_id: str,
        *,
        unless_running_at: datetime | None = None,
        unless_failed: bool = False,
    ) -> JobRecord | None:
        """Delete record ``job_id`` in one atomic step and return it as it was just before.
        ``None`` when nothing was deleted: there is no such record, or its lock is live at
        ``unless_running_at`` (``locked_until`` later than it), or ``unless_failed`` and it is
        an event record at its attempt limit. Not fenced: a live execution of the record loses
        its lock (its next fenced write matches nothing)."""
        ...

    async def modify_record(
        self, job_id: str, change: JobChange, *, now: datetime
    ) -> JobRecord | None:
        """Compare-and-set: apply ``change`` to record ``job_id`` if it is not running at
        ``now`` (no lock, or ``locked_until <= now``), in one atomic step, and return the record
        after the change; ``None`` when nothing matched (no such record, or it is running).
        ``revive`` removes ``status``, ``max_tries_reached_at`` and ``expires_at``. The lock
        fields are kept: the next claim takes the record over as stale (until then a stale
        holder's fenced writes still match, as they would without the change)."""
        ...

    async def delete_records(
        self, *, job_name: str | None, state: JobState, now: datetime, dry_run: bool = False
    ) -> int:
        """Delete every record of ``state`` at ``now`` (of ``job_name`` when given) and return
        how many; with ``dry_run`` only count them. ``state`` must not be ``running``
        (``InvalidOptionError``): a record whose lock is live at the moment of the delete is
        never deleted."""
        ...
