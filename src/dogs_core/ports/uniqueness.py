"""The uniqueness role, optional: what ``schedule(unique=Unique(...))`` needs beyond Dogs' unique
index on ``uniqueIdentifier`` (``unique_key=`` and a plain ``Unique(key=...)`` need none of
it). A store that has it lists :attr:`~dogs_core.ports.common.Role.UNIQUENESS` in its ``roles``.

Every method is one atomic step (MongoDB: one single-document operation), so that the
scheduling client's decisions (:mod:`dogs_core.domain.uniqueness`, performed by
:mod:`dogs_core.runtime.uniqueness`) stay exact however many callers race: each write is a
compare-and-set on what the decision was made from, and a lost race is decided again.

Holds
    A hold keeps a unique key taken until a time, whatever becomes of the records: the window
    after a record ended (``Unique(period=...)``), and a throttle's period. MongoDB keeps them
    in their own collection (one document per key, removed by a TTL index after its time).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.records import JobRecord
from dogs_core.domain.uniqueness import HoldState, PendingUpdate, UniqueHold

__all__ = ["AsyncUniquenessStore", "PendingUpdate", "UniqueHold"]


@runtime_checkable
class AsyncUniquenessStore(Protocol):
    """The compare-and-set steps of unique scheduling (optional)."""

    async def read_unique_hold(self, key: str) -> UniqueHold | None:
        """The hold of ``key``, past or live (``None``: none is stored)."""
        ...

    async def take_unique_hold(
        self, key: str, job_id: str, *, until: datetime, now: datetime
    ) -> UniqueHold | None:
        """Hold ``key`` for ``job_id`` until ``until`` when no hold of it lasts past ``now``,
        and return ``None``; otherwise change nothing and return the live hold (a throttle's
        period: the first call of a period wins)."""
        ...

    async def extend_unique_hold(self, key: str, job_id: str, *, until: datetime) -> None:
        """Make ``key`` held for at least until ``until`` by ``job_id`` (created when absent; a
        later ``until`` already stored is kept): the window of a record that ends. Written
        before the record is removed, so that no moment leaves the key free."""
        ...

    async def release_unique_identifier(
        self, job_id: str, identifier: str, *, state: HoldState, now: datetime
    ) -> bool:
        """Remove ``unique_identifier`` from record ``job_id`` if it still holds
        ``identifier`` and is still in ``state`` at ``now`` (and is not parked); whether it did.
        The record is otherwise untouched (a running one keeps running)."""
        ...

    async def update_pending(
        self, job_id: str | None, identifier: str, update: PendingUpdate, *, now: datetime
    ) -> JobRecord | None:
        """Apply ``update`` to record ``job_id`` (``None``: whichever record holds
        ``identifier``) if it holds ``identifier``, is pending at ``now`` (not running, not
        failed) and is not parked; the record after the write, or ``None`` when none matched.
        A debounce's run time is computed on the record as it is at the write
        (:func:`~dogs_core.domain.uniqueness.debounced_next_run`)."""
        ...

    async def publish_parked(self, job_id: str, *, parked_at: datetime, run_at: datetime) -> bool:
        """Give record ``job_id``, parked at ``parked_at`` and still parked, its run time
        ``run_at`` (its park fields removed); whether it did."""
        ...

    async def drop_parked(self, job_id: str, *, parked_at: datetime) -> bool:
        """Delete record ``job_id`` if it is still parked since ``parked_at``; whether it did."""
        ...
