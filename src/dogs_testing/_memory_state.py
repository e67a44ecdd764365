"""The state of the in-memory store and its upkeep: the records, the claim index (per
``(partition, job_name)`` bucket, in claim order), the unique and per-name indexes, TTL expiry
heaps and history rows. See :mod:`dogs_testing.memory` for the semantics and the complexity.
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
import itertools
import threading
from bisect import bisect_left, insort
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from dogs_core.domain.claimable import is_failed
from dogs_core.domain.progress import Progress
from dogs_core.domain.records import (
    ClaimedJob,
    ClaimRequest,
    Duplicate,
    HistoryRecord,
    JobRecord,
    JobType,
    NewJob,
    PreviousAttempt,
    Scheduled,
    ScheduleOutcome,
    to_millis,
)
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_core.errors import StoreError
from dogs_core.ports import Clock, StoreCapabilities
from dogs_testing._memory_feeds import FeedHub

__all__ = ["MemoryState"]

# (-priority, next_run_at, insertion seq, id): the claim order, unique thanks to seq.
_Key = tuple[int, datetime, int, str]
_Bucket = tuple[int, str]  # (partition, job_name)

_MIN_DT = datetime.min.replace(tzinfo=UTC)
_CAPABILITIES = StoreCapabilities(claim_path="memory", supports_probe=True)

#: What ending a lock for good unsets (reschedule, terminal mark, releasing every lock).
_NO_LOCK: dict[str, Any] = {
    "lock_id": None,
    "locked_until": None,
    "claim_was_stale": None,
    "lock_owner": None,
    "lock_released_at": None,
}


#: A failed record (the claimable rule's last clause): kept out of the claim index, in the
#: terminal one. The store's modules import it under this name.
_is_terminal = is_failed


# Values a shallow copy shares safely (immutable); anything else is deep-copied.
_IMMUTABLE = frozenset({str, int, float, bool, type(None), bytes, datetime})


def _copy_params(params: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if params is None:
        return None
    copied = dict(params)
    for value in copied.values():
        if type(value) not in _IMMUTABLE:
            return copy.deepcopy(copied)
    return copied


def _ms(moment: datetime | None) -> datetime | None:
    return None if moment is None else to_millis(moment)


def _stored(record: JobRecord) -> JobRecord:
    """``record`` as the store keeps it: datetimes in milliseconds, params copied."""
    return dataclasses.replace(
        record,
        next_run_at=to_millis(record.next_run_at),
        last_run_at=_ms(record.last_run_at),
        locked_until=_ms(record.locked_until),
        lock_released_at=_ms(record.lock_released_at),
        max_tries_reached_at=_ms(record.max_tries_reached_at),
        expires_at=_ms(record.expires_at),
        params=_copy_params(record.params),
        trace_context=dict(record.trace_context) if record.trace_context else None,
        workflow=copy.deepcopy(record.workflow) if record.workflow else None,
        start_before=_ms(record.start_before),
        debounce_until=_ms(record.debounce_until),
        behind_until=_ms(record.behind_until),
        parked_at=_ms(record.parked_at),
        parked_run_at=_ms(record.parked_run_at),
        schedule=_stored_spec(record.schedule),
        sleeping_until=_ms(record.sleeping_until),
    )


def _stored_spec(spec: ScheduleSpec | None) -> ScheduleSpec | None:
    """A runtime schedule's spec as stored: its ``updated_at`` in milliseconds."""
    if spec is None or spec.updated_at is None:
        return spec
    return dataclasses.replace(spec, updated_at=to_millis(spec.updated_at))


def _out(record: JobRecord) -> JobRecord:
    progress = record.progress
    if progress is not None:
        # Shown only while the execution that reported it holds the record (ports/following).
        shown = progress if progress.execution_id == record.lock_id else None
        return dataclasses.replace(
            record, params=_copy_params(record.params), progress=_copy_progress(shown)
        )
    return dataclasses.replace(record, params=_copy_params(record.params))


def _copy_progress(progress: Progress | None) -> Progress | None:
    """``progress`` with its data copied and its time in milliseconds (as a store keeps it)."""
    if progress is None:
        return None
    data = None if progress.data is None else copy.deepcopy(dict(progress.data))
    return dataclasses.replace(progress, data=data, updated_at=to_millis(progress.updated_at))


