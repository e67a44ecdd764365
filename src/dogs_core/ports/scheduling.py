"""The scheduling role: inserting records (``client.schedule``, ``schedule_many``, the
recurrent records' bootstrap)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from dogs_core.domain.records import BulkScheduleResult, NewJob, ScheduleOutcome

__all__ = ["AsyncSchedulingStore"]


@runtime_checkable
class AsyncSchedulingStore(Protocol):
    """Inserting records."""

    async def insert_job(self, job: NewJob, *, session: object | None = None) -> ScheduleOutcome:
        """Insert one record. A taken ``unique_identifier`` writes nothing and returns
        ``Duplicate`` with the id of the record that holds it. A record whose ``id`` is already
        stored is a retry of an insert that had landed: ``Scheduled(id)``.

        ``session`` is the caller's database session (for MongoDB a pymongo
        ``ClientSession``/``AsyncClientSession``, possibly in a transaction): the write joins
        it, so the job exists only if the caller's transaction commits, and a taken identifier
        must not abort that transaction (it is still ``Duplicate``). A store that cannot join
        the caller's session raises :class:`~dogs_core.errors.SessionNotSupportedError` and
        writes nothing. Inside the caller's transaction, a store passes the driver's own errors
        through untranslated (not as ``TransientStoreError``): the caller's transaction runner
        (pymongo's ``with_transaction``) retries on the driver's error labels."""
        ...

    async def insert_jobs(
        self, jobs: Sequence[NewJob], *, session: object | None = None
    ) -> BulkScheduleResult:
        """Insert many records in one round trip, unordered: a failing item does not stop the
        others. Items with a ``unique_identifier`` never modify an existing record.
        ``session`` as for :meth:`insert_job`."""
        ...

    async def ensure_recurrent(
        self, job_name: str, *, priority: int, partition: int, now: datetime
    ) -> None:
        """Make sure the one record of a recurrent job exists: set its type and priority, clear
        a legacy status, and only when inserting set ``next_run_at = now`` and ``partition``.
        Two instances doing this at once must both succeed (retry a duplicate-key race)."""
        ...
