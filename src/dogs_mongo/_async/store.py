"""The MongoDB job store on PyMongo's ``AsyncMongoClient``.

The async adapter (``_async/store.py``) is the source of truth; the sync adapter
(``_sync/store.py``) is generated from it by ``scripts/generate_sync.py`` (unasync): edit the
async file, then regenerate. Every document it sends is built by
:mod:`dogs_mongo.queries`; every transient failure is raised as
:class:`~dogs_core.errors.TransientStoreError` (see :mod:`dogs_mongo.errors`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import anyio
import bson
from bson.codec_options import CodecOptions
from bson.errors import InvalidDocument
from pymongo import AsyncMongoClient, InsertOne, ReadPreference, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, DuplicateKeyError, PyMongoError
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

from dogs_core.domain import validation
from dogs_core.domain.batches import check_completions
from dogs_core.domain.partitions import check_chosen_partition
from dogs_core.domain.records import (
    BulkScheduleResult,
    Duplicate,
    HistoryRecord,
    ItemError,
    JobRecord,
    NewJob,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.errors import (
    InvalidOptionError,
    InvalidParamsError,
    StoreError,
    TransientStoreError,
)
from dogs_core.ids import new_record_id
from dogs_core.ports import StoreCapabilities
from dogs_mongo import queries as q
from dogs_mongo._async.archive import MongoArchiver
from dogs_mongo._async.changes import MongoChanges
from dogs_mongo._async.claims import (
    CLAIM_PATH_FIND_ONE_AND_UPDATE,
    CLAIM_PATH_SORTED_UPDATE_ONE,
    SORTED_UPDATE_MIN_WIRE_VERSION,
    MongoClaims,
    choose_claim_path,
)
from dogs_mongo._async.controls import MongoControls
from dogs_mongo._async.indexes import ensure_indexes, list_indexes
from dogs_mongo._async.stats import MongoStats
from dogs_mongo._async.steering import MongoSteering
from dogs_mongo.client_check import refuse_motor
from dogs_mongo.errors import is_transient, translate_errors

__all__ = [
    "CLAIM_PATH_FIND_ONE_AND_UPDATE",
    "CLAIM_PATH_SORTED_UPDATE_ONE",
    "AsyncMongoJobStore",
    "choose_claim_path",
]

log = logging.getLogger("dogs.mongo.store")

_DUPLICATE_KEY: Final = 11000

_CODEC_OPTIONS: CodecOptions[dict[str, Any]] = CodecOptions(
    document_class=dict, tz_aware=True, tzinfo=UTC
)

Document = dict[str, Any]


class AsyncMongoJobStore(
    MongoClaims, MongoChanges, MongoSteering, MongoControls, MongoStats, MongoArchiver
):
    """:class:`~dogs_core.ports.AsyncJobStore` on MongoDB, storage-compatible with @orion-js/dogs.

    ``client`` is a PyMongo ``AsyncMongoClient``. A Motor client is refused with an
    :class:`InvalidOptionError` (Motor is deprecated upstream and past its end of bug fixes;
    PyMongo's async client replaces it: docs/differences.md). The store reads and writes
    ``database`` through its own
    codec options (timezone-aware UTC datetimes), whatever the client's. It does not close a
    client it was given; :meth:`from_uri` makes a store that owns (and closes) its client.

    ``write_concern`` applies to claims, every fenced write (lock extension, completion,
    rescheduling, terminal marking, demotion, release), the operators' writes (``delete_job``,
    ``modify_job``, ``delete_jobs``) and every write of the fleet controls (``controls_collection``:
    pauses, slots, rate tokens, leases; :class:`MongoControls`). ``None`` (the default) keeps the
    client's, which on a replica set is ``w: "majority"``: a claim then waits until a majority has
    journaled it (a few ms per claim on one node; throughput comes from concurrent claimers), and it
    survives a failover. ``WriteConcern(w=1)`` is faster, but a claim acknowledged by a primary that
    fails before replicating it is rolled back: the new primary sees the record unclaimed and
    another worker may run the job while the first execution still runs (its fenced writes then
    fail). Unacknowledged (``w=0``) concerns are refused: fencing needs the matched count.

    ``history_write_concern`` applies to the history rows alone (``None``: the client's). A row
    is never fenced and its loss at a failover loses a line of the story, not a job, so
    ``WriteConcern(w=1)`` there is a sound trade for throughput while claims stay majority.

    ``claim_path`` forces a claim implementation (benchmarks, tests); ``"auto"`` detects it once
    per store: the MongoDB 8 sorted ``updateOne`` when ``hello.maxWireVersion >= 25`` and the
    ``jobs_dogs_records_lock_id`` index exists, ``findOneAndUpdate`` otherwise.
    """

    def __init__(
        self,
        client: AsyncMongoClient[Any],
        database: str,
        *,
        records_collection: str = q.DEFAULT_RECORDS_COLLECTION,
        history_collection: str = q.DEFAULT_HISTORY_COLLECTION,
        controls_collection: str = q.DEFAULT_CONTROLS_COLLECTION,
        write_concern: WriteConcern | None = None,
        history_write_concern: WriteConcern | None = None,
        claim_path: str = q.CLAIM_PATH_AUTO,
        owns_client: bool = False,
    ) -> None:
        validation.choice("claim_path", claim_path, q.CLAIM_PATHS)
        refuse_motor(client)
        for field, concern in (
            ("write_concern", write_concern),
            ("history_write_concern", history_write_concern),
        ):
            if concern is not None and not concern.acknowledged:
                raise InvalidOptionError(
                    field, concern, "needs an acknowledged write concern (w >= 1)"
                )
        self._client = client
        self._owns_client = owns_client
        self._claim_path_option = claim_path
        self._db: AsyncDatabase[Document] = client.get_database(
            database, codec_options=_CODEC_OPTIONS
        )
        self._records: AsyncCollection[Document] = self._db.get_collection(records_collection)
        self._history: AsyncCollection[Document] = self._db.get_collection(
            history_collection, write_concern=history_write_concern
        )
        self._fenced: AsyncCollection[Document] = (
            self._records
            if write_concern is None
            else self._records.with_options(write_concern=write_concern)
        )
        # The controls decide on the primary, under the claims' write concern.
        self._controls: AsyncCollection[Document] = self._db.get_collection(
            controls_collection,
            read_preference=ReadPreference.PRIMARY,
            write_concern=write_concern,
        )
        # Claim read-backs and reconciler scans read their own writes: primary, local.
        self._primary: AsyncCollection[Document] = self._records.with_options(
            read_preference=ReadPreference.PRIMARY, read_concern=ReadConcern("local")
        )
        self._setup_lock = anyio.Lock()
        self._capabilities_lock = anyio.Lock()
        self._setup_done = False
        self._capabilities: StoreCapabilities | None = None
        self._missing_hints: set[str] = set()  # indexes found missing by hinted reads
        self._missing_claim_hints: set[str] = set()  # claim hints whose index is missing
        self._claim_indexes_listed_at = 0.0

    @classmethod
    def from_uri(cls, uri: str, database: str, **options: Any) -> AsyncMongoJobStore:
        """A store owning a new client of ``uri`` (closed by :meth:`close`)."""
        client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True)
        return cls(client, database, owns_client=True, **options)

    @property
    def database_name(self) -> str:
        return self._db.name

    @property
    def records_collection(self) -> AsyncCollection[Document]:
        return self._records

    @property
    def history_collection(self) -> AsyncCollection[Document]:
        return self._history

    @property
    def controls_collection(self) -> AsyncCollection[Document]:
        return self._controls

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} database={self._db.name!r} "
            f"records={self._records.name!r} history={self._history.name!r}>"
        )

    # ------------------------------------------------------------------------------------------
    # Setup and capabilities
    # ------------------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Create the indexes of the three collections (index failures are logged, not raised).
        An index that exists with other options is dropped and recreated. Done once per store;
        retried on a later call only when a transient error prevented it. An unreachable
        server raises :class:`~dogs_core.errors.StoreUnavailableError` at the first
        collection, so that the caller's retry policy bounds the wait."""
        async with self._setup_lock:
            if self._setup_done:
                return
            records_ok = await ensure_indexes(self._records, q.RECORD_INDEXES)
            history_ok = await ensure_indexes(self._history, q.HISTORY_INDEXES)
            controls_ok = await ensure_indexes(self._controls, q.CONTROL_INDEXES)
            self._setup_done = records_ok and history_ok and controls_ok

    async def server_time(self) -> datetime | None:
        """The server's clock: ``localTime`` of ``hello`` (milliseconds), or ``None`` when the
        reply has none (a server that does not report it)."""
        with translate_errors("server time", write=False):
            hello = await self._db.command("hello")
        local_time = hello.get("localTime")
        if not isinstance(local_time, datetime):
            return None
        if local_time.tzinfo is None:
            return local_time.replace(tzinfo=UTC)
        return local_time.astimezone(UTC)

    async def capabilities(self) -> StoreCapabilities:
        """Once per store, after :meth:`setup`: which claim path this server supports."""
        if self._capabilities is not None:  # the hot path: every claim asks
            return self._capabilities
        async with self._capabilities_lock:
            if self._capabilities is not None:
                return self._capabilities
            await self.setup()
            with translate_errors("capability detection", write=False):
                hello = await self._db.command("hello")
                build_info = await self._db.command("buildInfo")
                indexes = (await list_indexes(self._records)).ready
            self._note_claim_indexes(indexes)  # claims never hint an index that is not there
            wire_version = int(hello.get("maxWireVersion", 0))
            has_lock_index = q.LOCK_ID_INDEX_NAME in indexes
            version = build_info.get("version")
            path = choose_claim_path(wire_version, has_lock_index, self._claim_path_option)
            if self._claim_path_option != q.CLAIM_PATH_AUTO:
                log.info("dogs: claim path forced to %s (MongoDB %s)", path, version)
            elif path == CLAIM_PATH_SORTED_UPDATE_ONE:
                log.info("dogs: claims use the sorted updateOne (MongoDB %s)", version)
            elif wire_version >= SORTED_UPDATE_MIN_WIRE_VERSION:
                log.warning(
                    "dogs: index %s is missing on %s: claims fall back to findOneAndUpdate",
                    q.LOCK_ID_INDEX_NAME,
                    self._records.name,
                )
            else:
                log.info(
                    "dogs: claims use findOneAndUpdate (MongoDB %s, wire version %d < %d)",
                    version,
                    wire_version,
                    SORTED_UPDATE_MIN_WIRE_VERSION,
                )
            self._capabilities = StoreCapabilities(
                claim_path=path,
                supports_probe=True,
                server_version=str(version) if version is not None else None,
            )
            return self._capabilities

    # ------------------------------------------------------------------------------------------
    # Scheduling
    # ------------------------------------------------------------------------------------------

    async def schedule(self, job: NewJob, *, session: Any = None) -> ScheduleOutcome:
        """``insertOne`` of the record, as Dogs does; a duplicate key on ``uniqueIdentifier`` is
        a ``Duplicate`` of the holder. Every command joins ``session`` (a PyMongo session of
        this store's client); inside its transaction see :meth:`_schedule_in_transaction`."""
        document = _checked_document(job)
        if _in_transaction(session):
            return await self._schedule_in_transaction(job, document, session)
        try:
            with translate_errors("schedule", write=True):
                await self._records.insert_one(document, session=session)
        except DuplicateKeyError as error:
            if _duplicate_key_field(error.details) == "_id":
                return Scheduled(id=job.id)  # a retry of an insert that had landed
            if job.unique_identifier is None or (
                _duplicate_key_field(error.details) != "uniqueIdentifier"
            ):
                raise
            with translate_errors("schedule (duplicate lookup)", write=False):
                existing = await self._records.find_one(
                    q.unique_identifier_filter(job.unique_identifier), {"_id": 1}, session=session
                )
            existing_id = None if existing is None else str(existing["_id"])
            if existing_id == job.id:
                return Scheduled(id=job.id)
            return Duplicate(existing_id=existing_id, unique_identifier=job.unique_identifier)
        return Scheduled(id=job.id)

    async def _schedule_in_transaction(
        self, job: NewJob, document: Document, session: Any
    ) -> ScheduleOutcome:
        """``schedule`` inside the caller's transaction, where any failed write aborts the
        whole transaction. So a job with an identifier is an upsert by ``uniqueIdentifier``
        with every field in ``$setOnInsert``: a taken identifier matches, writes nothing and
        is read back, in the same session, as a ``Duplicate``. PyMongo's errors propagate as
        they are, labels included, so that the caller's ``with_transaction`` retries the whole
        transaction on a ``TransientTransactionError`` (a ``TransientStoreError`` would hide
        the label)."""
        if job.unique_identifier is None:
            await self._records.insert_one(document, session=session)
            return Scheduled(id=job.id)
        holder = q.unique_identifier_filter(job.unique_identifier)
        result = await self._records.update_one(
            holder, q.upsert_unique_update(document), upsert=True, session=session
        )
        if result.upserted_id is not None:
            return Scheduled(id=job.id)
        existing = await self._records.find_one(holder, {"_id": 1}, session=session)
        existing_id = None if existing is None else str(existing["_id"])
        if existing_id == job.id:
            return Scheduled(id=job.id)  # this transaction had scheduled it already
        return Duplicate(existing_id=existing_id, unique_identifier=job.unique_identifier)

    async def schedule_many(
        self, jobs: Sequence[NewJob], *, session: Any = None
    ) -> BulkScheduleResult:
        """One unordered ``bulkWrite``: an insert per item without an identifier, an upsert by
        ``uniqueIdentifier`` with every field in ``$setOnInsert`` per item with one. An item whose
        record cannot be stored as BSON (or is over 16 MiB) is an item error and is not sent.
        Items whose record already exists under their own id (a retried batch) count as
        scheduled; other items whose identifier is taken count as skipped. Every command joins
        ``session``; inside its transaction a write error (which has aborted the transaction)
        and every other PyMongo error propagate as they are (see
        :meth:`_schedule_in_transaction`)."""
        outcomes: list[ScheduleOutcome | None] = [None] * len(jobs)
        errors: list[ItemError] = []
        requests, request_items = _schedule_requests(jobs, errors)
        if not requests:
            return BulkScheduleResult(0, 0, errors=tuple(errors), outcomes=tuple(outcomes))
        write_errors, upserted = await self._bulk_schedule(requests, session)
        taken = _sort_outcomes(jobs, request_items, write_errors, upserted, outcomes, errors)
        if taken:
            await self._resolve_taken(jobs, taken, outcomes, session)
        errors.sort(key=lambda item: item.index)
        return BulkScheduleResult(
            scheduled_count=sum(isinstance(o, Scheduled) for o in outcomes),
            skipped_count=sum(isinstance(o, Duplicate) for o in outcomes),
            errors=tuple(errors),
            outcomes=tuple(outcomes),
        )

    async def _bulk_schedule(
        self, requests: list[InsertOne[Document] | UpdateOne], session: Any
    ) -> tuple[dict[int, Mapping[str, Any]], Mapping[int, Any]]:
        """The unordered ``bulkWrite`` of ``schedule_many``: its per-request write errors and
        upserted ids, by request index. A write concern error is transient (may have applied)."""
        if _in_transaction(session):
            result = await self._records.bulk_write(requests, ordered=False, session=session)
            return {}, result.upserted_ids or {}
        try:
            with translate_errors("schedule_many", write=True):
                result = await self._records.bulk_write(requests, ordered=False, session=session)
        except BulkWriteError as error:
            details = error.details
            if details.get("writeConcernErrors"):
                raise TransientStoreError(
                    f"schedule_many: write concern error ({details['writeConcernErrors'][0]})",
                    write_may_have_applied=True,
                ) from error
            write_errors = {int(e["index"]): e for e in details.get("writeErrors", [])}
            return write_errors, {int(u["index"]): u["_id"] for u in details.get("upserted", [])}
        return {}, result.upserted_ids or {}

    async def _resolve_taken(
        self,
        jobs: Sequence[NewJob],
        taken: Mapping[str, list[int]],
        outcomes: list[ScheduleOutcome | None],
        session: Any,
    ) -> None:
        """The outcomes of the items whose identifier was taken: ``Scheduled`` when the holder
        is the item's own record (a retried batch), ``Duplicate`` of the holder otherwise."""
        holders = await self._holders(list(taken), session)
        for identifier, item_indexes in taken.items():
            holder = holders.get(identifier)
            for item_index in item_indexes:
                if holder is not None and holder == jobs[item_index].id:
                    outcomes[item_index] = Scheduled(id=holder)
                else:
                    outcomes[item_index] = Duplicate(
                        existing_id=holder, unique_identifier=identifier
                    )

    async def _holders(self, identifiers: list[str], session: Any) -> dict[str, str]:
        """The ids of the records holding these identifiers. The batch has been written already,
        so a transient failure here says so (``write_may_have_applied``): retrying the batch is
        safe, every item keeps its id. In a transaction PyMongo's error propagates as it is."""
        try:
            cursor = self._records.find(
                {"uniqueIdentifier": {"$in": identifiers}},
                {"_id": 1, "uniqueIdentifier": 1},
                session=session,
            )
            found = await cursor.to_list(None)
        except PyMongoError as error:
            if _in_transaction(session) or not is_transient(error):
                raise
            raise TransientStoreError(
                f"schedule_many: the batch was written but its duplicates could not be "
                f"looked up ({type(error).__name__}: {error})",
                write_may_have_applied=True,
            ) from error
        return {str(doc["uniqueIdentifier"]): str(doc["_id"]) for doc in found}

    async def ensure_recurrent(
        self, job_name: str, *, priority: int, partition: int, now: datetime
    ) -> None:
        filter_ = q.ensure_recurrent_filter(job_name)
        for attempt in (1, 2):
            update = q.ensure_recurrent_update(
                record_id=new_record_id(), priority=priority, partition=partition, now=now
            )
            try:
                with translate_errors("ensure_recurrent", write=True):
                    await self._records.update_one(filter_, update, upsert=True)
                return
            except DuplicateKeyError:
                # Two instances upserted the same new record at once: the other one won, and
                # the retry now matches its record (an update, not an insert).
                if attempt == 2:
                    raise
                log.info("dogs: recurrent record %r was created concurrently; retrying", job_name)

    # ------------------------------------------------------------------------------------------
    # Fenced writes
    # ------------------------------------------------------------------------------------------

    async def _fenced_update(
        self, operation: str, filter_: Mapping[str, Any], update: Mapping[str, Any]
    ) -> bool:
        with translate_errors(operation, write=True):
            result = await self._fenced.update_one(filter_, update)
        return result.matched_count == 1

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        return await self._fenced_update(
            "extend_lock", q.fenced_filter(job_id, lock_id), q.extend_lock_update(locked_until)
        )

    async def complete_many(self, claims: Sequence[tuple[str, str]]) -> list[bool]:
        """One ``deleteMany`` per :data:`~dogs_mongo.queries.MAX_BATCH_SIZE` pairs (see
        :func:`~dogs_mongo.queries.complete_many_filter`); when it deleted fewer records than
        pairs, one ``find`` of the ids tells which still exist. A repeated job id raises
        ``InvalidOptionError`` before anything is sent. A transient failure after an earlier
        batch was deleted reports ``write_may_have_applied``; a retry then reports ``False`` for
        what the lost attempt deleted (the runtime checks those records are gone)."""
        pairs = check_completions(claims)
        verdicts: list[bool] = []
        for batch in q.batches(pairs):
            try:
                verdicts.extend(await self._complete_batch(batch))
            except TransientStoreError as error:
                if not verdicts or error.write_may_have_applied:
                    raise
                raise TransientStoreError(
                    f"complete_many: {len(verdicts)} of {len(pairs)} pairs were completed "
                    f"before this failure: {error}",
                    write_may_have_applied=True,
                ) from error
        return verdicts

    async def _complete_batch(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        with translate_errors("complete_many", write=True):
            result = await self._fenced.delete_many(q.complete_many_filter(pairs))
        if result.deleted_count == len(pairs):
            return [True] * len(pairs)
        ids = [job_id for job_id, _ in pairs]
        try:
            with translate_errors("complete_many (read-back)", write=False):
                cursor = self._primary.find(q.ids_filter(ids), {"_id": 1})
                found = await cursor.to_list(None)
        except TransientStoreError as error:
            raise TransientStoreError(
                f"complete_many: the records were deleted but which ones could not be read "
                f"back: {error}",
                write_may_have_applied=True,
            ) from error
        present = {str(document["_id"]) for document in found}
        absent = len(ids) - len(present)
        if result.deleted_count == absent:
            # Every record that is gone was deleted by this command: exact.
            return [job_id not in present for job_id in ids]
        if result.deleted_count == 0:
            return [False] * len(ids)
        # Some gone records were deleted here and some were gone before; one count cannot say
        # which. Report the gone ones as deleted (the port allows it): this needs a lost lock
        # whose job another worker already finished, in the same batch as owned completions.
        log.debug(
            "dogs: complete_many deleted %d of %d gone records; reporting all as deleted",
            result.deleted_count,
            absent,
        )
        return [job_id not in present for job_id in ids]

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
        update = q.reschedule_update(
            next_run_at=next_run_at, priority=priority, reset_tries=reset_tries, tries=tries
        )
        return await self._fenced_update("reschedule", q.fenced_filter(job_id, lock_id), update)

    async def mark_max_tries_reached(
        self, job_id: str, lock_id: str, *, now: datetime, expires_at: datetime | None
    ) -> bool:
        return await self._fenced_update(
            "mark_max_tries_reached",
            q.mark_max_tries_filter(job_id, lock_id),
            q.mark_max_tries_update(now=now, expires_at=expires_at),
        )

    async def demote_stale(self, job_id: str, lock_id: str) -> bool:
        return await self._fenced_update(
            "demote_stale", q.fenced_filter(job_id, lock_id), q.demote_stale_update()
        )

    async def release_lock(self, job_id: str, lock_id: str, *, now: datetime) -> bool:
        return await self._fenced_update(
            "release_lock", q.fenced_filter(job_id, lock_id), q.release_lock_update(now)
        )

    # ------------------------------------------------------------------------------------------
    # Probe, reconciler, retention, administration
    # ------------------------------------------------------------------------------------------

    async def probe(
        self, *, hint: str, job_names: Sequence[str], partition: int, now: datetime
    ) -> float:
        """``explain`` (executionStats, ``maxTimeMS`` 1000, on the primary) of the claim query
        with ``hint``; returns ``executionTimeMillis``. A timeout raises
        ``TransientStoreError``; a result without a finite time raises ``StoreError``."""
        command = q.probe_explain_command(
            self._records.name, hint=hint, job_names=job_names, partition=partition, now=now
        )
        with translate_errors("probe", write=False):
            result = await self._db.command(
                command, read_preference=ReadPreference.PRIMARY, codec_options=_CODEC_OPTIONS
            )
        try:
            return q.probe_execution_millis(result)
        except ValueError as error:
            raise StoreError(f"probe with hint {hint!r}: {error}") from error

    async def reconcile_partitions(
        self,
        *,
        job_names: Sequence[str],
        n_partitions: int,
        now: datetime,
        limit: int,
        choose_partition: Callable[[], int],
    ) -> int:
        validation.positive_int("n_partitions", n_partitions)
        if limit <= 0 or not job_names:
            return 0
        select = q.reconcile_select_filter(job_names=job_names, n_partitions=n_partitions, now=now)
        with translate_errors("reconcile_partitions (scan)", write=False):
            cursor = self._primary.find(select, dict(q.RECONCILE_PROJECTION)).limit(limit)
            found = await cursor.to_list(None)
        if not found:
            return 0
        updates: list[UpdateOne] = []
        for document in found:
            partition = check_chosen_partition(choose_partition(), n_partitions)
            updates.append(
                UpdateOne(
                    q.reconcile_cas_filter(document["_id"], n_partitions=n_partitions, now=now),
                    q.reconcile_update(partition),
                )
            )
        try:
            with translate_errors("reconcile_partitions", write=True):
                result = await self._records.bulk_write(updates, ordered=False)
        except BulkWriteError as error:
            modified = int(error.details.get("nModified", 0))
            log.warning(
                "dogs: partition reconciler: %d of %d updates failed (%s)",
                len(error.details.get("writeErrors", [])),
                len(updates),
                error,
            )
            return modified
        return int(result.modified_count)

    async def backfill_retention(self, *, retention: timedelta | None, now: datetime) -> int:
        update = q.backfill_retention_update(retention=retention, now=now)
        with translate_errors("backfill_retention", write=True):
            result = await self._records.update_many(q.backfill_retention_filter(), update)
        return int(result.modified_count)

    async def unlock_all(self) -> int:
        with translate_errors("unlock_all", write=True):
            result = await self._records.update_many(q.unlock_all_filter(), q.unlock_all_update())
        return int(result.modified_count)

    # ------------------------------------------------------------------------------------------
    # History
    # ------------------------------------------------------------------------------------------

    async def write_history_many(self, records: Sequence[HistoryRecord]) -> None:
        """One unordered ``bulkWrite`` of upserts per :data:`~dogs_mongo.queries.MAX_BATCH_SIZE`
        executions, each with the whole row in ``$setOnInsert`` (the first record of an
        execution id in the call is its upsert, see
        :func:`~dogs_mongo.queries.history_many_updates`); nothing is sent for no record.
        Every update is built before the first is sent, so an invalid record writes nothing.
        There is no duplicate-key case to handle (``executionId`` is not a unique index and each
        upsert inserts a fresh ``_id``): a write error propagates.
        A write concern error is a ``TransientStoreError`` (the writes may have applied);
        retrying is safe, the first row written still wins whole."""
        requests = [
            UpdateOne(filter_, update, upsert=True)
            for filter_, update in q.history_many_updates(records, new_record_id)
        ]
        sent = 0
        for batch in q.batches(requests):
            try:
                with translate_errors("write_history_many", write=True):
                    await self._history.bulk_write(list(batch), ordered=False)
            except BulkWriteError as error:
                concern_errors = error.details.get("writeConcernErrors")
                if concern_errors and not error.details.get("writeErrors"):
                    raise TransientStoreError(
                        f"write_history_many: write concern error ({concern_errors[0]})",
                        write_may_have_applied=True,
                    ) from error
                raise
            except TransientStoreError as error:
                if not sent or error.write_may_have_applied:
                    raise
                raise TransientStoreError(
                    f"write_history_many: {sent} of {len(requests)} executions were written "
                    f"before this failure: {error}",
                    write_may_have_applied=True,
                ) from error
            sent += len(batch)

    # ------------------------------------------------------------------------------------------
    # Reads (find_jobs, status_counts, get_executions: MongoSteering)
    # ------------------------------------------------------------------------------------------

    async def get_job(self, job_id: str) -> JobRecord | None:
        with translate_errors("get_job", write=False):
            document = await self._records.find_one({"_id": job_id})
        return None if document is None else q.record_from_document(document)

    async def close(self) -> None:
        """Close the client when this store created it (:meth:`from_uri`)."""
        if self._owns_client:
            await self._client.close()


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


def _in_transaction(session: Any) -> bool:
    """Whether ``session`` (a PyMongo session or ``None``) is in a transaction."""
    return session is not None and bool(session.in_transaction)


def _schedule_requests(
    jobs: Sequence[NewJob], errors: list[ItemError]
) -> tuple[list[InsertOne[Document] | UpdateOne], list[int]]:
    """The requests of ``schedule_many`` and, per request, the index of its item: an insert per
    item without an identifier, an upsert by ``uniqueIdentifier`` per item with one. An item
    that cannot be stored is appended to ``errors`` and gets no request."""
    requests: list[InsertOne[Document] | UpdateOne] = []
    request_items: list[int] = []  # request index -> item index
    for index, job in enumerate(jobs):
        try:
            document = _checked_document(job)
        except (InvalidParamsError, TypeError, ValueError) as error:
            errors.append(ItemError(index=index, error=error, job=job))
            continue
        request_items.append(index)
        if job.unique_identifier is None:
            requests.append(InsertOne(document))
        else:
            requests.append(
                UpdateOne(
                    q.unique_identifier_filter(job.unique_identifier),
                    q.upsert_unique_update(document),
                    upsert=True,
                )
            )
    return requests, request_items


def _sort_outcomes(
    jobs: Sequence[NewJob],
    request_items: Sequence[int],
    write_errors: Mapping[int, Mapping[str, Any]],
    upserted: Mapping[int, Any],
    outcomes: list[ScheduleOutcome | None],
    errors: list[ItemError],
) -> dict[str, list[int]]:
    """Fill ``outcomes`` (and ``errors``) of the items the bulk write settled; returns, per
    identifier, the items that found it taken (their outcome needs the holder's id)."""
    taken: dict[str, list[int]] = {}  # identifier -> items that found it taken
    for request_index, item_index in enumerate(request_items):
        job = jobs[item_index]
        identifier = job.unique_identifier
        failure = write_errors.get(request_index)
        if failure is None:
            if identifier is None or request_index in upserted:
                outcomes[item_index] = Scheduled(id=job.id)
            else:
                taken.setdefault(identifier, []).append(item_index)
        elif failure.get("code") == _DUPLICATE_KEY and _duplicate_key_field(failure) == "_id":
            outcomes[item_index] = Scheduled(id=job.id)  # retried, had landed
        elif failure.get("code") == _DUPLICATE_KEY and identifier is not None:
            taken.setdefault(identifier, []).append(item_index)  # lost an upsert race
        else:
            message = f"write error {failure.get('code')}: {failure.get('errmsg')}"
            errors.append(ItemError(index=item_index, error=StoreError(message), job=job))
    return taken


def _checked_document(job: NewJob) -> Document:
    """The record document of ``job``, refused (``InvalidParamsError``) when it cannot be stored
    as BSON or is over the 16 MiB document limit: nothing is sent for it."""
    document = q.document_from_new_job(job)
    try:
        size = len(bson.encode(document))
    except (InvalidDocument, OverflowError) as error:
        raise InvalidParamsError(
            "params", job.params, f"cannot be stored as a BSON document ({error})"
        ) from error
    if size > q.MAX_BSON_DOCUMENT_SIZE:
        raise InvalidParamsError(
            "params",
            job.params,
            f"the record would be {size} bytes, over the {q.MAX_BSON_DOCUMENT_SIZE}-byte "
            "BSON document limit",
        )
    return document


def _duplicate_key_field(details: Mapping[str, Any] | None) -> str | None:
    """Which unique index a duplicate-key error is about: ``"_id"``, ``"uniqueIdentifier"``,
    ``"jobName"`` or ``None`` when the server did not say."""
    if not details:
        return None
    key_pattern = details.get("keyPattern")
    if isinstance(key_pattern, Mapping) and key_pattern:
        return str(next(iter(key_pattern)))
    message = str(details.get("errmsg", ""))
    for name in ("_id_", "uniqueIdentifier_1", "jobName_1"):
        if f"index: {name} " in message:
            return name.rsplit("_", 1)[0] if name != "_id_" else "_id"
    return None
