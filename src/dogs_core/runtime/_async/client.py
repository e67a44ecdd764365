"""The scheduling API: put jobs in the store, read history and status.

A client needs no running workers: every record it writes gets a partition at insert (Dogs
leaves records of unregistered jobs without one until a reconciler finds them).

``_async/client.py`` (the async client) is the source of truth; ``_sync/client.py`` (the sync
client, which calls a sync store in the caller's thread) is generated from it with unasync by
``scripts/generate_sync.py``. What both share without I/O (validation, record
building) lives in :mod:`dogs_core.runtime.scheduling`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, NoReturn

from dogs_core.domain.definitions import EventJobDefinition, JobDefinition
from dogs_core.domain.records import (
    BulkScheduleResult,
    HistoryRecord,
    ItemError,
    JobRecord,
    NameStatus,
    NewJob,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.errors import DogsError, ScheduleOutcomeUnknownError, TransientStoreError
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, Clock
from dogs_core.runtime._async.retry import retry_transient
from dogs_core.runtime.scheduling import (
    HISTORY_LOOKBACK,
    AmbiguousBulkInsert,
    ClientBase,
    ScheduleItem,
    bulk_result,
    in_transaction,
    job_name,
    validate_job_id,
    validate_page,
    validate_session,
)

__all__ = ["DogsClient"]

logger = logging.getLogger("dogs.client")


class DogsClient(ClientBase):
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
        super().__init__(jobs, n_partitions=n_partitions, clock=clock, rng=rng)
        self.store = store
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
        session: object | None = None,
    ) -> ScheduleOutcome:
        """Schedule one run of an event job.

        Returns ``Scheduled(id)``, or ``Duplicate(existing_id)`` when ``unique_key`` is held by
        a record that still exists (pending, running, awaiting retry or terminal). Raises a
        :class:`~dogs_core.errors.ValidationError` before writing anything when an argument is
        bad.

        ``session`` is the caller's database session (MongoDB: a PyMongo ``ClientSession`` or
        ``AsyncClientSession`` of the store's client). The insert joins it: inside a
        transaction the job exists only if that transaction commits, and a taken
        ``unique_key`` is still ``Duplicate`` without aborting it. In a transaction nothing is
        retried or read back here: errors propagate to the caller's ``with_transaction``, which
        retries the whole transaction. A store without sessions (the in-memory one) raises
        :class:`~dogs_core.errors.SessionNotSupportedError` and writes nothing.
        """
        validate_session(session)
        definition = self._event_definition(job)
        new_job = self._new_job(
            definition, ScheduleItem(params, run_in, run_at, priority, unique_key)
        )
        await self._ensure_setup()
        outcome = await self._insert_one(new_job, session)
        logger.debug("scheduled %s: %s", definition.name, outcome)
        return outcome

    async def schedule_many(
        self,
        job: EventJobDefinition | str,
        items: Iterable[ScheduleItem | Mapping[str, Any]],
        *,
        session: object | None = None,
    ) -> BulkScheduleResult:
        """Schedule many runs of one event job in one round trip.

        Each item is validated first; invalid items are reported in ``errors`` (with their
        index) and the others are still written. Items holding a taken ``unique_key`` are
        counted as skipped and never modify the existing record. ``session`` as for
        :meth:`schedule`: in a transaction a failed write (the transaction is then aborted)
        raises instead of becoming an item error.
        """
        validate_session(session)
        batch = self._prepare_many(self._event_definition(job), items)
        if not batch.jobs:
            return batch.result()
        await self._ensure_setup()
        return batch.result(await self._insert_many(batch.jobs, session))

    # -- reading ----------------------------------------------------------------------------

    async def get_executions(
        self, job: JobDefinition | str, *, limit: int = 20, skip: int = 0
    ) -> list[HistoryRecord]:
        """Finished executions of one job, newest first."""
        validate_page(limit, skip)
        return await self.store.get_executions(job_name(job), limit=limit, skip=skip)

    async def get_job(self, job_id: str) -> JobRecord | None:
        """One stored record by id (``None`` once an event job succeeded and was deleted)."""
        validate_job_id(job_id)
        return await self.store.get_job(job_id)

    async def find_jobs(
        self, job: JobDefinition | str | None = None, *, limit: int | None = None
    ) -> list[JobRecord]:
        """Stored records, optionally of one job, in claim order."""
        name = None if job is None else job_name(job)
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

    async def _insert_one(self, job: NewJob, session: object | None = None) -> ScheduleOutcome:
        """Insert with retries that can never make one schedule call run a job twice.

        Record ids are chosen here, so re-sending an insert that had landed is harmless while
        the record exists. After an ambiguous failure the record may also have run and been
        deleted already; re-sending would then run the job a second time, so it is looked up
        first (see :meth:`_after_ambiguous_insert`). Inside the caller's transaction the insert
        is sent once: the caller's ``with_transaction`` retries (see ``in_transaction``).
        """
        if in_transaction(session):
            return await self.store.schedule(job, session=session)

        async def settle(error: TransientStoreError) -> ScheduleOutcome | None:
            return await self._after_ambiguous_insert(job)

        return await retry_transient(
            lambda: self.store.schedule(job, session=session),
            what=f"schedule {job.job_name}",
            on_ambiguous=settle,
        )

    async def _after_ambiguous_insert(self, job: NewJob) -> ScheduleOutcome | None:
        """What became of an insert whose reply was lost: ``Scheduled`` when it landed, ``None``
        when re-sending it is safe, :class:`ScheduleOutcomeUnknownError` when neither is known.
        """
        if await retry_transient(lambda: self.store.get_job(job.id), what="read back") is not None:
            return Scheduled(job.id)
        if job.next_run_at > self.clock.now():
            return None  # not due yet, so it cannot have run: it never landed
        history = await retry_transient(
            lambda: self.store.get_executions(job.job_name, limit=HISTORY_LOOKBACK),
            what="history read back",
        )
        if any(record.job_id == job.id for record in history):
            return Scheduled(job.id)  # it landed, ran, and was deleted on success
        raise ScheduleOutcomeUnknownError(job.id, job.job_name)

    async def _insert_many(
        self, jobs: list[NewJob], session: object | None = None
    ) -> BulkScheduleResult:
        """One bulk insert; after an ambiguous failure, settle each job on its own. Inside the
        caller's transaction it is sent once, as :meth:`_insert_one` is."""
        if in_transaction(session):
            return await self.store.schedule_many(jobs, session=session)
        try:
            return await retry_transient(
                lambda: self.store.schedule_many(jobs, session=session),
                what=f"schedule_many {jobs[0].job_name}",
                on_ambiguous=_settle_one_by_one,
            )
        except AmbiguousBulkInsert:
            pass
        outcomes: list[ScheduleOutcome | None] = []
        errors: list[ItemError] = []
        for index, job in enumerate(jobs):
            try:
                outcomes.append(await self._insert_one(job, session))
            except DogsError as error:
                outcomes.append(None)
                errors.append(ItemError(index=index, error=error, job=job))
        return bulk_result(outcomes, errors)


async def _settle_one_by_one(error: TransientStoreError) -> NoReturn:
    """A bulk insert that may have landed in part is not re-sent as a whole."""
    raise AmbiguousBulkInsert from error
