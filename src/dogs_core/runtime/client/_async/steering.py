"""The operator half of the scheduling client: see and steer single jobs.

``cancel``, ``retry_now``, ``reschedule``, ``delete``, ``delete_jobs``, ``find_jobs`` and the
history reads. Each action is one atomic store primitive (``delete_job``, ``modify_job``, or a
fenced ``reschedule`` of a running recurrent record); :mod:`dogs_core.domain.steering` says what
follows. When a record changes between the read that chose the primitive and the primitive
itself (a claim landed in between), the action reads again and chooses again, a few times.

This module is the source of truth; ``_sync/steering.py`` is generated from it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeAlias

from dogs_core.domain import validation
from dogs_core.domain.audit import AuditAction
from dogs_core.domain.definitions import (
    JobDefinition,
    RecurrentJobDefinition,
)
from dogs_core.domain.feeds import check_history_status
from dogs_core.domain.outcome import Reschedule
from dogs_core.domain.records import (
    DEFAULT_RETENTION,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobState,
    JobType,
)
from dogs_core.domain.schedules import event_run_at, next_run_after, parse_duration
from dogs_core.domain.settle import Settlement
from dogs_core.domain.steering import (
    MAX_PAGE_SIZE,
    AlreadyFinished,
    Cancelled,
    CancelOutcome,
    Deleted,
    DeleteOutcome,
    JobChange,
    JobPage,
    NotFound,
    Rescheduled,
    RescheduleOutcome,
    Running,
    cancel_rows,
    check_bulk_state,
    check_state,
    retry_now_change,
)
from dogs_core.domain.tags import tag_filter_arguments
from dogs_core.errors import (
    InvalidOptionError,
    InvalidScheduleError,
    TransientStoreError,
)
from dogs_core.ids import new_execution_id
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.client._async.audit import audited
from dogs_core.runtime.client.calls import RACE_ROUNDS, busy_error
from dogs_core.runtime.client.scheduling import (
    ClientBase,
    job_name,
    unique_identifier_for,
    validate_job_id,
    validate_page,
)
from dogs_core.runtime.plumbing._async.retry import retry_transient

__all__ = ["SteeringClient"]

logger = logging.getLogger("dogs.client")

_ChangeOf: TypeAlias = Callable[[JobRecord, datetime], JobChange]


class SteeringClient(ClientBase):
    """Cancel, retry, reschedule, delete and find jobs; read their history."""

    store: AsyncJobStore
    operation_timeout: float | None
    """Seconds a call retries a store that keeps failing (see ``DogsClient``)."""

    async def _ensure_clock(self) -> bool:
        """Measure the clock when due, before a call whose outcome depends on ``now`` (the
        client implements it: see ``DogsClient._ensure_clock``)."""
        raise NotImplementedError

    # -- finding ------------------------------------------------------------------------------

    async def find_jobs(
        self,
        job: JobDefinition | str | None = None,
        *,
        state: JobState | str | None = None,
        unique_key: str | None = None,
        limit: int = 100,
        after: str | None = None,
        tags: str | Sequence[str] | None = None,
    ) -> JobPage:
        """One page of records in creation order, optionally of one job, one ``state``, one
        unique key and ``tags`` (one, or several: records carrying all). ``limit`` is 1 to
        1000; pass the page's ``next_after`` as ``after`` for the next page."""
        wanted = check_state(state)
        by_tags = tag_filter_arguments(tags)  # none when not given (a store older than tags)
        size = validation.integer("limit", limit, minimum=1)
        if size > MAX_PAGE_SIZE:
            raise InvalidOptionError("limit", limit, f"must be at most {MAX_PAGE_SIZE}")
        if after is not None:
            after = validate_job_id(after, field="after")
        name = None if job is None else job_name(job)
        identifier = (
            None if unique_key is None else unique_identifier_for(self.jobs, job, unique_key)
        )
        if wanted is not None:
            await self._ensure_clock()
        records = await retry_transient(
            lambda: self.store.find_records(
                job_name=name,
                state=wanted,
                unique_identifier=identifier,
                after=after,
                limit=size + 1,
                now=self.clock.now(),
                **by_tags,
            ),
            what="find jobs",
            deadline=self.operation_timeout,
        )
        page = tuple(records[:size])
        return JobPage(page, page[-1].id if len(records) > size else None)

    async def get_executions(
        self,
        job: JobDefinition | str | None = None,
        *,
        job_id: str | None = None,
        status: HistoryStatus | str | None = None,
        limit: int = 20,
        skip: int = 0,
    ) -> list[HistoryRecord]:
        """Finished executions of one job name, or of one job (``job_id``), newest first,
        optionally of one ``status``."""
        validate_page(limit, skip)
        if job_id is not None:
            job_id = validate_job_id(job_id)
        if job is None and job_id is None:
            raise InvalidOptionError("job", None, "give a job (or its name), a job_id, or both")
        wanted = check_history_status(status)
        name = None if job is None else job_name(job)
        return await retry_transient(
            lambda: self.store.read_history(
                name, job_id=job_id, status=wanted, limit=limit, skip=skip
            ),
            what="read history",
            deadline=self.operation_timeout,
        )

    async def get_result(self, job_id: str) -> HistoryRecord | None:
        """The newest finished execution of job ``job_id`` (its ``result``, ``status`` and
        error), also once its record is gone; ``None`` while it has not finished once."""
        job_id = validate_job_id(job_id)
        rows = await retry_transient(
            lambda: self.store.read_history(job_id=job_id, limit=1),
            what="read result",
            deadline=self.operation_timeout,
        )
        return rows[0] if rows else None

    # -- steering -----------------------------------------------------------------------------

    @audited(AuditAction.CANCEL)
    async def cancel(
        self,
        job_id: str | None = None,
        *,
        unique_key: str | None = None,
        job: JobDefinition | str | None = None,
    ) -> CancelOutcome:
        """Cancel a job by id or by ``unique_key`` (``job`` scopes a key of a job with
        ``unique_scope="job"``).

        An event job's record is removed and a ``cancelled`` history row written; when an
        execution holds it, that execution is fenced off (its writes match nothing) and stopped
        at its next lock renewal or heartbeat, at the latest when its lock time runs out. A
        recurrent job skips its current run: a running execution is stopped the same way, a
        waiting record moves to the slot after its next one. Returns ``Cancelled``,
        ``NotFound`` or ``AlreadyFinished`` (also for a job at its attempt limit: delete it or
        ``retry_now`` it).
        """
        target = await self._target(job_id, unique_key, job)
        if isinstance(target, NotFound):
            return target
        await self._ensure_clock()
        for _ in range(RACE_ROUNDS):
            record = await self._read(target)
            if record is None:
                return await self._gone(target)
            if record.state(self.clock.now()) is JobState.FAILED:
                return AlreadyFinished(target, JobState.FAILED.value)
            if record.type is JobType.RECURRENT:
                outcome = await self._skip_recurrent_run(record)
            else:
                outcome = await self._cancel_event(record)
            if outcome is not None:
                logger.warning("cancelled %s (%s)", record.job_name, target)
                return outcome
        raise busy_error("cancel", target)

    @audited(AuditAction.RETRY)
    async def retry_now(self, job_id: str) -> RescheduleOutcome:
        """Make a job due now. A failed job (at its attempt limit) becomes pending again with
        a fresh budget of tries; a scheduled or retrying one keeps its tries. A running job is
        left alone (``Running``)."""
        job_id = validate_job_id(job_id)
        await self._ensure_clock()
        return await self._modify(job_id, retry_now_change)

    @audited(AuditAction.RESCHEDULE)
    async def reschedule(
        self,
        job_id: str,
        *,
        run_at: datetime | None = None,
        run_in: timedelta | int | float | str | None = None,
        priority: int | None = None,
    ) -> RescheduleOutcome:
        """Move a job that is not running to ``run_at`` or ``run_in`` from now, and/or give it
        ``priority``. A failed job is revived as :meth:`retry_now` does."""
        job_id = validate_job_id(job_id)
        if run_at is None and run_in is None and priority is None:
            raise InvalidOptionError("run_at", None, "give run_at, run_in or priority")
        delay = None if run_in is None else parse_duration(run_in, field="run_in")
        if run_at is not None and not isinstance(run_at, datetime):
            raise InvalidScheduleError("run_at", run_at, "must be a datetime")
        new_priority = None if priority is None else validation.priority("priority", priority)
        moves = run_at is not None or delay is not None

        def change(record: JobRecord, now: datetime) -> JobChange:
            revived = retry_now_change(record, now)
            return JobChange(
                next_run_at=event_run_at(now, delay, run_at) if moves else None,
                priority=new_priority,
                tries=revived.tries,
                revive=revived.revive,
            )

        event_run_at(self.clock.now(), delay, run_at)  # refuse a bad time before any read
        await self._ensure_clock()
        return await self._modify(job_id, change)

    @audited(AuditAction.DELETE)
    async def delete(self, job_id: str) -> DeleteOutcome:
        """Delete a record that is not running, whatever its state, with no history row (use
        :meth:`cancel` to stop a running job). A recurrent record comes back when a worker
        that has its definition starts."""
        job_id = validate_job_id(job_id)
        await self._ensure_clock()
        for _ in range(RACE_ROUNDS):
            now = self.clock.now()
            delete = functools.partial(self.store.delete_record, job_id, unless_running_at=now)
            taken = await retry_transient(
                delete, what="delete job", deadline=self.operation_timeout
            )
            if taken is not None:
                logger.warning("deleted %s (%s)", taken.job_name, job_id)
                return Deleted(taken)
            record = await self._read(job_id)
            if record is None:
                return NotFound(job_id)
            if record.state(self.clock.now()) is JobState.RUNNING:
                return Running(record)
        raise busy_error("delete", job_id)

    @audited(AuditAction.DELETE_JOBS)
    async def delete_jobs(
        self,
        job: JobDefinition | str | None = None,
        *,
        state: JobState | str,
        dry_run: bool = False,
    ) -> int:
        """Delete every record of ``state`` (any but ``running``), of one job when given, and
        return how many; ``dry_run`` only counts them. Retried on transient errors (the
        delete is repeatable; after an attempt whose reply was lost, the count is the retry's,
        without what that attempt deleted)."""
        wanted = check_bulk_state(state)
        validation.boolean("dry_run", dry_run)
        name = None if job is None else job_name(job)
        await self._ensure_clock()
        count = await retry_transient(
            lambda: self.store.delete_records(
                job_name=name, state=wanted, now=self.clock.now(), dry_run=dry_run
            ),
            what="delete jobs",
            deadline=self.operation_timeout,
        )
        if not dry_run:
            logger.warning("deleted %d %s records of %s", count, wanted, name or "every job")
        return count

    # -- helpers ------------------------------------------------------------------------------

    async def _target(
        self, job_id: str | None, unique_key: str | None, job: JobDefinition | str | None
    ) -> str | NotFound:
        if (job_id is None) == (unique_key is None):
            raise InvalidOptionError("job_id", job_id, "give exactly one of job_id and unique_key")
        if job_id is not None:
            job_id = validate_job_id(job_id)
            return job_id
        assert unique_key is not None
        identifier = unique_identifier_for(self.jobs, job, unique_key)
        found = await retry_transient(
            lambda: self.store.find_records(unique_identifier=identifier, limit=1),
            what="find job by unique key",
            deadline=self.operation_timeout,
        )
        return found[0].id if found else NotFound(identifier)

    async def _read(self, job_id: str) -> JobRecord | None:
        return await retry_transient(
            lambda: self.store.get_record(job_id), what="read job", deadline=self.operation_timeout
        )

    async def _gone(self, job_id: str) -> NotFound | AlreadyFinished:
        rows = await retry_transient(
            lambda: self.store.read_history(job_id=job_id, limit=1),
            what="read history",
            deadline=self.operation_timeout,
        )
        return AlreadyFinished(job_id, rows[0].status.value) if rows else NotFound(job_id)

    async def _cancel_event(self, record: JobRecord) -> Cancelled | None:
        """Take the record; ``None`` when it turned terminal meanwhile (read again)."""

        async def settle(error: TransientStoreError) -> JobRecord | None:
            # The delete may have landed: the record as last read is the best image of it.
            return record if await self._read(record.id) is None else None

        taken = await retry_transient(
            lambda: self.store.delete_record(record.id, unless_failed=True),
            what="cancel job",
            on_ambiguous=settle,
            deadline=self.operation_timeout,
        )
        if taken is None:
            return None
        now = self.clock.now()
        was_running = taken.state(now) is JobState.RUNNING
        rows = cancel_rows(
            taken,
            now=now,
            new_execution_id=new_execution_id(),
            retention=self._retention(taken.job_name),
        )
        await self._write_rows(rows)
        execution_id = rows[-1].execution_id if rows else (taken.lock_id if was_running else None)
        return Cancelled(taken.id, taken.job_name, was_running, execution_id)

    async def _skip_recurrent_run(self, record: JobRecord) -> Cancelled | None:
        """Stop the running execution of a recurrent job, or skip its next run; the record
        stays, due at its following slot."""
        definition = self._recurrent_definition(record)
        now = self.clock.now()
        running = record.state(now) is JobState.RUNNING and record.lock_id is not None
        start = max(now, record.next_run_at)
        following = next_run_after(definition.schedule, start, scheduled_at=record.next_run_at)
        if running:
            assert record.lock_id is not None
            lock_id = record.lock_id
            # Fenced by the running execution's lock: it loses the lock at its next write.
            stop = Reschedule(
                following, priority=None, reset_tries=True, history=HistoryStatus.CANCELLED
            )
            verdicts = await retry_transient(
                lambda: self.store.settle_many([Settlement(record.id, lock_id, stop)]),
                what="cancel running job",
                deadline=self.operation_timeout,
            )
            if not verdicts[0]:
                return None
        else:
            change = JobChange(next_run_at=following, tries=0)
            if await self._modify_once(record.id, change, now) is None:
                return None
        rows = cancel_rows(
            record,
            now=now,
            new_execution_id=new_execution_id(),
            retention=definition.save_executions_for,
        )
        await self._write_rows(rows)
        return Cancelled(
            record.id, record.job_name, running, rows[-1].execution_id if rows else None
        )

    async def _modify(self, job_id: str, change_of: _ChangeOf) -> RescheduleOutcome:
        for _ in range(RACE_ROUNDS):
            record = await self._read(job_id)
            if record is None:
                return NotFound(job_id)
            now = self.clock.now()
            if record.state(now) is JobState.RUNNING:
                return Running(record)
            updated = await self._modify_once(job_id, change_of(record, now), now)
            if updated is not None:
                logger.warning(
                    "rescheduled %s (%s) for %s", updated.job_name, job_id, updated.next_run_at
                )
                return Rescheduled(updated)
        raise busy_error("reschedule", job_id)

    async def _modify_once(self, job_id: str, change: JobChange, now: datetime) -> JobRecord | None:
        # A compare-and-set that leaves the record as asked when repeated: safe to retry.
        return await retry_transient(
            lambda: self.store.modify_record(job_id, change, now=now),
            what="modify job",
            deadline=self.operation_timeout,
        )

    async def _write_rows(self, rows: list[HistoryRecord]) -> None:
        if rows:
            await retry_transient(
                lambda: self.store.write_history_many(rows),
                what="history",
                deadline=self.operation_timeout,
            )

    def _retention(self, name: str) -> timedelta:
        if self.jobs is not None and name in self.jobs:
            return self.jobs.get(name).save_executions_for
        return DEFAULT_RETENTION

    def _recurrent_definition(self, record: JobRecord) -> RecurrentJobDefinition:
        definition = (
            self.jobs.get(record.job_name) if self.jobs and record.job_name in self.jobs else None
        )
        if not isinstance(definition, RecurrentJobDefinition):
            raise InvalidOptionError(
                "job_id",
                record.id,
                f"is the recurrent job {record.job_name!r}: skipping its run needs its schedule, "
                "so create the client with the Jobs registry that defines it",
            )
        return definition
