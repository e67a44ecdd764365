"""The ports: everything the runtime and the scheduling API need from the outside world.

A job store is the only coordination point between workers. This module is the whole contract
a custom adapter must meet; ``dogs_testing.contract`` checks it. Every method below is
specified in terms of the stored records (:class:`~dogs_core.domain.records.JobRecord`):

Eligibility (claims, probes)
    ``partition`` equals the requested partition, ``job_name`` is one of the requested names,
    ``next_run_at <= now``, the lock is missing or ``locked_until <= now``, and the record is
    not an event job in status ``maxTriesReached``.
Order
    ``priority`` descending, then ``next_run_at`` ascending.
Fencing
    Every write made on behalf of an execution matches both ``id`` and ``lock_id`` and returns
    ``False`` when it matched nothing (the execution lost its lock).
Errors
    Adapters raise :class:`~dogs_core.errors.TransientStoreError` for conditions worth retrying
    (network, primary step-down, write conflict, timeout) and let anything else propagate.

The port holds what the runtime and the clients call, nothing more: a single completion or
history row is a one-item :meth:`AsyncJobStore.complete_many` or
:meth:`AsyncJobStore.write_history_many`.

Times are timezone-aware UTC ``datetime`` values; stores may truncate them to milliseconds.
The sync :class:`JobStore` is the same contract without ``async``. The generated
:class:`~dogs_core.runtime._sync.client.SyncDogsClient` (the blocking scheduling client) calls it
directly, in the caller's thread; the runtime, which is async, adapts it with
:class:`dogs_core.runtime.threaded.ThreadedJobStore`, which runs each call in a worker thread.

Refused input (the batch rules below, a negative ``limit``) raises ``ValueError``; the shared
checks of :mod:`dogs_core.domain.batches` and :mod:`dogs_core.domain.validation` raise its
subclass :class:`~dogs_core.errors.InvalidOptionError`, naming the field and the value.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from dogs_core.domain.archiving import ArchiveKind
from dogs_core.domain.controls import Lease
from dogs_core.domain.records import (
    BulkScheduleResult,
    ClaimedJob,
    ClaimRequest,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobState,
    NameStatus,
    NewJob,
    ScheduleOutcome,
)
from dogs_core.domain.stats import JobStats
from dogs_core.domain.steering import JobChange
from dogs_core.domain.wakeups import RecordChange

__all__ = [
    "ArchiveStore",
    "AsyncArchiveStore",
    "AsyncJobStore",
    "Clock",
    "JobStore",
    "StoreCapabilities",
]


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """What a store found out about its backend, once, after its indexes were set up.

    ``claim_path`` names the claim implementation in use (for logs and benchmarks), for example
    ``"sorted_update_one"``, ``"find_one_and_update"`` or ``"memory"``. ``supports_probe`` is
    false for a store whose probes mean nothing (the runtime then never probes).
    """

    claim_path: str
    supports_probe: bool = True
    server_version: str | None = None


class Clock(Protocol):
    """A clock. The runtime computes eligibility and lock deadlines on the store's clock: this
    one plus the offset it measures (:class:`dogs_core.runtime.clock.ServerClock`)."""

    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


@runtime_checkable
class AsyncJobStore(Protocol):
    """The async job-store port. The runtime consumes only this."""

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

    async def schedule(self, job: NewJob, *, session: object | None = None) -> ScheduleOutcome:
        """Insert one record. A taken ``unique_identifier`` writes nothing and returns
        ``Duplicate`` with the id of the record that holds it.

        ``session`` is the caller's database session (for MongoDB a pymongo
        ``ClientSession``/``AsyncClientSession``, possibly in a transaction): the write joins
        it, so the job exists only if the caller's transaction commits, and a taken identifier
        must not abort that transaction (it is still ``Duplicate``). A store that cannot join
        the caller's session raises :class:`~dogs_core.errors.SessionNotSupportedError` and
        writes nothing. Inside the caller's transaction, a store passes the driver's own errors
        through untranslated (not as ``TransientStoreError``): the caller's transaction runner
        (pymongo's ``with_transaction``) retries on the driver's error labels."""
        ...

    async def schedule_many(
        self, jobs: Sequence[NewJob], *, session: object | None = None
    ) -> BulkScheduleResult:
        """Insert many records in one round trip, unordered: a failing item does not stop the
        others. Items with a ``unique_identifier`` never modify an existing record.
        ``session`` as for :meth:`schedule`."""
        ...

    async def ensure_recurrent(
        self, job_name: str, *, priority: int, partition: int, now: datetime
    ) -> None:
        """Make sure the one record of a recurrent job exists: set its type and priority, clear
        a legacy status, and only when inserting set ``next_run_at = now`` and ``partition``.
        Two instances doing this at once must both succeed (retry a duplicate-key race)."""
        ...

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        """Atomically take the first eligible record of ``request.partition`` in order: set
        ``lock_id``, ``locked_until``, ``last_run_at = now``, ``lock_owner = request.owner``
        (removed when ``None``), remove ``lock_released_at`` and increment ``tries``. ``None``
        when nothing is eligible (or the claim was ambiguous and has been dropped).

        The claimed job carries ``owner = request.owner`` and, when the claim took over a lock
        that was not released (``was_stale``), ``previous_attempt``: the lock id, ``last_run_at``,
        ``locked_until``, ``tries`` and ``lock_owner`` the record had just before (a store that
        cannot know them leaves it ``None``)."""
        ...

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        """Claim up to ``len(requests)`` jobs in one go: the best eligible records of the
        requests' partition, in claim order (priority desc, ``next_run_at`` asc), each locked
        under the lock id of a distinct request (a claimed job's ``execution_id``/``lock_id`` is
        that request's ``lock_id``). Returns the claimed jobs best first; fewer than asked (or
        ``[]``) when fewer were eligible or other claimers took some. The requests must agree on
        everything but ``lock_id`` (``job_names``, ``partition``, ``hint``, ``now``,
        ``locked_until``) and their lock ids must be distinct: otherwise ``ValueError`` and
        nothing is written. Empty input (or empty ``job_names``) returns ``[]``. Each claimed job
        is exactly what :meth:`claim` would have returned for it (``tries`` incremented,
        ``was_stale``, etc.)."""
        ...

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        """Fenced: set ``locked_until``."""
        ...

    async def complete_many(self, claims: Sequence[tuple[str, str]]) -> list[bool]:
        """Fenced delete of finished event records (success, or a discarded failure), given as
        ``(job_id, lock_id)`` pairs, in one round trip where the store can; a single completion
        is a one-pair call. Returns one verdict per pair, in order: ``True`` when this call
        deleted the record, ``False`` when it did not (a record with that id is locked by
        another claim, unlocked, or recurrent, or no such record exists). Empty input returns
        ``[]``. A job id repeated in ``claims`` raises ``ValueError`` and nothing is written.

        One leeway, for stores that delete a batch with one command and only learn a count:
        when some pairs of one call were deleted and some records were already gone, the store
        may report ``True`` for the gone ones too (it cannot tell them apart). A record that
        still exists is always ``False``."""
        ...

    async def reschedule(
        self,
        job_id: str,
        lock_id: str,
        *,
        next_run_at: datetime,
        priority: int | None,
        reset_tries: bool,
        tries: int | None = None,
    ) -> bool:
        """Fenced: set ``next_run_at`` (and ``priority`` when given), set ``tries = 0`` when
        ``reset_tries`` (or ``tries`` when given: a snoozed run gives its try back), and release
        the lock (unset ``lock_id``, ``locked_until``, ``claim_was_stale``, ``lock_owner``,
        ``lock_released_at``)."""
        ...

    async def mark_max_tries_reached(
        self, job_id: str, lock_id: str, *, now: datetime, expires_at: datetime | None
    ) -> bool:
        """Fenced, event records only: status ``maxTriesReached``, ``max_tries_reached_at = now``,
        ``expires_at`` (unset when ``None``: kept forever), and release the lock (as
        :meth:`reschedule` does)."""
        ...

    async def demote_stale(self, job_id: str, lock_id: str) -> bool:
        """Fenced: ``priority = 0``, so the retry of a stale job runs after other due work."""
        ...

    async def release_lock(self, job_id: str, lock_id: str, *, now: datetime) -> bool:
        """Fenced: ``locked_until = now`` and ``lock_released_at = now`` so another worker may
        claim the record at once and nobody takes it for stale. The ``lock_id`` is kept, so
        late writes of the released execution still fail their fence."""
        ...

    async def probe(
        self, *, hint: str, job_names: Sequence[str], partition: int, now: datetime
    ) -> float:
        """Measure, in milliseconds, how long the claim query takes with ``hint`` (MongoDB:
        ``explain`` executionStats). Raise on failure or timeout."""
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

    async def unlock_all(self) -> int:
        """Administrative: release every lock. Returns the modified count."""
        ...

    async def write_history_many(self, records: Sequence[HistoryRecord]) -> None:
        """Insert each record keyed by ``execution_id``, in order, in one round trip where the
        store can (a single row is a one-record call): the row first written for an execution
        wins whole (a later row for it writes nothing), also between two records of one call.
        Empty input writes nothing."""
        ...

    async def get_executions(
        self,
        job_name: str | None = None,
        *,
        job_id: str | None = None,
        status: HistoryStatus | None = None,
        limit: int = 20,
        skip: int = 0,
    ) -> list[HistoryRecord]:
        """History of one job name, or of one job (``job_id``), or of both filters at once,
        newest ``started_at`` first (ties: newest ``ended_at``), optionally of one ``status``.
        At least one of ``job_name`` and ``job_id`` is required (``InvalidOptionError``)."""
        ...

    def watch_records(self, job_names: Sequence[str]) -> AsyncGenerator[list[RecordChange], None]:
        """A feed of records of ``job_names`` that may have become claimable: inserted, or
        updated so that their lock is released or cleared or their ``next_run_at`` moved.

        An async generator: it yields ``[]`` once as soon as the feed is open (a change made
        after that is reported), then batches of changes (a burst may be one batch), and
        ``[]`` again at least every few seconds while nothing happens, so that a consumer may
        check its own deadlines (one without any may waive them: ``without_heartbeats`` of
        :mod:`dogs_core.runtime.watching`). Changes may be missed (a notification, not a queue)
        and a change may be reported that changed nothing claimable. Transient errors are
        resumed from where the feed was when possible; ``TransientStoreError`` when not.
        Raises :class:`~dogs_core.errors.ChangeFeedUnavailableError` (from the first
        ``__anext__``) where the backend cannot watch: a standalone MongoDB server, or a user
        without the permission."""
        ...

    def watch_history(
        self, *, job_ids: Sequence[str] | None = None, job_names: Sequence[str] | None = None
    ) -> AsyncGenerator[list[HistoryRecord], None]:
        """A feed of history rows as they are first written, optionally only of ``job_ids``
        and/or ``job_names``: same shape, heartbeats and errors as :meth:`watch_records`."""
        ...

    async def get_job(self, job_id: str) -> JobRecord | None:
        """One record by id."""
        ...

    async def find_jobs(
        self,
        *,
        job_name: str | None = None,
        state: JobState | None = None,
        unique_identifier: str | None = None,
        after: str | None = None,
        limit: int = 100,
        now: datetime | None = None,
    ) -> list[JobRecord]:
        """At most ``limit`` records matching every given filter, in ascending ``id`` order,
        only ids greater than ``after`` (a stable cursor: ids are UUIDv7, so creation order).
        ``state`` is :meth:`JobRecord.state` at ``now``, which is then required
        (``InvalidOptionError``); ``limit`` must be at least 1."""
        ...

    async def delete_job(
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

    async def modify_job(
        self, job_id: str, change: JobChange, *, now: datetime
    ) -> JobRecord | None:
        """Compare-and-set: apply ``change`` to record ``job_id`` if it is not running at
        ``now`` (no lock, or ``locked_until <= now``), in one atomic step, and return the record
        after the change; ``None`` when nothing matched (no such record, or it is running).
        ``revive`` removes ``status``, ``max_tries_reached_at`` and ``expires_at``. The lock
        fields are kept: the next claim takes the record over as stale (until then a stale
        holder's fenced writes still match, as they would without the change)."""
        ...

    async def delete_jobs(
        self, *, job_name: str | None, state: JobState, now: datetime, dry_run: bool = False
    ) -> int:
        """Delete every record of ``state`` at ``now`` (of ``job_name`` when given) and return
        how many; with ``dry_run`` only count them. ``state`` must not be ``running``
        (``InvalidOptionError``): a record whose lock is live at the moment of the delete is
        never deleted."""
        ...

    async def status_counts(self, *, now: datetime) -> list[NameStatus]:
        """Per job name, each record counted once by :meth:`JobRecord.state`: ``due`` (due and
        retrying records whose ``next_run_at <= now``), ``scheduled_later`` (the rest of
        scheduled and retrying), ``running``, ``stale``, ``terminal`` (failed), and
        ``oldest_due_at``: the oldest ``next_run_at`` of the due and stale records."""
        ...

    async def job_stats(
        self, *, since: datetime, until: datetime, job_names: Sequence[str] | None = None
    ) -> list[JobStats]:
        """Per job name (of ``job_names`` when given), what its history rows whose
        ``started_at`` is in ``[since, until)`` did (:class:`~dogs_core.domain.stats.JobStats`),
        sorted by name; a name without a row in the window is absent. The window is checked by
        :func:`~dogs_core.domain.stats.check_stats_window` (at most
        :data:`~dogs_core.domain.stats.MAX_STATS_WINDOW`, ``InvalidOptionError``); the counts
        follow :mod:`dogs_core.domain.stats` (nearest-rank percentiles, UTC minutes)."""
        ...

    # -- fleet controls (dogs_core.domain.controls) ---------------------------------------------

    async def set_paused(self, job_name: str, paused: bool, *, now: datetime) -> bool:
        """Pause (``paused``) or resume ``job_name`` (``"*"``: every name) fleet-wide. Returns
        whether this call changed anything (pausing a paused name is ``False``)."""
        ...

    async def paused_names(self) -> frozenset[str]:
        """The paused job names (``"*"`` among them when every name is paused)."""
        ...

    def watch_pauses(self) -> AsyncGenerator[list[str], None]:
        """A feed of pause changes: the job names (``"*"`` included) paused or resumed since the
        last batch. Same shape, heartbeats and errors as :meth:`watch_records` (``[]`` once
        open, ``[]`` again at least every few seconds, ``ChangeFeedUnavailableError`` where the
        backend cannot watch). A notification only: read :meth:`paused_names` for the state."""
        ...

    async def acquire_slot(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        holder: str,
        until: datetime,
        now: datetime,
    ) -> int | None:
        """Take one of the ``limit`` concurrency slots ``0 .. limit-1`` of ``(job_name, key)``
        for ``holder`` (an execution's lock id) until ``until``, atomically: a slot is free when
        nobody holds it or its holder's ``until`` is ``<= now``. Returns the slot's index, or
        ``None`` when all are held. Two calls never get one slot both; slots of a larger index
        (a limit lowered since) are never handed out. Taking a slot ``holder`` already holds
        returns it again."""
        ...

    async def renew_slot(
        self, job_name: str, key: str, index: int, *, holder: str, until: datetime
    ) -> bool:
        """Fenced by ``holder``: move the slot's ``until``. ``False`` when another holds it."""
        ...

    async def release_slot(self, job_name: str, key: str, index: int, *, holder: str) -> bool:
        """Fenced by ``holder``: free the slot. ``False`` when another holds it (or nobody)."""
        ...

    async def held_slots(self, *, now: datetime) -> dict[str, int]:
        """Per job name, how many slots are held at ``now`` (all keys together)."""
        ...

    async def take_rate_token(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        window_start: datetime,
        window_end: datetime,
    ) -> bool:
        """Count one start of ``(job_name, key)`` in the window ``[window_start, window_end)``
        if fewer than ``limit`` were counted there, atomically; ``False`` when the window is
        full. A store may forget a window once it has ended."""
        ...

    async def acquire_lease(
        self, name: str, *, owner: str, until: datetime, now: datetime
    ) -> int | None:
        """Take the lease ``name`` for ``owner`` until ``until`` when nobody holds it or the
        holder's ``until`` is ``<= now``, atomically, and return its fencing token: one more than
        the token of the previous acquisition of ``name`` (1 the first time), never reused.
        ``None`` when it is held (also by ``owner``: a lease is not reentrant)."""
        ...

    async def renew_lease(
        self, name: str, *, owner: str, token: int, until: datetime, now: datetime
    ) -> bool:
        """Fenced by ``owner`` and ``token``, and only while the lease has not lapsed at ``now``:
        move its ``until``. ``False`` when it was lost."""
        ...

    async def release_lease(self, name: str, *, owner: str, token: int) -> bool:
        """Fenced by ``owner`` and ``token``: give the lease back (the token sequence is
        kept). ``False`` when it was no longer held by them."""
        ...

    async def get_lease(self, name: str) -> Lease | None:
        """The lease ``name`` as stored (its last holder, token and ``until``, possibly lapsed),
        or ``None`` when nobody ever held it or it was released."""
        ...

    async def close(self) -> None:
        """Release resources the store owns (not a client that was passed in)."""
        ...


@runtime_checkable
class JobStore(Protocol):
    """The sync twin of :class:`AsyncJobStore`: same methods, same semantics, blocking."""

    def setup(self) -> None: ...

    def capabilities(self) -> StoreCapabilities: ...

    def server_time(self) -> datetime | None: ...

    def schedule(self, job: NewJob, *, session: object | None = None) -> ScheduleOutcome: ...

    def schedule_many(
        self, jobs: Sequence[NewJob], *, session: object | None = None
    ) -> BulkScheduleResult: ...

    def ensure_recurrent(
        self, job_name: str, *, priority: int, partition: int, now: datetime
    ) -> None: ...

    def claim(self, request: ClaimRequest) -> ClaimedJob | None: ...

    def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]: ...

    def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool: ...

    def complete_many(self, claims: Sequence[tuple[str, str]]) -> list[bool]: ...

    def reschedule(
        self,
        job_id: str,
        lock_id: str,
        *,
        next_run_at: datetime,
        priority: int | None,
        reset_tries: bool,
        tries: int | None = None,
    ) -> bool: ...

    def mark_max_tries_reached(
        self, job_id: str, lock_id: str, *, now: datetime, expires_at: datetime | None
    ) -> bool: ...

    def demote_stale(self, job_id: str, lock_id: str) -> bool: ...

    def release_lock(self, job_id: str, lock_id: str, *, now: datetime) -> bool: ...

    def probe(
        self, *, hint: str, job_names: Sequence[str], partition: int, now: datetime
    ) -> float: ...

    def reconcile_partitions(
        self,
        *,
        job_names: Sequence[str],
        n_partitions: int,
        now: datetime,
        limit: int,
        choose_partition: Callable[[], int],
    ) -> int: ...

    def backfill_retention(self, *, retention: timedelta | None, now: datetime) -> int: ...

    def unlock_all(self) -> int: ...

    def write_history_many(self, records: Sequence[HistoryRecord]) -> None: ...

    def get_executions(
        self,
        job_name: str | None = None,
        *,
        job_id: str | None = None,
        status: HistoryStatus | None = None,
        limit: int = 20,
        skip: int = 0,
    ) -> list[HistoryRecord]: ...

    def watch_records(
        self, job_names: Sequence[str]
    ) -> Generator[list[RecordChange], None, None]: ...

    def watch_history(
        self, *, job_ids: Sequence[str] | None = None, job_names: Sequence[str] | None = None
    ) -> Generator[list[HistoryRecord], None, None]: ...

    def get_job(self, job_id: str) -> JobRecord | None: ...

    def find_jobs(
        self,
        *,
        job_name: str | None = None,
        state: JobState | None = None,
        unique_identifier: str | None = None,
        after: str | None = None,
        limit: int = 100,
        now: datetime | None = None,
    ) -> list[JobRecord]: ...

    def delete_job(
        self,
        job_id: str,
        *,
        unless_running_at: datetime | None = None,
        unless_failed: bool = False,
    ) -> JobRecord | None: ...

    def modify_job(self, job_id: str, change: JobChange, *, now: datetime) -> JobRecord | None: ...

    def delete_jobs(
        self, *, job_name: str | None, state: JobState, now: datetime, dry_run: bool = False
    ) -> int: ...

    def status_counts(self, *, now: datetime) -> list[NameStatus]: ...

    def job_stats(
        self, *, since: datetime, until: datetime, job_names: Sequence[str] | None = None
    ) -> list[JobStats]: ...

    def set_paused(self, job_name: str, paused: bool, *, now: datetime) -> bool: ...

    def paused_names(self) -> frozenset[str]: ...

    def watch_pauses(self) -> Generator[list[str], None, None]: ...

    def acquire_slot(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        holder: str,
        until: datetime,
        now: datetime,
    ) -> int | None: ...

    def renew_slot(
        self, job_name: str, key: str, index: int, *, holder: str, until: datetime
    ) -> bool: ...

    def release_slot(self, job_name: str, key: str, index: int, *, holder: str) -> bool: ...

    def held_slots(self, *, now: datetime) -> dict[str, int]: ...

    def take_rate_token(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        window_start: datetime,
        window_end: datetime,
    ) -> bool: ...

    def acquire_lease(
        self, name: str, *, owner: str, until: datetime, now: datetime
    ) -> int | None: ...

    def renew_lease(
        self, name: str, *, owner: str, token: int, until: datetime, now: datetime
    ) -> bool: ...

    def release_lease(self, name: str, *, owner: str, token: int) -> bool: ...

    def get_lease(self, name: str) -> Lease | None: ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncArchiveStore(Protocol):
    """The optional archive port (``client.archive``, ``dogs archive``): a store that can move
    old history rows and failed records into archive collections, one batch per call.

    Kept apart from :class:`AsyncJobStore` so that a store without an archive still meets the
    job-store contract; ``dogs_testing.contract.ArchiveContract`` checks this one.

    Which rows are old is :mod:`dogs_core.domain.archiving`'s rule: a history row whose
    ``started_at`` is before ``cutoff``; an event record in status ``maxTriesReached`` whose
    ``max_tries_reached_at`` is before ``cutoff``, oldest first. Each call moves at most
    ``batch_size`` of them (1..10,000; otherwise ``InvalidOptionError`` and nothing written)
    and returns how many left the live collection for the archive in that call.

    Crash safety: a call may be interrupted at any point; the next call finishes what it left
    (copies kept pending until their source is gone), so that after calls returning ``0`` every
    moved row is in the archive exactly once, keeps its fields (plus ``archivedAt``) and is gone
    from the live collection. A failed record changed meanwhile (revived by ``retry_now``,
    rescheduled) is never deleted, and its archive copy is removed. Retrying a call that raised
    a transient error is safe.
    """

    async def setup_archive(self) -> None:
        """Create the archive collections' indexes and the live collections' indexes the batch
        reads walk. Idempotent."""

    async def archive_history(
        self, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        """Move up to ``batch_size`` history rows started before ``cutoff``, stamped
        ``archived_at``; the number moved."""

    async def archive_failed_records(
        self, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        """Move up to ``batch_size`` failed event records marked before ``cutoff``, stamped
        ``archived_at``; the number moved."""

    async def count_archivable(self, kind: ArchiveKind, *, cutoff: datetime) -> int:
        """How many documents of ``kind`` a run with ``cutoff`` would move (a dry run)."""

    async def count_archived(self, kind: ArchiveKind) -> int:
        """How many documents of ``kind`` the archive holds (settled and pending)."""


@runtime_checkable
class ArchiveStore(Protocol):
    """The sync :class:`AsyncArchiveStore`: the same contract without ``async``."""

    def setup_archive(self) -> None: ...

    def archive_history(
        self, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int: ...

    def archive_failed_records(
        self, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int: ...

    def count_archivable(self, kind: ArchiveKind, *, cutoff: datetime) -> int: ...

    def count_archived(self, kind: ArchiveKind) -> int: ...
