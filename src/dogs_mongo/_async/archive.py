"""The archive on MongoDB (:class:`~dogs_core.ports.AsyncArchiveStore`): old history rows and
failed records moved in batches into ``<history>_archive`` and ``<records>_archive``
(:mod:`dogs_mongo.queries.archive` builds every command).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/archive.py`` from this module. :class:`MongoArchiver` is a base of the store class and
uses its collections.

One batch, in order (each step idempotent, so a crash anywhere is finished by the next batch):

1. settle the pending copies a crashed batch left (steps 4 and 5 for them);
2. read up to N old documents through an existing index (``explain``: one IXSCAN);
3. upsert each into the archive by ``_id``, marked ``archivePending`` (one unordered bulk);
4. delete the originals: the history rows by id, the failed records fenced on still being the
   same failed record (:func:`~dogs_mongo.queries.archive.failed_record_fence`);
5. read which originals are still there: their pending copies are removed (a record revived by
   ``retry_now`` between 3 and 4 stays live and leaves no copy); the others are settled.

What a batch costs: six round trips for N documents, each document read, written and deleted
once. The history read walks Dogs' ``{jobName: 1, startedAt: 1}`` with the bounds ``startedAt <
cutoff`` per name; the failed read walks the partial index of failed records (every failed
record's key until N old ones are found). No index is added to the live collections.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo import DeleteOne, ReplaceOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from dogs_core.domain.archiving import (
    ArchiveKind,
    check_archive_batch,
    check_archived_at,
    check_cutoff,
    check_kind,
)
from dogs_core.domain.validation import optional_text
from dogs_core.errors import InvalidOptionError
from dogs_mongo._async.indexes import ensure_indexes
from dogs_mongo.errors import translate_errors
from dogs_mongo.queries import archive as qa

__all__ = ["MongoArchiver"]


Document = dict[str, Any]


class MongoArchiver:
    """The archive half of the store: ``archive_history``, ``archive_failed_records``, their
    counts, and :meth:`copy_batch` (step 3 alone, for crash tests)."""

    _db: AsyncDatabase[Document]
    _records: AsyncCollection[Document]
    _fenced: AsyncCollection[Document]
    _history: AsyncCollection[Document]
    _archive_names: tuple[str | None, str | None] = (None, None)

    def use_archive_collections(
        self, *, history: str | None = None, records: str | None = None
    ) -> None:
        """Archive into these collections (``None``: the live collection's name plus
        ``_archive``). Call it before the first archive call."""
        history_name = optional_text("history", history)
        records_name = optional_text("records", records)
        for field, name in (("history", history_name), ("records", records_name)):
            if name is not None and name in (self._history.name, self._records.name):
                raise InvalidOptionError(field, name, "must not be a live collection of Dogs")
        self._archive_names = (history_name, records_name)

    def archive_collection(self, kind: ArchiveKind) -> AsyncCollection[Document]:
        """The archive collection of ``kind``."""
        history_name, records_name = self._archive_names
        if ArchiveKind(kind) is ArchiveKind.HISTORY:
            name = history_name or qa.archive_collection_name(self._history.name)
        else:
            name = records_name or qa.archive_collection_name(self._records.name)
        return self._db.get_collection(name)

    def _source(self, kind: ArchiveKind) -> AsyncCollection[Document]:
        return self._history if kind is ArchiveKind.HISTORY else self._records

    async def setup_archive(self) -> None:
        """The archive collections' indexes (no TTL: keeping rows is the point)."""
        with translate_errors("archive setup", write=True):
            await ensure_indexes(
                self.archive_collection(ArchiveKind.HISTORY), qa.ARCHIVE_HISTORY_INDEXES
            )
            await ensure_indexes(
                self.archive_collection(ArchiveKind.FAILED_RECORDS), qa.ARCHIVE_RECORD_INDEXES
            )

    async def archive_history(
        self, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        """One batch of history rows (see the module documentation)."""
        return await self._archive(ArchiveKind.HISTORY, cutoff, batch_size, archived_at)

    async def archive_failed_records(
        self, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        """One batch of failed event records (see the module documentation)."""
        return await self._archive(ArchiveKind.FAILED_RECORDS, cutoff, batch_size, archived_at)

    async def count_archivable(self, kind: ArchiveKind, *, cutoff: datetime) -> int:
        """The documents a run with ``cutoff`` would move, counted through the batch index."""
        chosen = check_kind(kind)
        query = qa.batch_filter(chosen, check_cutoff(cutoff))
        with translate_errors("count archivable", write=False):
            return await self._source(chosen).count_documents(query, hint=qa.BATCH_HINTS[chosen])

    async def count_archived(self, kind: ArchiveKind) -> int:
        with translate_errors("count archived", write=False):
            return await self.archive_collection(check_kind(kind)).count_documents({})

    async def archived_at(self, job_id: str) -> datetime | None:
        """Two reads by key: the failed record's copy by ``_id``, the newest row's copy through
        ``archive_job_id``; pending copies are not archived yet."""
        wanted = {"$exists": False}
        with translate_errors("archived_at", write=False):
            record = await self.archive_collection(ArchiveKind.FAILED_RECORDS).find_one(
                {"_id": job_id, qa.PENDING_FIELD: wanted}, {qa.ARCHIVED_AT_FIELD: 1}
            )
            rows = (
                self.archive_collection(ArchiveKind.HISTORY)
                .find({"jobId": job_id, qa.PENDING_FIELD: wanted}, {qa.ARCHIVED_AT_FIELD: 1})
                .sort([(qa.ARCHIVED_AT_FIELD, -1)])
                .limit(1)
            )
            newest: list[Document] = await rows.to_list(None)
        moments = [
            document[qa.ARCHIVED_AT_FIELD]
            for document in ([record] if record else []) + newest
            if isinstance(document.get(qa.ARCHIVED_AT_FIELD), datetime)
        ]
        return max(moments, default=None)

    async def archived_keys(self, kind: ArchiveKind) -> list[str]:
        """The archive's keys, sorted: execution ids (history), record ids (failed records);
        for tests and small archives (it reads every key)."""
        chosen = check_kind(kind)
        field = "executionId" if chosen is ArchiveKind.HISTORY else "_id"
        with translate_errors("read archived keys", write=False):
            cursor = self.archive_collection(chosen).find({}, {field: 1})
            documents: list[Document] = await cursor.to_list(None)
        return sorted(str(document[field]) for document in documents)

    async def copy_batch(
        self, kind: ArchiveKind, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        """Steps 2 and 3 alone (a batch interrupted before its deletes); the number copied."""
        return len(
            await self._copy_batch(
                kind, cutoff=cutoff, batch_size=batch_size, archived_at=archived_at
            )
        )

    async def _copy_batch(
        self, kind: ArchiveKind, *, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> list[Document]:
        """Steps 2 and 3: read a batch and upsert its pending copies; the copies."""
        chosen = check_kind(kind)
        query = qa.batch_filter(chosen, check_cutoff(cutoff))
        size = check_archive_batch(batch_size)
        stamp = check_archived_at(archived_at)
        with translate_errors(f"archive {chosen.value}: read a batch", write=False):
            cursor = (
                self._source(chosen)
                .find(query)
                .sort(list(qa.BATCH_SORTS[chosen]))
                .hint(qa.BATCH_HINTS[chosen])
                .limit(size)
            )
            documents: list[Document] = await cursor.to_list(None)
        if not documents:
            return []
        copies = [qa.archive_copy(document, stamp) for document in documents]
        requests = [ReplaceOne({"_id": copy["_id"]}, copy, upsert=True) for copy in copies]
        with translate_errors(f"archive {chosen.value}: copy a batch", write=True):
            await self.archive_collection(chosen).bulk_write(requests, ordered=False)
        return copies

    async def _archive(
        self, kind: ArchiveKind, cutoff: datetime, batch_size: int, archived_at: datetime
    ) -> int:
        check_cutoff(cutoff)
        size = check_archive_batch(batch_size)
        check_archived_at(archived_at)
        archive = self.archive_collection(kind)
        with translate_errors(f"archive {kind.value}: read pending copies", write=False):
            cursor = archive.find(qa.PENDING_FILTER).limit(size)
            pending: list[Document] = await cursor.to_list(None)
        moved = await self._settle(kind, pending)
        copies = await self._copy_batch(
            kind, cutoff=cutoff, batch_size=size, archived_at=archived_at
        )
        return moved + await self._settle(kind, copies)

    async def _settle(self, kind: ArchiveKind, copies: Sequence[Document]) -> int:
        """Steps 4 and 5 for ``copies``: the originals deleted (fenced), then each copy settled
        or removed; the number of originals gone."""
        if not copies:
            return 0
        ids = [copy["_id"] for copy in copies]
        source = self._source(kind)
        archive = self.archive_collection(kind)
        with translate_errors(f"archive {kind.value}: delete the originals", write=True):
            if kind is ArchiveKind.HISTORY:
                await source.delete_many(qa.ids_filter(ids))
            else:
                fences = [DeleteOne(qa.failed_record_fence(copy)) for copy in copies]
                await self._fenced.bulk_write(fences, ordered=False)
        with translate_errors(f"archive {kind.value}: settle the copies", write=True):
            cursor = source.find(qa.ids_filter(ids), {"_id": 1})
            survivors = {document["_id"] for document in await cursor.to_list(None)}
            if survivors:
                await archive.delete_many(qa.pending_copies_filter(list(survivors)))
            gone = [record_id for record_id in ids if record_id not in survivors]
            if gone:
                await archive.update_many(qa.ids_filter(gone), qa.confirm_update())
        return len(gone)
