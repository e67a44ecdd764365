"""The scheduling role of the MongoDB store: ``insert_job`` (Dogs' ``insertOne``),
``insert_jobs`` (one unordered ``bulkWrite``), both joining the caller's session and
transaction, and the recurrent records' bootstrap (``ensure_recurrent``).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/scheduling.py`` from this module. :class:`MongoScheduling` is a base of the store class.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import bson
from bson.errors import InvalidDocument
from pymongo import InsertOne, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError, DuplicateKeyError, PyMongoError

from dogs_core.domain.records import (
    BulkScheduleResult,
    Duplicate,
    ItemError,
    NewJob,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.errors import InvalidParamsError, StoreError, TransientStoreError
from dogs_core.ids import new_record_id
from dogs_mongo import queries as q
from dogs_mongo.errors import is_transient, translate_errors

__all__ = ["MongoScheduling"]

log = logging.getLogger("dogs.mongo.store")

_DUPLICATE_KEY: Final = 11000

Document = dict[str, Any]


class MongoScheduling:
    """Inserting records."""

    _records: AsyncCollection[Document]
    _before_durable: dict[str, AsyncCollection[Document]]

    async def insert_job(self, job: NewJob, *, session: Any = None) -> ScheduleOutcome:
        """``insertOne`` of the record, as Dogs does; a duplicate key on ``uniqueIdentifier`` is
        a ``Duplicate`` of the holder. Every command joins ``session`` (a PyMongo session of
        this store's client); inside its transaction see :meth:`_schedule_in_transaction`."""
        document = _checked_document(job)
        if _in_transaction(session):
            return await self._schedule_in_transaction(job, document, session)
        # A parked record (a unique key's window being checked) is published next under the
        # store's concern, which makes it durable: w: 1 here spares a journal wait.
        target = self._records if job.parked_at is None else self._before_durable["records"]
        try:
            with translate_errors("insert_job", write=True):
                await target.insert_one(document, session=session)
        except DuplicateKeyError as error:
            if _duplicate_key_field(error.details) == "_id":
                return Scheduled(id=job.id)  # a retry of an insert that had landed
            if job.unique_identifier is None or (
                _duplicate_key_field(error.details) != "uniqueIdentifier"
            ):
                raise
            with translate_errors("insert_job (duplicate lookup)", write=False):
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
        """``insert_job`` inside the caller's transaction, where any failed write aborts the
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

    async def insert_jobs(
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
        """The unordered ``bulkWrite`` of ``insert_jobs``: its per-request write errors and
        upserted ids, by request index. A write concern error is transient (may have applied)."""
        if _in_transaction(session):
            result = await self._records.bulk_write(requests, ordered=False, session=session)
            return {}, result.upserted_ids or {}
        try:
            with translate_errors("insert_jobs", write=True):
                result = await self._records.bulk_write(requests, ordered=False, session=session)
        except BulkWriteError as error:
            details = error.details
            if details.get("writeConcernErrors"):
                raise TransientStoreError(
                    f"insert_jobs: write concern error ({details['writeConcernErrors'][0]})",
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
                f"insert_jobs: the batch was written but its duplicates could not be "
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


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


def _in_transaction(session: Any) -> bool:
    """Whether ``session`` (a PyMongo session or ``None``) is in a transaction."""
    return session is not None and bool(session.in_transaction)


def _schedule_requests(
    jobs: Sequence[NewJob], errors: list[ItemError]
) -> tuple[list[InsertOne[Document] | UpdateOne], list[int]]:
    """The requests of ``insert_jobs`` and, per request, the index of its item: an insert per
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
