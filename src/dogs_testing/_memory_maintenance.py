"""The maintenance role of the in-memory store: nothing to set up, the store's ``clock`` as
the server's, and the upkeep (partition repair, retention backfill, releasing every lock) as
scans of the given names' records. See :mod:`dogs_testing.memory`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from dogs_core.domain import validation
from dogs_core.domain.partitions import check_chosen_partition
from dogs_core.domain.records import JobRecord, to_millis
from dogs_core.ports import StoreCapabilities
from dogs_testing._memory_state import _CAPABILITIES, _NO_LOCK, MemoryState, _is_terminal

__all__ = ["MemoryMaintenance"]


class MemoryMaintenance(MemoryState):
    """Setup, capabilities, the clock and upkeep."""

    def setup(self) -> None:
        """Nothing to create."""

    def capabilities(self) -> StoreCapabilities:
        return _CAPABILITIES

    def server_time(self) -> datetime | None:
        """The store's ``clock`` (to the millisecond, as MongoDB's), or ``None`` without one.

        The store's clock plays the database server's: workers and clients over this store
        whose own clocks are skewed (:class:`~dogs_core.runtime.plumbing.clock.SkewedClock`) measure
        their offset to it and compute on it, as they do against MongoDB."""
        return None if self._clock is None else to_millis(self._clock.now())

    def reconcile_partitions(
        self,
        *,
        job_names: Sequence[str],
        n_partitions: int,
        now: datetime,
        limit: int,
        choose_partition: Callable[[], int],
    ) -> int:
        """Like the Mongo store: every chosen partition is checked before any is written."""
        validation.positive_int("n_partitions", n_partitions)
        with self._state():
            now = to_millis(now)
            moves: list[tuple[JobRecord, int]] = []
            for name in dict.fromkeys(job_names):
                for record_id in list(self._by_name.get(name, ())):
                    if len(moves) >= limit:
                        break
                    old = self._records[record_id]
                    if (
                        (old.partition is not None and 0 <= old.partition < n_partitions)
                        or (old.locked_until is not None and old.locked_until > now)
                        or _is_terminal(old)
                    ):
                        continue
                    partition = check_chosen_partition(choose_partition(), n_partitions)
                    if partition != old.partition:
                        moves.append((old, partition))
            for old, partition in moves:
                new = dataclasses.replace(old, partition=partition)
                self._put(old, new)
                self._feeds.offer_record(new)
            return len(moves)

    def backfill_retention(self, *, retention: timedelta | None, now: datetime) -> int:
        with self._state():
            modified = 0
            for record_id in list(self._terminal):
                old = self._records[record_id]
                if retention is None:
                    new = dataclasses.replace(old, expires_at=None)
                else:
                    anchor = old.max_tries_reached_at or old.last_run_at or to_millis(now)
                    new = dataclasses.replace(
                        old, max_tries_reached_at=anchor, expires_at=to_millis(anchor + retention)
                    )
                if new != old:
                    self._put(old, new)
                    modified += 1
            return modified

    def release_all_locks(self) -> int:
        with self._state():
            modified = 0
            for old in list(self._records.values()):
                if old.lock_id is None and old.locked_until is None:
                    continue
                new = dataclasses.replace(old, **_NO_LOCK)
                self._put(old, new)
                self._feeds.offer_record(new)
                modified += 1
            return modified

    def close(self) -> None:
        """Nothing to release; the state stays readable."""