def _history_row(record: HistoryRecord) -> HistoryRecord:
    """``record`` as the store keeps it: datetimes in milliseconds, params and result copied."""
    result = record.result
    return HistoryRecord(
        execution_id=record.execution_id,
        job_id=record.job_id,
        job_name=record.job_name,
        type=record.type,
        priority=record.priority,
        tries=record.tries,
        started_at=to_millis(record.started_at),
        ended_at=to_millis(record.ended_at),
        status=record.status,
        expires_at=to_millis(record.expires_at),
        params=_copy_params(record.params),
        result=result if type(result) in _IMMUTABLE else copy.deepcopy(result),
        error_message=record.error_message,
        unique_identifier=record.unique_identifier,
        was_stale=record.was_stale,
        error_type=record.error_type,
        error_traceback=record.error_traceback,
        owner=record.owner,
        progress=None if record.progress is None else _copy_progress(record.progress),
        workflow_id=record.workflow_id,
        outcome=record.outcome,
        ran=record.ran,
        superseded_by=record.superseded_by,
    )


class MemoryState:
    """The records, history rows and every index over them, behind one ``threading.Lock``;
    every change goes through :meth:`_put` (records) or :meth:`_insert_history` (history), which
    keep the indexes in step. :class:`~dogs_testing.memory.SyncInMemoryJobStore` adds the port.
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._next_seq = 0
        self._records: dict[str, JobRecord] = {}
        self._seq: dict[str, int] = {}
        self._index: dict[_Bucket, list[_Key]] = {}
        self._unique: dict[str, str] = {}  # unique_identifier -> id
        self._recurrent: dict[str, str] = {}  # job_name -> id of its recurrent record
        self._by_name: dict[str, dict[str, None]] = {}  # job_name -> ids, insertion order
        self._terminal: dict[str, None] = {}  # ids of terminal event records
        self._expiry: list[tuple[datetime, int, str]] = []  # heap, lazily invalidated
        self._history: dict[str, HistoryRecord] = {}  # execution_id -> row
        self._history_seq: dict[str, int] = {}
        self._history_by_name: dict[str, dict[str, None]] = {}
        self._history_by_job: dict[str, dict[str, None]] = {}  # job_id -> execution ids
        self._history_expiry: list[tuple[datetime, int, str]] = []
        self._feeds = FeedHub()  # the change feeds' subscribers, offered every change

    # ------------------------------------------------------------------ internal state upkeep

    @contextmanager
    def _state(self) -> Iterator[None]:
        with self._lock:
            self._purge_expired()
            yield

    def _purge_expired(self) -> None:
        if self._clock is None:
            return
        now = to_millis(self._clock.now())
        while self._expiry and self._expiry[0][0] <= now:
            expires_at, _, record_id = heapq.heappop(self._expiry)
            record = self._records.get(record_id)
            if record is not None and record.expires_at == expires_at:
                self._put(record, None)
        while self._history_expiry and self._history_expiry[0][0] <= now:
            expires_at, _, execution_id = heapq.heappop(self._history_expiry)
            row = self._history.get(execution_id)
            if row is not None and row.expires_at == expires_at:
                del self._history[execution_id]
                del self._history_seq[execution_id]
                _unindex(self._history_by_name, row.job_name, execution_id)
                _unindex(self._history_by_job, row.job_id, execution_id)

    def _slot(self, record: JobRecord | None) -> tuple[_Bucket, _Key] | None:
        """Where ``record`` sits in the claim index. The index holds the claimable rule's
        clauses that do not depend on the time (:mod:`dogs_core.domain.claimable`): one bucket
        per ``(partition, job_name)`` for ``IN_PARTITION`` and ``NAME_REQUESTED`` (a record
        without a partition is in none), no failed record for ``NOT_FAILED``. The walks check
        the other two, ``DUE`` and ``LOCK_FREE``, entry by entry."""
        if record is None or record.partition is None or _is_terminal(record):
            return None
        seq = self._seq[record.id]
        return (record.partition, record.job_name), (
            -record.priority,
            record.next_run_at,
            seq,
            record.id,
        )

    def _put(self, old: JobRecord | None, new: JobRecord | None) -> None:
        """Replace ``old`` by ``new`` (insert when ``old`` is None, delete when ``new`` is None),
        keeping every index in step. Callers have checked the unique constraints."""
        current = new if new is not None else old
        assert current is not None
        record_id = current.id
        if old is None:
            self._seq[record_id] = self._next_seq
            self._next_seq += 1
            self._by_name.setdefault(current.job_name, {})[record_id] = None
        old_slot, new_slot = self._slot(old), self._slot(new)
        if old_slot != new_slot:
            if old_slot is not None:
                entries = self._index[old_slot[0]]
                del entries[bisect_left(entries, old_slot[1])]
                if not entries:
                    del self._index[old_slot[0]]
            if new_slot is not None:
                insort(self._index.setdefault(new_slot[0], []), new_slot[1])
        old_uid = old.unique_identifier if old is not None else None
        new_uid = new.unique_identifier if new is not None else None
        if old_uid != new_uid:
            if old_uid is not None:
                del self._unique[old_uid]
            if new_uid is not None:
                self._unique[new_uid] = record_id
        was_recurrent = old is not None and old.type is JobType.RECURRENT
        is_recurrent = new is not None and new.type is JobType.RECURRENT
        if was_recurrent and not is_recurrent:
            del self._recurrent[current.job_name]
        elif is_recurrent and not was_recurrent:
            self._recurrent[current.job_name] = record_id
        if new is not None and _is_terminal(new):
            self._terminal[record_id] = None
        else:
            self._terminal.pop(record_id, None)
        if new is not None:
            if new.expires_at is not None and (old is None or old.expires_at != new.expires_at):
                heapq.heappush(self._expiry, (new.expires_at, self._seq[record_id], record_id))
            self._records[record_id] = new
        else:
            del self._records[record_id]
            del self._seq[record_id]
            ids = self._by_name[current.job_name]
            del ids[record_id]
            if not ids:
                del self._by_name[current.job_name]
        if self._feeds.jobs_watched:  # a flag: nobody follows a job's progress, nothing to do
            self._feeds.offer_job(record_id)

    def _fenced(self, job_id: str, lock_id: str) -> JobRecord | None:
        record = self._records.get(job_id)
        return record if record is not None and record.lock_id == lock_id else None

    def _conflict(self, record: JobRecord) -> str | None:
        """Why inserting ``record`` would break a unique index, or None."""
        if record.id in self._records:
            return f"duplicate id {record.id!r}"
        if record.unique_identifier is not None and record.unique_identifier in self._unique:
            return f"duplicate unique_identifier {record.unique_identifier!r}"
        if record.type is JobType.RECURRENT and record.job_name in self._recurrent:
            return f"a recurrent record for job {record.job_name!r} already exists"
        return None

    def _insert(self, job: NewJob) -> ScheduleOutcome:
        if job.id in self._records:  # a retried insert that had landed: idempotent
            return Scheduled(id=job.id)
        uid = job.unique_identifier
        if uid is not None and uid in self._unique:
            return Duplicate(existing_id=self._unique[uid], unique_identifier=uid)
        record = _stored(
            JobRecord(
                id=job.id,
                job_name=job.job_name,
                type=job.type,
                priority=job.priority,
                next_run_at=job.next_run_at,
                partition=job.partition,
                params=job.params,
                unique_identifier=uid,
                trace_context=job.trace_context,
                workflow=job.workflow,
                tags=job.tags,
                start_before=job.start_before,
                unique_window=job.unique_window,
                debounce_until=job.debounce_until,
                behind_until=job.behind_until,
                parked_at=job.parked_at,
                parked_run_at=job.parked_run_at,
                schedule=job.schedule,
            )
        )
        problem = self._conflict(record)
        if problem is not None:
            raise StoreError(f"cannot schedule {job.job_name!r}: {problem}")
        self._put(None, record)
        self._feeds.offer_record(record)
        return Scheduled(id=record.id)

    def _walk(
        self, partition: int, job_names: Sequence[str], now: datetime
    ) -> tuple[str | None, int]:
        """The record a claim would take, and how many index entries the search examined."""
        best: _Key | None = None
        examined = 0
        for name in dict.fromkeys(job_names):
            entries = self._index.get((partition, name))
            if not entries:
                continue
            i, size = 0, len(entries)
            while i < size:
                key = entries[i]
                examined += 1
                if best is not None and key >= best:
                    break
                if key[1] > now:  # not DUE, nor the rest of this priority level
                    i = bisect_left(entries, (key[0] + 1, _MIN_DT, -1, ""), i + 1)
                    continue
                locked_until = self._records[key[3]].locked_until
                if locked_until is None or locked_until <= now:  # LOCK_FREE
                    best = key
                    break
                i += 1
        return (None if best is None else best[3]), examined

    def _walk_many(
        self, partition: int, job_names: Sequence[str], now: datetime, limit: int
    ) -> list[str]:
        """The records ``limit`` claims in a row would take, best first. A claim changes no
        key of the order and only makes its record ineligible, so these are the ``limit``
        smallest eligible keys: at most ``limit`` per name, found as :meth:`_walk` finds one,
        then merged."""
        per_name: list[list[_Key]] = []
        for name in dict.fromkeys(job_names):
            entries = self._index.get((partition, name))
            if not entries:
                continue
            found: list[_Key] = []
            i, size = 0, len(entries)
            while i < size:
                key = entries[i]
                if key[1] > now:  # not DUE, nor the rest of this priority level
                    i = bisect_left(entries, (key[0] + 1, _MIN_DT, -1, ""), i + 1)
                    continue
                locked_until = self._records[key[3]].locked_until
                if locked_until is None or locked_until <= now:  # LOCK_FREE
                    found.append(key)
                    if len(found) == limit:
                        break
                i += 1
            if found:
                per_name.append(found)
        if len(per_name) == 1:
            return [key[3] for key in per_name[0]]
        return [key[3] for key in itertools.islice(heapq.merge(*per_name), limit)]

    def _take(
        self,
        record_id: str,
        request: ClaimRequest,
        now: datetime,
        locked_until: datetime,
    ) -> ClaimedJob:
        """Lock an eligible record for ``request`` (``now`` and ``locked_until`` in ms)."""
        old = self._records[record_id]
        was_stale = old.locked_until is not None and not old.lock_released
        tries = (old.tries or 0) + 1
        # Built field by field: dataclasses.replace costs several times more, per claimed job.
        new = JobRecord(
            id=old.id,
            job_name=old.job_name,
            type=old.type,
            priority=old.priority,
            next_run_at=old.next_run_at,
            partition=old.partition,
            params=old.params,
            unique_identifier=old.unique_identifier,
            last_run_at=now,
            locked_until=locked_until,
            lock_id=request.lock_id,
            claim_was_stale=was_stale,
            tries=tries,
            status=old.status,
            max_tries_reached_at=old.max_tries_reached_at,
            expires_at=old.expires_at,
            lock_owner=request.owner,
            lock_released_at=None,
            trace_context=old.trace_context,
            workflow=old.workflow,
            tags=old.tags,
            start_before=old.start_before,
            unique_window=old.unique_window,
            debounce_until=old.debounce_until,
            behind_until=old.behind_until,
            parked_at=old.parked_at,
            parked_run_at=old.parked_run_at,
            schedule=old.schedule,
            held=old.held,
            steps=old.steps,
            sleeping_until=old.sleeping_until,
        )
        # A claim changes no field any index depends on (partition, name, priority, next run,
        # type, status, identifier, expiry): replacing the record is all `_put` would do. (It
        # drops an earlier execution's progress, which no read shows any more.)
        self._records[record_id] = new
        if self._feeds.jobs_watched:
            self._feeds.offer_job(record_id)
        return ClaimedJob(
            job_id=record_id,
            execution_id=request.lock_id,
            job_name=new.job_name,
            type=new.type,
            params=_copy_params(new.params),
            tries=tries,
            priority=new.priority,
            locked_until=locked_until,
            partition=new.partition,
            unique_identifier=new.unique_identifier,
            was_stale=was_stale,
            last_run_at=now,
            next_run_at=new.next_run_at,
            owner=request.owner,
            previous_attempt=_previous_attempt(old) if was_stale else None,
            trace_context=new.trace_context,
            workflow=copy.deepcopy(new.workflow) if new.workflow else None,
            tags=new.tags,
            start_before=new.start_before,
            unique_window=new.unique_window,
            schedule=new.schedule,
            held_since=None if old.holding is None else old.holding.since,
            steps=copy.deepcopy(new.steps) if new.steps else (),
        )

    def _insert_history(self, row: HistoryRecord) -> None:
        """Store ``row`` unless a row of its execution exists: the first row wins whole."""
        key = row.execution_id
        if key in self._history:
            return
        self._history_seq[key] = self._next_seq
        self._next_seq += 1
        self._history_by_name.setdefault(row.job_name, {})[key] = None
        self._history_by_job.setdefault(row.job_id, {})[key] = None
        heapq.heappush(self._history_expiry, (row.expires_at, self._history_seq[key], key))
        self._history[key] = row
        self._feeds.offer_history(row, _history_row)


def _previous_attempt(old: JobRecord) -> PreviousAttempt | None:
    """The attempt whose expired lock a claim of ``old`` takes over (None without a lock id:
    a record some other writer left with a deadline and no id)."""
    if old.lock_id is None or old.locked_until is None:
        return None
    return PreviousAttempt(
        execution_id=old.lock_id,
        started_at=old.last_run_at,
        locked_until=old.locked_until,
        tries=old.tries or 0,
        owner=old.lock_owner,
    )


def _unindex(index: dict[str, dict[str, None]], key: str, member: str) -> None:
    """Remove ``member`` from ``index[key]``, and the key when nothing is left under it."""
    members = index[key]
    del members[member]
    if not members:
        del index[key]
