"""The bulk role of the MongoDB store (:class:`~dogs_core.ports.AsyncBulkStore`): one chunk of
a selection per read, and the chunk's writes fenced per record (the filters and the fence are
in :mod:`dogs_mongo.queries.bulk`).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/bulk.py`` from this module. :class:`MongoBulk` is a base of the store class and uses
its collections (``_fenced`` for the writes: the store's write concern).

What a chunk of N records costs: one ``find`` (plus one aggregation of the history for an
error-type filter), then one unordered ``bulkWrite`` of N fenced ``updateOne``/``deleteOne``.
A delete that fell short of N reads which records are left (one ``find`` by ``_id``), and,
only when more are gone than it deleted (a worker finished one meanwhile), those records'
newest history rows, to tell its deletions from the workers'.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from pymongo import DeleteOne, ReplaceOne, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import OperationFailure

from dogs_core.domain import validation
from dogs_core.domain.archiving import ArchiveKind, check_archived_at
from dogs_core.domain.bulk import BulkChunk, BulkSelection, error_type_matches
from dogs_core.domain.records import JobRecord
from dogs_core.domain.steering import JobChange
from dogs_core.errors import InvalidOptionError
from dogs_mongo import queries as q
from dogs_mongo._async.feeds import _resolve
from dogs_mongo.errors import read_without_missing_hint, translate_errors
from dogs_mongo.queries import archive as qa
from dogs_mongo.queries import bulk as qb

if TYPE_CHECKING:
    from dogs_mongo._async.archive import MongoArchiver

__all__ = ["MongoBulk"]

log = logging.getLogger("dogs.mongo.store")

Document = dict[str, Any]

#: Records examined per read of a count with an error type.
_COUNT_CHUNK = 1_000


class MongoBulk:
    """Bulk actions by filter: ``select_for_bulk``, ``count_for_bulk``, ``modify_unchanged``,
    ``delete_unchanged``."""

    _records: AsyncCollection[Document]
    _history: AsyncCollection[Document]
    _fenced: AsyncCollection[Document]
    _missing_hints: set[str]

    async def select_for_bulk(
        self, selection: BulkSelection, *, now: datetime, after: str | None, limit: int
    ) -> BulkChunk:
        _check(selection, after)
        size = validation.integer("limit", limit, minimum=1)
        query = qb.bulk_query(selection, now=now, after=after)
        with translate_errors("select_for_bulk", write=False):
            # one more than asked: whether the walk goes on, without an empty last read
            documents = await self._bulk_find(query, size + 1)
            more = len(documents) > size
            records = [q.record_from_document(document) for document in documents[:size]]
            if selection.error_type is not None and records:
                types = await self._error_types([record.id for record in records])
                wanted = selection.error_type
                kept = [r for r in records if error_type_matches(types.get(r.id), wanted)]
            else:
                kept = records
        last_id = records[-1].id if more else None
        return BulkChunk(tuple(kept), len(records), last_id)

    async def count_for_bulk(self, selection: BulkSelection, *, now: datetime) -> int:
        _check(selection, None)
        if selection.error_type is None:
            query = qb.bulk_query(selection, now=now, after=None)
            with translate_errors("count_for_bulk", write=False):
                try:
                    return int(await self._records.count_documents(query.filter, hint=query.hint))
                except OperationFailure as error:
                    self._bulk_missing_hint(error, query.hint)
                    return int(await self._records.count_documents(query.filter))
        count = 0
        after: str | None = None
        while True:
            chunk = await self.select_for_bulk(selection, now=now, after=after, limit=_COUNT_CHUNK)
            count += len(chunk.records)
            if chunk.last_id is None:
                return count
            after = chunk.last_id

    async def modify_unchanged(
        self, changes: Sequence[tuple[JobRecord, JobChange]], *, now: datetime
    ) -> int:
        operations: list[UpdateOne] = []
        unchanging: list[Document] = []
        for snapshot, change in changes:
            if not isinstance(snapshot, JobRecord) or not isinstance(change, JobChange):
                raise InvalidOptionError("changes", changes, "must be (JobRecord, JobChange) pairs")
            fence = qb.bulk_fence(snapshot, unless_running_at=now)
            update = q.modify_job_update(change)
            if update:
                operations.append(UpdateOne(fence, update))
            else:
                unchanging.append(fence)
        matched = 0
        with translate_errors("modify_unchanged", write=True):
            if operations:
                result = await self._fenced.bulk_write(operations, ordered=False)
                matched += int(result.matched_count)
            if unchanging:
                matched += int(await self._fenced.count_documents({"$or": unchanging}))
        return matched

    async def delete_unchanged(
        self,
        snapshots: Sequence[JobRecord],
        *,
        unless_running_at: datetime | None,
        archived_at: datetime | None = None,
    ) -> list[JobRecord]:
        for snapshot in snapshots:
            if not isinstance(snapshot, JobRecord):
                raise InvalidOptionError("snapshots", snapshot, "must be JobRecords")
        stamp = None if archived_at is None else check_archived_at(archived_at)
        if not snapshots:
            return []
        fences = [qb.bulk_fence(one, unless_running_at=unless_running_at) for one in snapshots]
        archive = None if stamp is None else self._records_archive()
        if archive is not None and stamp is not None:
            await self._copy_to_archive(archive, fences, stamp)
        operations = [DeleteOne(fence) for fence in fences]
        with translate_errors("delete_unchanged", write=True):
            result = await self._fenced.bulk_write(operations, ordered=False)
        if archive is not None:
            await self._settle_archived(archive, [snapshot.id for snapshot in snapshots])
        deleted = int(result.deleted_count)
        if deleted == len(snapshots):
            return list(snapshots)
        return await self._deleted_among(snapshots, deleted)

    def _records_archive(self) -> AsyncCollection[Document]:
        return cast("MongoArchiver", self).archive_collection(ArchiveKind.FAILED_RECORDS)

    async def _copy_to_archive(
        self, archive: AsyncCollection[Document], fences: Sequence[Document], stamp: datetime
    ) -> None:
        """The archive's step 3 for a bulk delete: the records still as their snapshots, copied
        pending (a crash before the settle is settled by the next archive batch)."""
        with translate_errors("delete_unchanged (archive copies)", write=True):
            documents: list[Document] = await self._records.find({"$or": list(fences)}).to_list(
                None
            )
            if documents:
                copies = [qa.archive_copy(document, stamp) for document in documents]
                requests = [ReplaceOne({"_id": c["_id"]}, c, upsert=True) for c in copies]
                await archive.bulk_write(requests, ordered=False)

    async def _settle_archived(self, archive: AsyncCollection[Document], ids: list[str]) -> None:
        """The archive's step 5: a copy whose record is still live (changed meanwhile: not
        deleted) is removed; the others are settled."""
        with translate_errors("delete_unchanged (archive settle)", write=True):
            cursor = self._records.find(qa.ids_filter(ids), {"_id": 1})
            survivors = [document["_id"] for document in await cursor.to_list(None)]
            if survivors:
                await archive.delete_many(qa.pending_copies_filter(survivors))
            gone = [record_id for record_id in ids if record_id not in set(survivors)]
            if gone:
                await archive.update_many(
                    {**qa.ids_filter(gone), **qa.PENDING_FILTER}, qa.confirm_update()
                )

    async def _deleted_among(self, snapshots: Sequence[JobRecord], deleted: int) -> list[JobRecord]:
        """Which of ``snapshots`` this call deleted, knowing it deleted ``deleted``: the gone
        ones, less those a worker finished meanwhile (their history says so)."""
        by_id = {snapshot.id: snapshot for snapshot in snapshots}
        with translate_errors("delete_unchanged (read back)", write=False):
            cursor = self._records.find({"_id": {"$in": list(by_id)}}, {"_id": 1})
            left = {str(document["_id"]) for document in await cursor.to_list(None)}
            gone = [job_id for job_id in by_id if job_id not in left]
            if len(gone) > deleted:
                rows = self._history.find(
                    {"jobId": {"$in": gone}},
                    {"jobId": 1, "executionId": 1, "startedAt": 1},
                )
                finished = qb.finished_since(await rows.to_list(None), by_id)
                gone = [job_id for job_id in gone if job_id not in finished]
        if len(gone) != deleted:
            log.info(
                "dogs: a bulk delete removed %d records; %d of its chunk are gone (some finished "
                "by workers meanwhile): the ids listed are the best match",
                deleted,
                len(gone),
            )
        return [by_id[job_id] for job_id in gone[:deleted]]

    async def _bulk_find(self, query: qb.BulkQuery, limit: int) -> list[Document]:
        try:
            return await self._bulk_page(query, limit, query.hint)
        except OperationFailure as error:
            self._bulk_missing_hint(error, query.hint)
            return await self._bulk_page(query, limit, None)

    async def _bulk_page(
        self, query: qb.BulkQuery, limit: int, hint: Mapping[str, int] | None
    ) -> list[Document]:
        cursor = self._records.find(query.filter).sort([("_id", 1)]).limit(limit)
        if hint is not None:
            cursor = cursor.hint(dict(hint))
        documents: list[Document] = await cursor.to_list(None)
        return documents

    async def _error_types(self, job_ids: Sequence[str]) -> dict[str, str | None]:
        cursor = await _resolve(self._history.aggregate(qb.error_types_pipeline(job_ids)))
        rows: list[Document] = await cursor.to_list(None)
        return {str(row["_id"]): row.get("errorType") for row in rows}

    def _bulk_missing_hint(self, error: OperationFailure, hint: Mapping[str, int]) -> None:
        read_without_missing_hint(
            error, hint, collection=self._records.name, seen=self._missing_hints
        )


def _check(selection: object, after: object) -> None:
    if not isinstance(selection, BulkSelection):
        raise InvalidOptionError("selection", selection, "must be a BulkSelection")
    if after is not None and not isinstance(after, str):
        raise InvalidOptionError("after", after, "must be a record id (a string)")
