"""An in-memory job store with the semantics of the MongoDB adapter, for tests and demos.

:class:`SyncInMemoryJobStore` implements the sync :class:`~dogs_core.ports.JobStore` and holds
all the state behind one ``threading.Lock`` (worker threads use it directly).
:class:`InMemoryJobStore` implements :class:`~dogs_core.ports.AsyncJobStore` over the same state
(``InMemoryJobStore().sync`` is its sync face), with one scheduling checkpoint per call, as a
network round trip would have, so a busy claim loop cannot starve the event loop.

What it emulates of MongoDB and @orion-js/dogs:

* datetimes are stored truncated to the millisecond (BSON dates), ``params`` are copied in and out;
* ``schedule`` of a ``NewJob`` whose ``id`` is already stored is an idempotent retry and reports
  ``Scheduled(id)``; a taken ``unique_identifier`` reports ``Duplicate`` with the holder's id;
* one global namespace of ``unique_identifier`` values (Dogs' sparse unique index) and one record
  per recurrent job name (its partial unique index);
* claims: exact partition match, the eligibility selector and order of :mod:`dogs_core.ports`,
  ties broken by insertion order; ``tries`` +1, ``lock_owner`` from the request and
  ``claim_was_stale`` (a ``locked_until`` was present before the claim and the lock had not been
  released, ``lock_released_at``) at every claim; a stale claim hands out the
  ``previous_attempt`` it took over (the before-image, as MongoDB's ``findOneAndUpdate`` path);
* ``lock_id`` fencing on every execution write; ``release_lock`` keeps the lock id and owner
  and sets ``lock_released_at``; ``reschedule``, ``mark_max_tries_reached`` and ``unlock_all``
  remove every lock field;
* history rows keyed by execution id, the first row written for an execution winning whole
  (MongoDB's ``$setOnInsert`` upsert);
* the operators' steps (``delete_job``, ``modify_job``, ``delete_jobs``) are atomic against
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

What it does not: transactions. ``schedule``/``schedule_many`` with a ``session`` raise
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
a claim examines. ``find_jobs`` (over one name's records, the failed ones or all of them; a page
of ``limit`` costs ``O(n log limit)``), ``status_counts``, ``delete_jobs``, ``unlock_all`` and
``reconcile_partitions`` (over the given names) scan records; they are not on the hot path.

The state and its indexes (and their upkeep) are in ``dogs_testing._memory_state``, the
operators' reads and writes in ``dogs_testing._memory_steering``, the fleet controls in
``dogs_testing._memory_controls``, the stats (``job_stats``, a scan of the names' history rows)
in ``dogs_testing._memory_stats``; this module holds the two faces of the port over them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import anyio.lowlevel

from dogs_core.domain import validation
from dogs_core.domain.batches import check_claim_requests, check_completions
from dogs_core.domain.feeds import check_history_filter
from dogs_core.domain.partitions import check_chosen_partition
from dogs_core.domain.records import (
    BulkScheduleResult,
    ClaimedJob,
    ClaimRequest,
    Duplicate,
    HistoryRecord,
    HistoryStatus,
    ItemError,
    JobRecord,
    JobStatus,
    JobType,
    NewJob,
    Scheduled,
    ScheduleOutcome,
    to_millis,
)
from dogs_core.domain.wakeups import RecordChange
from dogs_core.errors import InvalidOptionError, SessionNotSupportedError, StoreError
from dogs_core.ids import new_record_id
from dogs_core.ports import Clock, StoreCapabilities
from dogs_core.runtime.forwarding import ForwardingJobStore
from dogs_testing._memory_archive import AsyncMemoryArchive, MemoryArchive
from dogs_testing._memory_controls import MemoryControls
from dogs_testing._memory_state import (
    _CAPABILITIES,
    _copy_params,
    _history_row,
    _is_terminal,
    _ms,
    _out,
    _stored,
)
from dogs_testing._memory_stats import MemoryStats
from dogs_testing._memory_steering import MemorySteering

__all__ = ["InMemoryJobStore", "SyncInMemoryJobStore"]


#: What releasing a lock for good unsets (reschedule, terminal mark, unlock_all).
_NO_LOCK: dict[str, Any] = {
    "lock_id": None,
    "locked_until": None,
    "claim_was_stale": None,
    "lock_owner": None,
    "lock_released_at": None,
}


class SyncInMemoryJobStore(MemorySteering, MemoryControls, MemoryStats, MemoryArchive):
    """The in-memory store, sync face (:class:`~dogs_core.ports.JobStore`). Thread-safe.

    ``clock`` enables TTL emulation: records and history rows whose ``expires_at`` is not after
    ``clock.now()`` disappear at the next call. Without a clock nothing expires.
    """

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

    # ------------------------------------------------------------------ the JobStore port

    def setup(self) -> None:
        """Nothing to create."""

    def capabilities(self) -> StoreCapabilities:
        return _CAPABILITIES

    def server_time(self) -> datetime | None:
        """The store's ``clock`` (to the millisecond, as MongoDB's), or ``None`` without one.

        The store's clock plays the database server's: workers and clients over this store
        whose own clocks are skewed (:class:`~dogs_core.runtime.clock.SkewedClock`) measure
        their offset to it and compute on it, as they do against MongoDB."""
        return None if self._clock is None else to_millis(self._clock.now())

    def schedule(self, job: NewJob, *, session: object | None = None) -> ScheduleOutcome:
        """See the port; a ``session`` is refused (:func:`_refuse_session`)."""
        _refuse_session(session)
        with self._state():
            return self._insert(job)

    def schedule_many(
        self, jobs: Sequence[NewJob], *, session: object | None = None
    ) -> BulkScheduleResult:
        _refuse_session(session)
        with self._state():
            outcomes: list[ScheduleOutcome | None] = []
            errors: list[ItemError] = []
            for index, job in enumerate(jobs):
                try:
                    outcomes.append(self._insert(job))
                except Exception as error:  # an item's failure never stops the others
                    errors.append(ItemError(index=index, error=error, job=job))
                    outcomes.append(None)
            return BulkScheduleResult(
                scheduled_count=sum(isinstance(o, Scheduled) for o in outcomes),
                skipped_count=sum(isinstance(o, Duplicate) for o in outcomes),
                errors=tuple(errors),
                outcomes=tuple(outcomes),
            )

    def ensure_recurrent(
        self, job_name: str, *, priority: int, partition: int, now: datetime
    ) -> None:
        with self._state():
            record_id = self._recurrent.get(job_name)
            if record_id is None:
                record = JobRecord(
                    id=new_record_id(),
                    job_name=job_name,
                    type=JobType.RECURRENT,
                    priority=priority,
                    next_run_at=to_millis(now),
                    partition=partition,
                )
                self._put(None, record)
                self._feeds.offer_record(record)
            else:
                old = self._records[record_id]
                self._put(old, dataclasses.replace(old, priority=priority, status=None))

    def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        with self._state():
            now = to_millis(request.now)
            record_id, _ = self._walk(request.partition, request.job_names, now)
            if record_id is None:
                return None
            return self._take(record_id, request, now, to_millis(request.locked_until))

    def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        """Exactly ``len(requests)`` claims in a row, under one lock: the best eligible records,
        the i-th locked for the i-th request."""
        checked = check_claim_requests(requests)
        if not checked or not checked[0].job_names:
            return []
        first = checked[0]
        now = to_millis(first.now)
        locked_until = to_millis(first.locked_until)
        with self._state():
            ids = self._walk_many(first.partition, first.job_names, now, len(checked))
            return [
                self._take(record_id, request, now, locked_until)
                for record_id, request in zip(ids, checked, strict=False)
            ]

    def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        with self._state():
            old = self._fenced(job_id, lock_id)
            if old is None:
                return False
            self._put(old, dataclasses.replace(old, locked_until=to_millis(locked_until)))
            return True

    def complete_many(self, claims: Sequence[tuple[str, str]]) -> list[bool]:
        """Each pair's fenced delete, under one lock: exact verdicts (whether this call deleted
        the record), without the leeway the port allows batch-deleting stores."""
        pairs = check_completions(claims)
        with self._state():
            verdicts: list[bool] = []
            for job_id, lock_id in pairs:
                old = self._fenced(job_id, lock_id)
                deleted = old is not None and old.type is JobType.EVENT
                if deleted:
                    self._put(old, None)
                verdicts.append(deleted)
            return verdicts

    def reschedule(
        self,
        job_id: str,
        lock_id: str,
        *,
        next_run_at: datetime,
        priority: int | None,
        reset_tries: bool,
        tries: int | None = None,
    ) -> bool:
        """``tries``, when given, wins over ``reset_tries``."""
        if tries is not None:
            validation.integer("tries", tries, minimum=0)
        with self._state():
            old = self._fenced(job_id, lock_id)
            if old is None:
                return False
            new = dataclasses.replace(
                old,
                next_run_at=to_millis(next_run_at),
                priority=old.priority if priority is None else priority,
                tries=tries if tries is not None else 0 if reset_tries else old.tries,
                **_NO_LOCK,
            )
            self._put(old, new)
            self._feeds.offer_record(new)
            return True

    def mark_max_tries_reached(
        self, job_id: str, lock_id: str, *, now: datetime, expires_at: datetime | None
    ) -> bool:
        with self._state():
            old = self._fenced(job_id, lock_id)
            if old is None or old.type is not JobType.EVENT:
                return False
            new = dataclasses.replace(
                old,
                status=JobStatus.MAX_TRIES_REACHED,
                max_tries_reached_at=to_millis(now),
                expires_at=_ms(expires_at),
                **_NO_LOCK,
            )
            self._put(old, new)
            return True

    def demote_stale(self, job_id: str, lock_id: str) -> bool:
        with self._state():
            old = self._fenced(job_id, lock_id)
            if old is None:
                return False
            self._put(old, dataclasses.replace(old, priority=0))
            return True

    def release_lock(self, job_id: str, lock_id: str, *, now: datetime) -> bool:
        with self._state():
            old = self._fenced(job_id, lock_id)
            if old is None:
                return False
            moment = to_millis(now)
            new = dataclasses.replace(old, locked_until=moment, lock_released_at=moment)
            self._put(old, new)
            self._feeds.offer_record(new)
            return True

    def probe(self, *, hint: str, job_names: Sequence[str], partition: int, now: datetime) -> float:
        """The number of index entries the claim would examine (the hint changes nothing)."""
        with self._state():
            return float(self._walk(partition, job_names, to_millis(now))[1])

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

    def unlock_all(self) -> int:
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

    def write_history_many(self, records: Sequence[HistoryRecord]) -> None:
        """Each record inserted in order, under one lock, unless its execution has a row: the
        first row wins whole. Every row is copied before the first is stored: a record that
        cannot be copied writes nothing."""
        rows = [_history_row(record) for record in records]
        if not rows:
            return
        with self._state():
            for row in rows:
                self._insert_history(row)

    def get_executions(
        self,
        job_name: str | None = None,
        *,
        job_id: str | None = None,
        status: HistoryStatus | None = None,
        limit: int = 20,
        skip: int = 0,
    ) -> list[HistoryRecord]:
        check_history_filter(job_name, job_id)
        wanted = _check_status(status)
        validation.integer("limit", limit, minimum=0)
        validation.integer("skip", skip, minimum=0)
        with self._state():
            if job_id is not None:
                keys = self._history_by_job.get(job_id, {})
            else:
                keys = self._history_by_name.get(job_name or "", {})
            rows = [self._history[key] for key in keys]
            if job_id is not None and job_name is not None:
                rows = [row for row in rows if row.job_name == job_name]
            if wanted is not None:
                rows = [row for row in rows if row.status is wanted]
            rows.sort(
                key=lambda row: (row.started_at, row.ended_at, self._history_seq[row.execution_id]),
                reverse=True,
            )
            return [
                dataclasses.replace(
                    row, params=_copy_params(row.params), result=copy.deepcopy(row.result)
                )
                for row in rows[skip : skip + limit]
            ]

    def watch_records(self, job_names: Sequence[str]) -> Generator[list[RecordChange], None, None]:
        """The port's feed: every insert, reschedule, release, unlock and partition repair of a
        record of ``job_names``, with its name, partition and next run (see
        :mod:`dogs_testing._memory_feeds`)."""
        return self._feeds.watch_records(job_names)

    def watch_history(
        self, *, job_ids: Sequence[str] | None = None, job_names: Sequence[str] | None = None
    ) -> Generator[list[HistoryRecord], None, None]:
        """The port's feed of history rows as first written (copies)."""
        return self._feeds.watch_history(job_ids=job_ids, job_names=job_names)

    def get_job(self, job_id: str) -> JobRecord | None:
        with self._state():
            record = self._records.get(job_id)
            return None if record is None else _out(record)

    def close(self) -> None:
        """Nothing to release; the state stays readable."""


