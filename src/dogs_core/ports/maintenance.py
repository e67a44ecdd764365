"""The maintenance role: setup, what the backend can do, its clock, and the upkeep loops
(partition repair, retention backfill, releasing every lock)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from dogs_core.ports.common import StoreCapabilities

__all__ = ["AsyncMaintenanceStore"]


@runtime_checkable
class AsyncMaintenanceStore(Protocol):
    """Setup, capabilities, the clock and upkeep."""

    async def setup(self) -> None:
        """Create collections and indexes. Idempotent; index failures are logged, not raised."""
        ...

    async def capabilities(self) -> StoreCapabilities:
        """Detect once (after ``setup``) which claim path to use; later calls are cached."""
        ...

    async def server_time(self) -> datetime | None:
        """The backend's current time (timezone-aware UTC), read in one short round trip, or
        ``None`` for a store with no clock of its own. The runtime times these reads to
        measure its clock's offset (:mod:`dogs_core.domain.clock_offset`), so that every
        ``now`` it passes to the store, and every lock deadline, is on this clock."""
        ...

    async def reconcile_partitions(
        self,
        *,
        job_names: Sequence[str],
        n_partitions: int,
        now: datetime,
        limit: int,
        choose_partition: Callable[[], int],
    ) -> int:
        """Give a valid partition to at most ``limit`` records of ``job_names`` whose partition is
        missing or outside ``[0, n_partitions)``, skipping locked and terminal records; each
        update re-checks those conditions (compare-and-set). Returns how many were modified."""
        ...

    async def backfill_retention(self, *, retention: timedelta | None, now: datetime) -> int:
        """For terminal event records: set ``max_tries_reached_at`` when missing (from
        ``last_run_at``, else ``now``) and ``expires_at = max_tries_reached_at + retention``,
        or unset ``expires_at`` when ``retention`` is ``None``. Returns the modified count."""
        ...

    async def release_all_locks(self) -> int:
        """Administrative: release every lock (every lock field unset). Returns the modified
        count."""
        ...

    async def close(self) -> None:
        """Release resources the store owns (not a client that was passed in)."""
        ...
