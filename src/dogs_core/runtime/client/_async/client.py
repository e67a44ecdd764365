"""The scheduling API: put jobs in the store, read history and status.

A client needs no running workers: every record it writes gets a partition at insert (Dogs
leaves records of unregistered jobs without one until a reconciler finds them).

``_async/client.py`` (the async client) is the source of truth; ``_sync/client.py`` (the sync
client, which calls a sync store in the caller's thread) is generated from it with unasync by
``scripts/generate_sync.py``. What both share without I/O (validation, record
building) lives in :mod:`dogs_core.runtime.client.scheduling`.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NoReturn

import anyio

from dogs_core.domain.clock_offset import DEFAULT_CLOCK_SYNC_INTERVAL
from dogs_core.domain.definitions import EventJobDefinition, JobDefinition
from dogs_core.domain.records import (
    BulkScheduleResult,
    HistoryRecord,
    HistoryStatus,
    ItemError,
    JobRecord,
    NameStatus,
    NewJob,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.domain.uniqueness import Unique, UniqueError
from dogs_core.errors import (
    ChangeFeedUnavailableError,
    DogsError,
    JobNotFoundError,
    ScheduleOutcomeUnknownError,
    TransientStoreError,
    WaitTimeoutError,
)
from dogs_core.jobs import Jobs
from dogs_core.ports import AsyncJobStore, Clock, Role
from dogs_core.ports.store import require_role
from dogs_core.runtime.client._async.archive import ArchiveClient
from dogs_core.runtime.client._async.audit import AuditClient
from dogs_core.runtime.client._async.bulk import BulkClient
from dogs_core.runtime.client._async.following import FollowingClient
from dogs_core.runtime.client._async.inspection import InspectionClient
from dogs_core.runtime.client._async.pausing import PauseClient
from dogs_core.runtime.client._async.registry import RegistryClient
from dogs_core.runtime.client._async.schedules import Schedules
from dogs_core.runtime.client._async.stats import StatsClient
from dogs_core.runtime.client._async.unique_scheduling import UniqueScheduling
from dogs_core.runtime.client._async.workflows import WorkflowClient
from dogs_core.runtime.client.calls import COMPLETION_RECHECK
from dogs_core.runtime.client.leases import AsyncLeases
from dogs_core.runtime.client.observing import observe_scheduling
from dogs_core.runtime.client.scheduling import (
    HISTORY_GRACE,
    HISTORY_LOOKBACK,
    UNKNOWN_JOB_GRACE,
    AmbiguousBulkInsert,
    ScheduleItem,
    bulk_result,
    ended_execution,
    in_transaction,
    job_name,
    validate_job_id,
    validate_session,
    validate_statuses,
    validate_wait,
)
from dogs_core.runtime.client.shaping import check_unique
from dogs_core.runtime.plumbing._async.clock_sync import ensure_clock
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.outage import DEFAULT_OPERATION_TIMEOUT, validate_operation_timeout
from dogs_core.runtime.plumbing.telemetry import TELEMETRY, Telemetry
from dogs_core.runtime.plumbing.wrappers import observed

__all__ = ["DogsClient"]

logger = logging.getLogger("dogs.client")


class DogsClient(
    WorkflowClient,
    PauseClient,
    StatsClient,
    ArchiveClient,
    FollowingClient,
    AsyncLeases,
    UniqueScheduling,
    # the operator's console
    BulkClient,
    AuditClient,
    RegistryClient,
    InspectionClient,
):
    """Schedules event jobs and reads what the workers recorded.

    ``jobs`` is optional: with a registry, jobs may be named by string and a definition that
    is not in it is refused (it would never be claimed by these workers); without one, pass
    definitions. ``n_partitions`` must match the workers'.

    ``operation_timeout`` (seconds, 15 by default; ``None``: six attempts, however long they
    take) bounds how long ``schedule()`` and ``schedule_many()`` retry a store that keeps
    failing transiently (see ``retry_transient``'s ``deadline``), so that a caller learns
    within it that the database is down: :class:`~dogs_core.errors.StoreUnavailableError`.

    ``clock_sync_interval`` (60 s by default): the client measures its clock's offset to the
    store's before a call that computes times, at most once per interval, so that run times
    and lock checks are on the database's clock even when this machine's is wrong.
    """

    def __init__(
        self,
        store: AsyncJobStore,
        jobs: Jobs | None = None,
        *,
        n_partitions: int = 1,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        telemetry: Telemetry | None = None,
        operation_timeout: float | None = DEFAULT_OPERATION_TIMEOUT,
        clock_sync_interval: timedelta | int | float | str | None = DEFAULT_CLOCK_SYNC_INTERVAL,
    ) -> None:
        super().__init__(
            jobs,
            n_partitions=n_partitions,
            clock=clock,
            rng=rng,
            clock_sync_interval=clock_sync_interval,
        )
        self.operation_timeout = validate_operation_timeout(operation_timeout)
        #: Where the scheduling calls' events go (the process-wide hub by default).
        self.telemetry = TELEMETRY if telemetry is None else telemetry
        self.store = observed(store, self.telemetry)
        self._setup_done = False
        #: Recurring schedules managed at run time (upsert, list, get, pause, resume, delete).
        self.schedules = Schedules(self)

    async def _ensure_setup(self) -> bool:
        """Create the store's indexes before the first write (uniqueness depends on them), then
        measure the clock when due. Returns whether the clock's offset changed: times computed
        before are then computed again."""
        if not self._setup_done:
            await retry_transient(
                self.store.setup, what="store setup", deadline=self.operation_timeout
            )
            self._setup_done = True
        return await self._ensure_clock()

    async def _ensure_clock(self) -> bool:
        """Measure the clock's offset to the store's when due (see :class:`ServerClock`),
        within ``operation_timeout``. Returns whether the offset changed."""
        return await ensure_clock(self.store, self.clock, deadline=self.operation_timeout)

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
        unique: Unique | None = None,
        start_before: timedelta | int | float | str | datetime | None = None,
        tags: Sequence[str] | None = None,
    ) -> ScheduleOutcome:
        """Schedule one run of an event job.

        Returns ``Scheduled(id)``, or ``Duplicate(existing_id)`` when ``unique_key`` is held by
        a record that still exists (pending, running, awaiting retry or terminal). Raises a
        :class:`~dogs_core.errors.ValidationError` before writing anything when an argument is
        bad.

        ``unique`` (a :class:`~dogs_core.domain.uniqueness.Unique`, not with ``unique_key``):
        the key's states and window, skip, ``Replaced(id)``, ``Debounced(id, run_at)`` or a
        throttle (docs/uniqueness.md). ``start_before`` (a duration or a datetime): not started
        by then, the job is discarded (an ``expired`` row). ``tags``: strings to find it by.

        ``session`` is the caller's database session (MongoDB: a PyMongo ``ClientSession`` or
        ``AsyncClientSession`` of the store's client). The insert joins it: inside a
        transaction the job exists only if that transaction commits, and a taken
        ``unique_key`` is still ``Duplicate`` without aborting it. In a transaction nothing is
        retried or read back here: errors propagate to the caller's ``with_transaction``, which
        retries the whole transaction. A store without sessions (the in-memory one) raises
        :class:`~dogs_core.errors.SessionNotSupportedError` and writes nothing. ``unique``
        options beyond Dogs' rule take several steps and cannot join a session.
        """
        validate_session(session)
        unique = check_unique(unique, unique_key)
        definition = self._event_definition(job, unique=unique)
        shaped = unique is not None and not unique.plain
        if shaped and session is not None:
            raise UniqueError("unique", unique, "cannot join a session (several steps)")
        if shaped:
            require_role(self.store, Role.UNIQUENESS, "unique= beyond Dogs' rule")
        item = ScheduleItem(
            params, run_in, run_at, priority, unique_key, unique, start_before, tags
        )
        new_job = self._new_job(definition, item)
        if await self._ensure_setup():
            new_job = self._new_job(definition, item)  # on the clock just measured
        observing = observe_scheduling(self.telemetry, [new_job])
        if observing is None:
            outcome = await self._write_one(new_job, unique if shaped else None, session)
        else:
            with observing:
                written = observing.jobs[0]
                outcome = await self._write_one(written, unique if shaped else None, session)
                observing.outcomes([outcome])
        logger.debug("scheduled %s: %s", definition.name, outcome)
        return outcome

    async def _write_one(
        self, job: NewJob, unique: Unique | None, session: object | None
    ) -> ScheduleOutcome:
        if unique is None:
            return await self._insert_one(job, session)
        return await self._schedule_unique(job, unique)

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
        definition = self._event_definition(job)
        batch = self._prepare_many(definition, items)
        if not batch.jobs:
            return batch.result()
        if await self._ensure_setup():
            batch = self._prepare_many(definition, batch.items)  # on the clock just measured
        observing = observe_scheduling(self.telemetry, batch.jobs)
        if observing is None:
            return batch.result(await self._insert_many(batch.jobs, session))
        with observing:
            written = await self._insert_many(observing.jobs, session)
            observing.outcomes(written.outcomes)
        return batch.result(written)

    # -- reading ----------------------------------------------------------------------------

    async def get_job(self, job_id: str) -> JobRecord | None:
        """One stored record by id (``None`` once an event job succeeded and was deleted)."""
        job_id = validate_job_id(job_id)
        return await self.store.get_record(job_id)

    async def status(self) -> list[NameStatus]:
        """Per job name: due, scheduled later, running, stale and terminal counts."""
        await self._ensure_clock()
        return await retry_transient(
            lambda: self.store.status_counts(now=self.clock.now()),
            what="read status",
            deadline=self.operation_timeout,
        )

    async def unlock_all(self) -> int:
        """Administrative: release every lock (only when no worker is running)."""
        count = await self.store.release_all_locks()
        logger.warning("unlocked %d job records", count)
        return count

    # -- waiting and watching ---------------------------------------------------------------

    async def wait_for(
        self,
        job_id: str,
        *,
        timeout: timedelta | int | float | str | None = None,  # noqa: ASYNC109 (sync twin too)
        poll_interval: timedelta | int | float | str = 1,
    ) -> HistoryRecord:
        """Wait until job ``job_id`` has ended and return the execution that ended it: its
        ``status`` (``success``, or ``error`` when no retry is pending: discarded or at its
        attempt limit), ``result`` and ``error_message``. A recurrent job's next finished
        execution counts. A job already over is answered at once from its history.

        What it promises: the handler ended and its row is written. An execution writes its
        row before its completion, so an event job is answered once its record is gone too; a
        recurrent job's reschedule may follow the answer by a few milliseconds.

        Woken by the store's history feed where it has one (MongoDB change streams), by reads
        every ``poll_interval`` where not; a row that comes while its execution still holds
        the record (its completion is on its way) is followed by reads a few milliseconds
        apart, as no feed batch reports a completion. Raises
        :class:`~dogs_core.errors.WaitTimeoutError` after ``timeout``, and
        :class:`~dogs_core.errors.JobNotFoundError` when the job has neither a record nor
        history: within :data:`~dogs_core.runtime.client.scheduling.UNKNOWN_JOB_GRACE` (3 s) for an
        id never seen (it never existed), within ``HISTORY_GRACE`` (30 s) for a job whose record
        was read and is gone without a row (it keeps no history).
        """
        job_id = validate_job_id(job_id)
        seconds, pause = validate_wait(timeout, poll_interval)
        since = self.clock.now()
        started = anyio.current_time()
        gone_since: float | None = None
        seen = False  # a record or a row of the job was read at least once
        soon = COMPLETION_RECHECK
        feed = self.store.watch_history(job_ids=[job_id])
        async with contextlib.aclosing(feed):
            live = await _open(feed)
            while True:
                record, newest = await self._end_state(job_id)
                ended = ended_execution(record, newest, since=since)
                if ended is not None:
                    return ended
                now = anyio.current_time()
                if record is None and newest is None:
                    # Gone without a row: a row on its way lands within the grace period after
                    # the record is deleted; past it, the job keeps no history. Never seen at
                    # all, it most likely never existed: a short grace covers only a row
                    # written just after its record's delete (an operator's cancel).
                    gone_since = now if gone_since is None else gone_since
                    grace = HISTORY_GRACE if seen else UNKNOWN_JOB_GRACE
                    if now - gone_since >= grace:
                        raise JobNotFoundError(job_id)
                    if not seen:
                        await anyio.sleep(min(pause, UNKNOWN_JOB_GRACE / 4))
                        continue
                else:
                    seen = True
                if seconds is not None and now - started >= seconds:
                    raise WaitTimeoutError(job_id, seconds)
                holder = None if record is None else record.lock_id
                if newest is not None and holder == newest.execution_id and soon < pause:
                    # The row of the execution that still holds the record: its completion
                    # follows in milliseconds and writes no row, so no batch would tell it.
                    await anyio.sleep(soon)
                    soon *= 2
                    continue
                live = live and await _next_batch(feed)
                if not live:
                    await anyio.sleep(pause)

    async def watch(
        self,
        names: Sequence[JobDefinition | str] | None = None,
        *,
        statuses: Iterable[HistoryStatus | str] | None = None,
    ) -> AsyncIterator[HistoryRecord]:
        """Every execution of ``names`` (all jobs when ``None``) as it finishes, filtered by
        ``statuses``: for live panels. Needs a store with a history feed (MongoDB change
        streams on a replica set, the in-memory store); raises
        :class:`~dogs_core.errors.ChangeFeedUnavailableError` otherwise."""
        wanted = validate_statuses(statuses)
        job_names = None if names is None else [job_name(job) for job in names]
        feed = self.store.watch_history(job_names=job_names)
        async with contextlib.aclosing(feed):
            async for batch in feed:
                for row in batch:
                    if wanted is None or row.status in wanted:
                        yield row

    async def _end_state(self, job_id: str) -> tuple[JobRecord | None, HistoryRecord | None]:
        """The record of a job and its newest history row (read in this order, so that a job
        that ends in between is seen with its row)."""
        record = await self.store.get_record(job_id)
        rows = await self.store.read_history(job_id=job_id, limit=1)
        return record, rows[0] if rows else None

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
            return await self.store.insert_job(job, session=session)

        async def settle(error: TransientStoreError) -> ScheduleOutcome | None:
            return await self._after_ambiguous_insert(job)

        return await retry_transient(
            lambda: self.store.insert_job(job, session=session),
            what=f"schedule {job.job_name}",
            deadline=self.operation_timeout,
            on_ambiguous=settle,
        )

    async def _after_ambiguous_insert(self, job: NewJob) -> ScheduleOutcome | None:
        """What became of an insert whose reply was lost: ``Scheduled`` when it landed, ``None``
        when re-sending it is safe, :class:`ScheduleOutcomeUnknownError` when neither is known.
        """
        found = await retry_transient(
            lambda: self.store.get_record(job.id), what="read back", deadline=self.operation_timeout
        )
        if found is not None:
            return Scheduled(job.id)
        if job.next_run_at > self.clock.now():
            return None  # not due yet, so it cannot have run: it never landed
        history = await retry_transient(
            lambda: self.store.read_history(job.job_name, limit=HISTORY_LOOKBACK),
            what="history read back",
            deadline=self.operation_timeout,
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
            return await self.store.insert_jobs(jobs, session=session)
        try:
            return await retry_transient(
                lambda: self.store.insert_jobs(jobs, session=session),
                what=f"schedule_many {jobs[0].job_name}",
                deadline=self.operation_timeout,
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


async def _open(feed: AsyncIterator[list[HistoryRecord]]) -> bool:
    """Wait for a feed to open; ``False`` where the store has none (then poll)."""
    try:
        await anext(feed)
    except ChangeFeedUnavailableError:
        return False
    return True


async def _next_batch(feed: AsyncIterator[list[HistoryRecord]]) -> bool:
    """Wait for the next batch or heartbeat of a feed; ``False`` once it failed or ended (the
    caller then polls: a feed only ever shortens the wait)."""
    try:
        await anext(feed)
    except StopAsyncIteration:
        return False
    except Exception as error:
        logger.warning("history feed failed, waiting by polling: %r", error)
        return False
    return True