def _check_status(status: object) -> HistoryStatus | None:
    """A ``get_executions`` status filter: ``None`` or a :class:`HistoryStatus` (or its value)."""
    if status is None:
        return None
    try:
        return HistoryStatus(status) if isinstance(status, str) else _bad_status(status)
    except ValueError:
        return _bad_status(status)


def _bad_status(status: object) -> HistoryStatus:
    choices = ", ".join(s.value for s in HistoryStatus)
    raise InvalidOptionError("status", status, f"expected one of {choices}")


def _refuse_session(session: object | None) -> None:
    """The in-memory store has no transactions to join: a ``session`` is refused before
    anything is written (a job that appeared whatever became of the caller's transaction would
    be worse than an error)."""
    if session is not None:
        raise SessionNotSupportedError(
            f"the in-memory store cannot join a database session ({type(session).__name__}): "
            "it has no transactions, so nothing was written; schedule without session=, or "
            "use a MongoDB store"
        )


class InMemoryJobStore(ForwardingJobStore, AsyncMemoryArchive):
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

    async def _forward(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        await anyio.lowlevel.checkpoint()
        return getattr(self.sync, method)(*args, **kwargs)

    def _forward_feed(self, method: str, /, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        """The feeds are native async generators over the shared state (no thread): a write
        from any thread wakes them."""
        open_feed = getattr(self.sync._feeds, f"{method}_async")
        feed: AsyncGenerator[Any, None] = open_feed(*args, **kwargs)
        return feed
