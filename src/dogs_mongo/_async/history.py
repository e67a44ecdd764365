"""The history role of the MongoDB store: the rows executions leave (one unordered
``bulkWrite`` of ``$setOnInsert`` upserts per batch: the first row of an execution wins) and
the pages ``read_history`` reads back, newest first.

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/history.py`` from this module. :class:`MongoHistory` is a base of the store class; it
uses the store's history collection (with the history write concern).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError

from dogs_core.domain import validation
from dogs_core.domain.feeds import check_history_filter, check_history_status
from dogs_core.domain.records import HistoryRecord, HistoryStatus
from dogs_core.errors import TransientStoreError
from dogs_mongo import queries as q
from dogs_mongo.errors import translate_errors

__all__ = ["MongoHistory"]

Document = dict[str, Any]


class MongoHistory:
    """The rows executions leave."""

    _history: AsyncCollection[Document]

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
        await self._write_rows(self._history, records, "write_history_many")

    async def _write_rows(
        self,
        collection: AsyncCollection[Document],
        records: Sequence[HistoryRecord],
        operation: str,
    ) -> None:
        """:meth:`write_history_many` through ``collection`` (its write concern)."""
        requests = [
            UpdateOne(filter_, update, upsert=True)
            for filter_, update in q.history_many_updates(records)
        ]
        sent = 0
        for batch in q.batches(requests):
            try:
                with translate_errors(operation, write=True):
                    await collection.bulk_write(list(batch), ordered=False)
            except BulkWriteError as error:
                # A duplicate _id is a concurrent upsert of the same execution's row that
                # inserted first (q.history_row_id): its row won, as the first row should.
                write_errors = [
                    e for e in error.details.get("writeErrors") or () if e.get("code") != 11000
                ]
                concern_errors = error.details.get("writeConcernErrors")
                if concern_errors and not write_errors:
                    raise TransientStoreError(
                        f"{operation}: write concern error ({concern_errors[0]})",
                        write_may_have_applied=True,
                    ) from error
                if write_errors:
                    raise
            except TransientStoreError as error:
                if not sent or error.write_may_have_applied:
                    raise
                raise TransientStoreError(
                    f"{operation}: {sent} of {len(requests)} executions were written "
                    f"before this failure: {error}",
                    write_may_have_applied=True,
                ) from error
            sent += len(batch)

    async def supersede_history(self, row: HistoryRecord) -> bool:
        """One fenced ``updateOne`` of the execution's ``stale`` row
        (:func:`~dogs_mongo.queries.supersede_update`), with the history write concern."""
        filter_, update = q.supersede_update(row)
        with translate_errors("supersede_history", write=True):
            result = await self._history.update_one(filter_, update)
        return bool(result.matched_count)

    async def read_history(
        self,
        job_name: str | None = None,
        *,
        job_id: str | None = None,
        status: HistoryStatus | None = None,
        limit: int = 20,
        skip: int = 0,
    ) -> list[HistoryRecord]:
        """One ``find`` in ``startedAt`` order (an index serves it) of the page and one row on
        each side of it; when one of those shares the ``startedAt`` of the page's edge, the
        tie is read whole to order it by ``endedAt``
        (:func:`~dogs_mongo.queries.executions_page`)."""
        check_history_filter(job_name, job_id)
        status = check_history_status(status)
        validation.integer("limit", limit, minimum=0)
        validation.integer("skip", skip, minimum=0)
        if limit == 0:
            return []
        filter_ = q.get_executions_filter(job_name, job_id, status)
        lead = 1 if skip > 0 else 0
        with translate_errors("read_history", write=False):
            cursor = (
                self._history.find(filter_)
                .sort(q.get_executions_sort())
                .skip(skip - lead)
                .limit(limit + lead + 1)
            )
            documents: list[Document] = await cursor.to_list(None)
            page = q.executions_page(documents, lead=lead, limit=limit)
            if page is None:
                page = await self._executions_around_a_tie(
                    filter_, documents[lead : lead + limit], skip, limit
                )
        return [q.history_from_document(document) for document in page]

    async def _executions_around_a_tie(
        self, filter_: Mapping[str, Any], page: Sequence[Document], skip: int, limit: int
    ) -> list[Mapping[str, Any]]:
        """The page whose edge cuts a tie of ``startedAt``: the rows of its whole range of
        ``startedAt`` in full order, sliced after the count of the rows newer than it."""
        newer, window = q.executions_window_filters(filter_, page)
        before = int(await self._history.count_documents(newer))
        rows: list[Document] = await self._history.find(window).to_list(None)
        start = skip - before
        return q.executions_in_order(rows)[start : start + limit]
