"""The scheduling API: put jobs in the store, read history and status.

A client needs no running workers: every record it writes gets a partition at insert (Dogs
leaves records of unregistered jobs without one until a reconciler finds them).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import anyio

from dogs_core.domain.definitions import (
    EventJobDefinition,
    JobDefinition,
    RecurrentJobDefinition,
    validate_params,
)
from dogs_core.domain.partitions import assign_partition, validate_n_partitions
from dogs_core.domain.records import (
    BulkScheduleResult,
    Duplicate,
    HistoryRecord,
    ItemError,
    JobRecord,
    NameStatus,
    NewJob,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.domain.schedules import event_run_at, parse_duration
from dogs_core.errors import (
    DogsError,
    InvalidOptionError,
    InvalidScheduleError,
    JobNotRegisteredError,
    ScheduleOutcomeUnknownError,
    TransientStoreError,
)
from dogs_core.ids import new_record_id
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, Clock
from dogs_core.runtime.clock import SystemClock
from dogs_core.runtime.retry import retry_transient

__all__ = ["DogsClient", "ScheduleItem"]

logger = logging.getLogger("dogs.client")

_MAX_UNIQUE_KEY_LENGTH = 1024
_INSERT_ATTEMPTS = 6
_FIRST_RETRY_DELAY = 0.05
_MAX_RETRY_DELAY = 2.0
#: How many recent executions of a job name are searched for a record whose insert reply was
#: lost and that may already have run.
_HISTORY_LOOKBACK = 1000


@dataclass(frozen=True, slots=True)
class ScheduleItem:
    """One job of a ``schedule_many`` call; the same options as ``schedule``."""

    params: object = None
    run_in: timedelta | int | float | str | None = None
    run_at: datetime | None = None
    priority: int | None = None
    unique_key: str | None = None


class DogsClient:
    """Schedules event jobs and reads what the workers recorded.

    ``jobs`` is optional: with a registry, jobs may be named by string and a definition that
    is not in it is refused (it would never be claimed by these workers); without one, pass
    definitions. ``n_partitions`` must match the workers'.
    """

    def __init__(
        self,
        store: AsyncJobStore,
        jobs: Jobs | None = None,
        *,
        n_partitions: int = 1,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.jobs = jobs
        self.n_partitions = validate_n_partitions(n_partitions)
        self.clock: Clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._setup_done = False

    async def _ensure_setup(self) -> None:
        """Create the store's indexes before the first write: uniqueness depends on them."""
        if not self._setup_done:
            await retry_transient(self.store.setup, what="store setup")
            self._setup_done = True

    # -- scheduling -------------------------------------------------------------------------

    async def schedule(
        self,
        job: EventJobDefinition | str,
        params: object = None,
        *,
        run_in: timedelta | int | float | str | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
        unique_key: str | None = None,
    ) -> ScheduleOutcome:
        """Schedule one run of an event job.

        Returns ``Scheduled(id)``, or ``Duplicate(existing_id)`` when ``unique_key`` is held by
        a record that still exists (pending, running, awaiting retry or terminal). Raises a
        :class:`~dogs_core.errors.ValidationError` before writing anything when an argument is
        bad.
        """
        definition = self._event_definition(job)
        new_job = self._new_job(
            definition, ScheduleItem(params, run_in, run_at, priority, unique_key)
        )
        await self._ensure_setup()
        outcome = await self._insert_one(new_job)
        logger.debug("scheduled %s: %s", definition.name, outcome)
        return outcome

    async def schedule_many(
        self,
        job: EventJobDefinition | str,
        items: Iterable[ScheduleItem | Mapping[str, Any]],
    ) -> BulkScheduleResult:
        """Schedule many runs of one event job in one round trip.

        Each item is validated first; invalid items are reported in ``errors`` (with their
        index) and the others are still written. Items holding a taken ``unique_key`` are
        counted as skipped and never modify the existing record.
        """
        definition = self._event_definition(job)
        prepared: list[NewJob] = []
        positions: list[int] = []
        errors: list[ItemError] = []
        materialized = list(items)
        for index, raw in enumerate(materialized):
            try:
                item = _as_item(raw, index)
                prepared.append(self._new_job(definition, item))
                positions.append(index)
            except DogsError as error:
                errors.append(ItemError(index=index, error=error, job=raw))
        outcomes: list[ScheduleOutcome | None] = [None] * len(materialized)
        if not prepared:
            return BulkScheduleResult(0, 0, tuple(errors), tuple(outcomes))
        await self._ensure_setup()
        result = await self._insert_many(prepared)
        for failed in result.errors:
            original = positions[failed.index]
            errors.append(ItemError(index=original, error=failed.error, job=materialized[original]))
        for local_index, outcome in enumerate(result.outcomes):
            if local_index < len(positions):
                outcomes[positions[local_index]] = outcome
        errors.sort(key=lambda item_error: item_error.index)
        return BulkScheduleResult(
            scheduled_count=result.scheduled_count,
            skipped_count=result.skipped_count,
            errors=tuple(errors),
            outcomes=tuple(outcomes),
        )

    # -- reading ----------------------------------------------------------------------------

    async def get_executions(
        self, job: JobDefinition | str, *, limit: int = 20, skip: int = 0
    ) -> list[HistoryRecord]:
        """Finished executions of one job, newest first."""
        name = job if isinstance(job, str) else job.name
        for field, value in (("limit", limit), ("skip", skip)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidOptionError(field, value, "must be a non-negative integer")
        return await self.store.get_executions(name, limit=limit, skip=skip)

    async def get_job(self, job_id: str) -> JobRecord | None:
        """One stored record by id (``None`` once an event job succeeded and was deleted)."""
        if not isinstance(job_id, str) or not job_id:
            raise InvalidOptionError("job_id", job_id, "must be a non-empty string")
        return await self.store.get_job(job_id)

    async def find_jobs(
        self, job: JobDefinition | str | None = None, *, limit: int | None = None
    ) -> list[JobRecord]:
        """Stored records, optionally of one job, in claim order."""
        name = job if job is None or isinstance(job, str) else job.name
        return await self.store.find_jobs(job_name=name, limit=limit)

    async def status(self) -> list[NameStatus]:
        """Per job name: due, scheduled later, running, stale and terminal counts."""
        return await self.store.status_counts(now=self.clock.now())

    async def unlock_all(self) -> int:
        """Administrative: release every lock (only when no worker is running)."""
        count = await self.store.unlock_all()
        logger.warning("unlocked %d job records", count)
        return count

    # -- inserting safely ------------------------------------------------------------------

    async def _insert_one(self, job: NewJob) -> ScheduleOutcome:
        """Insert with retries that can never make one schedule call run a job twice.

        Record ids are chosen here, so re-sending an insert that had landed is harmless while
        the record exists. After an ambiguous failure the record may also have run and been
        deleted already; re-sending would then run the job a second time, so it is looked up
        first (see :meth:`_after_ambiguous_insert`).
        """
        delay = _FIRST_RETRY_DELAY
        for attempt in range(1, _INSERT_ATTEMPTS + 1):
            try:
                return await self.store.schedule(job)
            except TransientStoreError as error:
                if error.write_may_have_applied:
                    resolved = await self._after_ambiguous_insert(job)
                    if resolved is not None:
                        return resolved
                if attempt == _INSERT_ATTEMPTS:
                    raise
                logger.warning(
                    "schedule %s hit a transient store error (attempt %d/%d): %s",
                    job.job_name,
                    attempt,
                    _INSERT_ATTEMPTS,
                    error,
                )
                await anyio.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_DELAY)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _after_ambiguous_insert(self, job: NewJob) -> ScheduleOutcome | None:
        """What became of an insert whose reply was lost: ``Scheduled`` when it landed, ``None``
        when re-sending it is safe, :class:`ScheduleOutcomeUnknownError` when neither is known.
        """
        if await retry_transient(lambda: self.store.get_job(job.id), what="read back") is not None:
            return Scheduled(job.id)
        if job.next_run_at > self.clock.now():
            return None  # not due yet, so it cannot have run: it never landed
        history = await retry_transient(
            lambda: self.store.get_executions(job.job_name, limit=_HISTORY_LOOKBACK),
            what="history read back",
        )
        if any(record.job_id == job.id for record in history):
            return Scheduled(job.id)  # it landed, ran, and was deleted on success
        raise ScheduleOutcomeUnknownError(job.id, job.job_name)

    async def _insert_many(self, jobs: list[NewJob]) -> BulkScheduleResult:
        """One bulk insert; after an ambiguous failure, settle each job on its own."""
        try:
            return await retry_transient(
                lambda: self._bulk_or_ambiguous(jobs), what=f"schedule_many {jobs[0].job_name}"
            )
        except _AmbiguousBulkInsert:
            pass
        outcomes: list[ScheduleOutcome | None] = []
        errors: list[ItemError] = []
        for index, job in enumerate(jobs):
            try:
                outcomes.append(await self._insert_one(job))
            except DogsError as error:
                outcomes.append(None)
                errors.append(ItemError(index=index, error=error, job=job))
        return BulkScheduleResult(
            scheduled_count=sum(isinstance(o, Scheduled) for o in outcomes),
            skipped_count=sum(isinstance(o, Duplicate) for o in outcomes),
            errors=tuple(errors),
            outcomes=tuple(outcomes),
        )

    async def _bulk_or_ambiguous(self, jobs: list[NewJob]) -> BulkScheduleResult:
        try:
            return await self.store.schedule_many(jobs)
        except TransientStoreError as error:
            if error.write_may_have_applied:
                raise _AmbiguousBulkInsert from error
            raise

    # -- helpers ----------------------------------------------------------------------------

    def _event_definition(self, job: EventJobDefinition | str) -> EventJobDefinition:
        if isinstance(job, str):
            if self.jobs is None:
                raise InvalidOptionError(
                    "job", job, "a job name needs a client created with a Jobs registry"
                )
            definition: JobDefinition = self.jobs.get(job)
        elif isinstance(job, EventJobDefinition | RecurrentJobDefinition):
            definition = job
            if self.jobs is not None and (
                definition.name not in self.jobs or self.jobs.get(definition.name) is not definition
            ):
                raise JobNotRegisteredError(definition.name)
        else:
            raise InvalidOptionError(
                "job", job, "must be a job definition (from @jobs.event) or a job name"
            )
        if not isinstance(definition, EventJobDefinition):
            raise InvalidOptionError(
                "job",
                getattr(definition, "name", definition),
                "only event jobs can be scheduled; recurrent jobs schedule themselves",
            )
        return definition

    def _new_job(self, definition: EventJobDefinition, item: ScheduleItem) -> NewJob:
        now = self.clock.now()
        run_in = None if item.run_in is None else parse_duration(item.run_in, field="run_in")
        if item.run_at is not None and not isinstance(item.run_at, datetime):
            raise InvalidScheduleError("run_at", item.run_at, "must be a datetime")
        next_run_at = event_run_at(now, run_in, item.run_at)
        priority = definition.priority if item.priority is None else item.priority
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InvalidOptionError("priority", item.priority, "must be an integer")
        if not -(2**63) <= priority < 2**63:
            raise InvalidOptionError("priority", item.priority, "must fit in a 64-bit integer")
        return NewJob(
            id=new_record_id(),
            job_name=definition.name,
            params=validate_params(definition, item.params),
            next_run_at=next_run_at,
            priority=priority,
            partition=assign_partition(self.n_partitions, self._rng),
            unique_identifier=_unique_identifier(definition, item.unique_key),
        )


class _AmbiguousBulkInsert(Exception):
    """A bulk insert failed after it may have been applied: settle its items one by one."""


def _unique_identifier(definition: EventJobDefinition, key: str | None) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise InvalidOptionError("unique_key", key, "must be a non-empty string")
    if len(key) > _MAX_UNIQUE_KEY_LENGTH:
        raise InvalidOptionError(
            "unique_key", key, f"must be at most {_MAX_UNIQUE_KEY_LENGTH} characters"
        )
    if definition.unique_scope == "job":
        return f"{definition.name}:{key}"
    return key


def _as_item(raw: ScheduleItem | Mapping[str, Any], index: int) -> ScheduleItem:
    if isinstance(raw, ScheduleItem):
        return raw
    if isinstance(raw, Mapping):
        unknown = set(raw) - {"params", "run_in", "run_at", "priority", "unique_key"}
        if unknown:
            raise InvalidOptionError(f"items[{index}]", sorted(unknown), "unknown schedule options")
        return ScheduleItem(**raw)
    raise InvalidOptionError(
        f"items[{index}]", raw, "must be a ScheduleItem or a mapping of schedule options"
    )
