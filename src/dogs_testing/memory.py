"""An in-memory job store with the semantics of the MongoDB adapter, for tests and demos.

:class:`SyncInMemoryJobStore` implements the sync :class:`~dogs_core.ports.JobStore` and holds
all the state behind one ``threading.Lock`` (worker threads use it directly).
:class:`InMemoryJobStore` implements :class:`~dogs_core.ports.AsyncJobStore` over the same state
(``InMemoryJobStore().sync`` is its sync face), with one scheduling checkpoint per call, as a
network round trip would have, so a busy claim loop cannot starve the event loop.

What it emulates of MongoDB and @orion-js/dogs:

* datetimes are stored truncated to the millisecond (BSON dates), ``params`` are copied in and out;
* ``insert_job`` of a ``NewJob`` whose ``id`` is already stored is an idempotent retry and reports
  ``Scheduled(id)``; a taken ``unique_identifier`` reports ``Duplicate`` with the holder's id;
* one global namespace of ``unique_identifier`` values (Dogs' sparse unique index) and one record
  per recurrent job name (its partial unique index);
* claims: exact partition match, the eligibility selector and order of :mod:`dogs_core.ports`,
  ties broken by insertion order; ``tries`` +1, ``lock_owner`` from the request and
  ``claim_was_stale`` (a ``locked_until`` was present before the claim and the lock had not been
  released, ``lock_released_at``) at every claim; a stale claim hands out the
  ``previous_attempt`` it took over (the before-image, as MongoDB's ``findOneAndUpdate`` path);
* ``lock_id`` fencing on every execution write (``settle_many`` applies each settlement under
  the lock, with exact verdicts); a ``Release`` keeps the lock id and owner and sets
  ``lock_released_at``; ``Reschedule``, ``Defer``, ``MarkTerminal`` and ``release_all_locks``
  remove every lock field;
* history rows keyed by execution id, the first row written for an execution winning whole
  (MongoDB's ``$setOnInsert`` upsert);
* the operators' steps (``delete_record``, ``modify_record``, ``delete_records``) are atomic against
  claims and fenced writes (one lock), as MongoDB's single-document updates are; states are
  :meth:`~dogs_core.domain.records.JobRecord.state` (``dogs_testing._memory_steering``);
* the fleet controls (pauses, concurrency slots, rate windows, leases) are one atomic step each
  under the same lock, as MongoDB's single-document writes are; a free slot is the lowest free
  index, a slot its holder holds is handed back to it, a window is forgotten a day after its end
  and a lease's token sequence is kept forever (``dogs_testing._memory_controls``);
* change feeds (``watch_records``, ``watch_history``, ``watch_pauses``) fed by every write that
  may make a record claimable, by each history row's first write and by each pause or resume
  that changed something, from any thread, with the job name, partition and next run of every
  record change (a MongoDB update event has only the fields it set): see
  ``dogs_testing._memory_feeds``;
* TTL retention: when the store has a ``clock``, records and history rows whose ``expires_at`` is
  ``<= clock.now()`` are purged lazily at the next call (MongoDB's TTL monitor is later than that,
  up to a minute; a test must not rely on the record surviving past its ``expires_at``).

What it does not: transactions. ``insert_job``/``insert_jobs`` with a ``session`` raise
:class:`~dogs_core.errors.SessionNotSupportedError` and write nothing.

Complexity. Claimable records (a partition is set and the record is not a terminal event) are kept
per ``(partition, job_name)`` in a list sorted by ``(-priority, next_run_at, insertion seq)``.
A claim walks, for each requested name, its list from the start: an entry due in the future ends
its priority level (a ``bisect`` jumps to the next level), a due entry whose lock is still held is
skipped one by one, and the first due unlocked entry is that name's candidate; the best candidate
wins. So a claim costs ``O(k · (L · log n + S))`` for ``k`` requested names, ``L`` distinct
priority levels before the candidate, and ``S`` due entries skipped because they are locked
(the running executions of that name in that partition). ``claim_many`` of ``N`` requests walks
each name's list once, collecting up to ``N`` candidates, and merges them: about the cost of one
claim plus ``N`` candidates per name. Records of other names, partitions or terminal event records
are never examined. Each write that moves a record in the order costs a ``bisect`` plus a list
insert or delete (``O(n)`` memmove, fast in practice). ``probe`` returns the number of entries such
a claim examines. ``find_records`` (over one name's records, the failed ones or all of them; a
page of ``limit`` costs ``O(n log limit)``), ``status_counts``, ``delete_records``,
``release_all_locks`` and ``reconcile_partitions`` (over the given names) scan records; they are
not on the hot path.

The state and its indexes (and their upkeep) are in ``dogs_testing._memory_state``; each role
of the port has its module, as the MongoDB store's do (``_memory_scheduling``,
``_memory_claims``, ``_memory_settle``, ``_memory_history``, ``_memory_watching`` for the
feeds over ``_memory_feeds``' hub, ``_memory_steering``, ``_memory_stats``, ``_memory_controls``,
``_memory_leases``, ``_memory_maintenance``, ``_memory_archive``, ``_memory_following``,
``_memory_workflows``, ``_memory_uniqueness``, ``_memory_schedules``, ``_memory_registry``,
``_memory_steps``,
``_memory_audit``, ``_memory_bulk``, ``_memory_inspection``); this module composes them
into the two faces of the port.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Any, Final, cast

import anyio.lowlevel

from dogs_core.domain.archiving import ArchiveKind
from dogs_core.domain.records import JobRecord
from dogs_core.errors import InvalidOptionError, StoreError
from dogs_core.ports import Clock, Role
from dogs_core.runtime.plumbing.forwarding import ForwardingJobStore
from dogs_testing._memory_archive import ArchivedCopy, MemoryArchive
from dogs_testing._memory_audit import MemoryAudit
from dogs_testing._memory_bulk import MemoryBulk
from dogs_testing._memory_claims import MemoryClaims
from dogs_testing._memory_controls import MemoryControls
from dogs_testing._memory_following import MemoryFollowing
from dogs_testing._memory_history import MemoryHistory
from dogs_testing._memory_inspection import MemoryInspection
from dogs_testing._memory_leases import MemoryLeases
from dogs_testing._memory_maintenance import MemoryMaintenance
from dogs_testing._memory_registry import MemoryRegistry
from dogs_testing._memory_schedules import MemorySchedules
from dogs_testing._memory_scheduling import MemoryScheduling
from dogs_testing._memory_settle import MemorySettle
from dogs_testing._memory_state import _out, _stored
from dogs_testing._memory_stats import MemoryStats
from dogs_testing._memory_steering import MemorySteering
from dogs_testing._memory_steps import MemorySteps
from dogs_testing._memory_uniqueness import MemoryUniqueness
from dogs_testing._memory_watching import MemoryFeeds
from dogs_testing._memory_workflows import MemoryWorkflows

__all__ = ["InMemoryJobStore", "SyncInMemoryJobStore"]


class SyncInMemoryJobStore(
    MemoryInspection,  # first: it builds on the archive and the controls below
    MemoryScheduling,
    MemoryClaims,
    MemorySettle,
    MemoryHistory,
    MemoryFeeds,
    MemorySteering,
    MemoryStats,
    MemoryControls,
    MemoryLeases,
    MemoryMaintenance,
    MemoryArchive,
    MemoryFollowing,
    MemoryWorkflows,
    MemoryUniqueness,
    MemorySchedules,
    # the operator's console: the optional registry, audit and bulk roles
    MemoryRegistry,
    MemoryAudit,
    MemoryBulk,
    # durable jobs: the optional steps role
    MemorySteps,
):
    """The in-memory store, sync face (:class:`~dogs_core.ports.JobStore`). Thread-safe.

    ``clock`` enables TTL emulation: records and history rows whose ``expires_at`` is not after
    ``clock.now()`` disappear at the next call. Without a clock nothing expires.
    """

    #: Every role of the port, the optional ones included (:func:`~dogs_core.ports.store_roles`).
    roles: Final = frozenset(Role)

    # ------------------------------------------------------------------ testing helpers

    def insert_record(self, record: JobRecord) -> None:
        """Insert ``record`` exactly as given (its id included), for tests that need shapes the
        port never writes: a missing partition, a legacy status, a missing retention anchor.
        Raises :class:`~dogs_core.errors.StoreError` when a unique index would be broken."""
        with self._state():
            stored = _stored(record)
            problem = self._conflict(stored)
            if problem is not None:
                raise StoreError(f"cannot insert record: {problem}")
            self._put(None, stored)
            self._feeds.offer_record(stored)

    def all_records(self, job_name: str | None = None) -> list[JobRecord]:
        """Every record (of ``job_name``) in id order: ``find_jobs`` without its page limit,
        for tests and the harness."""
        with self._state():
            if job_name is None:
                records = list(self._records.values())
            else:
                records = [self._records[i] for i in self._by_name.get(job_name, ())]
            return [_out(record) for record in sorted(records, key=lambda r: r.id)]


class InMemoryJobStore(ForwardingJobStore):
    """The in-memory store, async face (:class:`~dogs_core.ports.AsyncJobStore`).

    Every call runs inline after one scheduling checkpoint (a cancelled caller has written
    nothing). ``sync`` is the sync face over the same state; pass ``sync`` to share an existing
    one. See the module documentation for the emulated semantics and the claim complexity.
    """

    def __init__(
        self, *, clock: Clock | None = None, sync: SyncInMemoryJobStore | None = None
    ) -> None:
        if sync is not None and clock is not None:
            raise InvalidOptionError(
                "sync", sync, "pass either clock or sync (which has its own clock), not both"
            )
        self.sync: SyncInMemoryJobStore = (
            sync if sync is not None else SyncInMemoryJobStore(clock=clock)
        )

    @property
    def _wrapped(self) -> object:
        return self.sync

    async def insert_record(self, record: JobRecord) -> None:
        """See :meth:`SyncInMemoryJobStore.insert_record`."""
        await self._forward("insert_record", record)

    async def all_records(self, job_name: str | None = None) -> list[JobRecord]:
        """See :meth:`SyncInMemoryJobStore.all_records`."""
        return cast("list[JobRecord]", await self._forward("all_records", job_name))

    async def slot_holders(self, *, now: datetime) -> dict[tuple[str, str, int], str]:
        """See :meth:`SyncInMemoryJobStore.slot_holders`."""
        result = await self._forward("slot_holders", now=now)
        return cast("dict[tuple[str, str, int], str]", result)

    async def archived(self, kind: ArchiveKind) -> dict[str, ArchivedCopy]:
        """See :meth:`SyncInMemoryJobStore.archived`."""
        return cast("dict[str, ArchivedCopy]", await self._forward("archived", kind))

    async def archived_keys(self, kind: ArchiveKind) -> list[str]:
        """See :meth:`SyncInMemoryJobStore.archived_keys`."""
        return cast("list[str]", await self._forward("archived_keys", kind))

    async def copy_batch(
        self, kind: ArchiveKind, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        """See :meth:`SyncInMemoryJobStore.copy_batch`."""
        copied = await self._forward(
            "copy_batch", kind, cutoff=cutoff, batch_size=batch_size, archived_at=archived_at
        )
        return cast(int, copied)

    async def _forward(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        await anyio.lowlevel.checkpoint()
        return getattr(self.sync, method)(*args, **kwargs)

    def _forward_feed(self, method: str, /, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        """The feeds are native async generators over the shared state (no thread): a write
        from any thread wakes them."""
        hub = self.sync._feeds
        opened = _ASYNC_FEEDS[method]
        feed: AsyncGenerator[Any, None] = getattr(hub, opened)(*args, **kwargs)
        return feed


#: The port's feeds and the hub's async feeds that serve them.
_ASYNC_FEEDS: Final = {
    "watch_records": "records_async",
    "watch_history": "history_async",
    "watch_pauses": "pauses_async",
    "watch_log_lines": "log_lines_async",
    "watch_progress": "jobs_async",
    "watch_step_rows": "step_rows_async",
    "watch_workflows": "workflows_async",
}
