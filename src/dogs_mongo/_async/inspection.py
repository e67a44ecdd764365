"""The inspection role of the MongoDB store (:class:`~dogs_core.ports.AsyncInspectionStore`):
the operators' searches across jobs, the error report, the archive searched the same ways, and
who holds each fleet slot (:mod:`dogs_mongo.queries.inspection` builds every command and says
which index serves which filter).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/inspection.py`` from this module. :class:`MongoInspection` is a base of the store class
and uses its collections (and the archive's, through :class:`MongoArchiver`).

Every read names its index (a hint by key pattern); a missing index is read around with a
warning, as the steering reads do. A search with a filter no index serves gets a time limit
(``maxTimeMS``) and raises :class:`~dogs_core.errors.QueryTooBroadError` past it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import ExecutionTimeout, OperationFailure

from dogs_core.domain.archiving import ArchiveKind
from dogs_core.domain.finding import (
    Archived,
    ErrorScan,
    ExecutionCursor,
    ExecutionQuery,
    RecordQuery,
    check_error_window,
    newest_to_read,
)
from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobRecord
from dogs_core.errors import InvalidOptionError, QueryTooBroadError
from dogs_mongo import queries as q
from dogs_mongo._async.feeds import _resolve
from dogs_mongo.errors import read_without_missing_hint, translate_errors
from dogs_mongo.queries import archive as qa
from dogs_mongo.queries import inspection as qi
from dogs_mongo.queries.inspection import KEYS_OF, MAX_ERROR_ROWS, job_ids_of, page_limit

__all__ = ["MongoInspection"]

Document = dict[str, Any]


class MongoInspection:
    """The operators' searches of the store."""

    _records: AsyncCollection[Document]
    _history: AsyncCollection[Document]
    _controls: AsyncCollection[Document]
    _missing_hints: set[str]

    #: MongoArchiver's, a sibling base of the store.
    archive_collection: Callable[[ArchiveKind], AsyncCollection[Document]]

    async def find_executions(
        self, query: ExecutionQuery, *, limit: int, before: ExecutionCursor | None = None
    ) -> list[HistoryRecord]:
        """One ``find`` newest first through the index the query's filters choose."""
        documents = await self._inspect_executions(
            self._history, query, limit, before, archive=False
        )
        return [q.history_from_document(document) for document in documents]

    async def find_archived_executions(
        self, query: ExecutionQuery, *, limit: int, before: ExecutionCursor | None = None
    ) -> list[Archived[HistoryRecord]]:
        archive = self.archive_collection(ArchiveKind.HISTORY)
        documents = await self._inspect_executions(archive, query, limit, before, archive=True)
        return [
            Archived(q.history_from_document(document), document.get(qa.ARCHIVED_AT_FIELD))
            for document in documents
        ]

    async def _inspect_executions(
        self,
        collection: AsyncCollection[Document],
        query: ExecutionQuery,
        limit: int,
        before: ExecutionCursor | None,
        *,
        archive: bool,
    ) -> list[Document]:
        page_limit(limit)
        plan = qi.execution_plan(query, before, archive=archive)
        filter_ = dict(plan.filter)
        if archive:
            filter_[qa.PENDING_FIELD] = {"$exists": False}
        with translate_errors("find_executions", write=False):
            if plan.needs_names:
                names = await collection.distinct("jobName")
                if not names:
                    return []
                filter_ = plan.with_names([str(name) for name in names]) | (
                    {qa.PENDING_FIELD: {"$exists": False}} if archive else {}
                )
            return await self._inspect_find(
                collection,
                filter_,
                sort=[("startedAt", -1)],
                limit=limit,
                hint=KEYS_OF[plan.hint],
                bounded=query.unindexed if plan.bounded else (),
            )

    async def find_matching_records(
        self, query: RecordQuery, *, now: datetime, limit: int, after: str | None = None
    ) -> list[JobRecord]:
        page_limit(limit)
        filter_, hint = qi.record_plan(query, now=now, after=after)
        with translate_errors("find_matching_records", write=False):
            documents = await self._inspect_find(
                self._records,
                filter_,
                sort=[("_id", 1)],
                limit=limit,
                hint=hint,
                bounded=query.unindexed,
            )
        return [q.record_from_document(document) for document in documents]

    async def find_archived_records(
        self, query: RecordQuery, *, limit: int, after: str | None = None
    ) -> list[Archived[JobRecord]]:
        page_limit(limit)
        if query.state is not None:
            raise InvalidOptionError("state", query.state, "archived records have no state")
        filter_, hint = qi.record_plan(query, now=None, after=after, archive=True)
        filter_[qa.PENDING_FIELD] = {"$exists": False}
        unindexed = tuple(
            name
            for name, given in (
                ("job name", query.job_name),
                ("unique key", query.unique_identifier),
                ("owner", query.owner),
                ("params", query.params),
            )
            if given is not None
        )
        with translate_errors("find_archived_records", write=False):
            documents = await self._inspect_find(
                self.archive_collection(ArchiveKind.FAILED_RECORDS),
                filter_,
                sort=[("_id", 1)],
                limit=limit,
                hint=hint,
                bounded=unindexed,
            )
        return [
            Archived(q.record_from_document(document), document.get(qa.ARCHIVED_AT_FIELD))
            for document in documents
        ]

    async def latest_errors(self, job_ids: Sequence[str]) -> dict[str, HistoryRecord]:
        """One aggregation through ``jobId_1_startedAt_-1``: the error rows of the ids, newest
        first, the first of each id kept."""
        ids = job_ids_of(job_ids)
        if not ids:
            return {}
        pipeline: list[Document] = [
            {"$match": {"jobId": {"$in": ids}, "status": HistoryStatus.ERROR.value}},
            {"$sort": {"jobId": 1, "startedAt": -1}},
            {"$group": {"_id": "$jobId", "row": {"$first": "$$ROOT"}}},
        ]
        hint = KEYS_OF[q.HISTORY_JOB_ID_INDEX_NAME]
        with translate_errors("latest_errors", write=False):
            rows = await self._inspect_aggregate(pipeline, hint)
        return {str(row["_id"]): q.history_from_document(row["row"]) for row in rows}

    async def error_groups(
        self, *, since: datetime, until: datetime, job_name: str | None, max_rows: int
    ) -> ErrorScan:
        """One aggregation of the window's newest ``max_rows`` error rows, then (only when it
        grouped exactly ``max_rows``) a count of one more to tell whether there were more."""
        start, end = check_error_window(since, until)
        page_limit(max_rows, "max_rows", MAX_ERROR_ROWS)
        pipeline = qi.error_groups_pipeline(
            since=start, until=end, job_name=job_name, max_rows=max_rows
        )
        hint = qi.UNSUCCESSFUL_INDEX.key_document
        with translate_errors("error_groups", write=False):
            documents = await self._inspect_aggregate(pipeline, hint)
            groups = [qi.raw_error_group(document) for document in documents]
            examined = sum(group.count for group in groups)
            truncated = False
            if examined >= max_rows:
                match = pipeline[0]["$match"]
                more = await self._history.count_documents(match, limit=max_rows + 1)
                truncated = more > max_rows
            rows = await self._newest_rows(newest_to_read(groups))
        filled = tuple(
            dataclasses.replace(group, newest=rows.get(group.newest_execution_id))
            for group in groups
        )
        return ErrorScan(filled, examined, truncated)

    async def _newest_rows(self, execution_ids: Sequence[str]) -> dict[str, HistoryRecord]:
        """The rows an error report shows (the newest of each group), by execution id."""
        if not execution_ids:
            return {}
        cursor = self._history.find({"executionId": {"$in": list(execution_ids)}})
        documents: list[Document] = await cursor.to_list(None)
        rows = (q.history_from_document(document) for document in documents)
        return {row.execution_id: row for row in rows}

    async def held_slot_holders(self, *, now: datetime) -> dict[str, frozenset[str]]:
        pipeline = q.held_slots_pipeline(now)
        pipeline[-1] = {"$group": {"_id": "$jobName", "holders": {"$addToSet": "$holder"}}}
        with translate_errors("held_slot_holders", write=False):
            cursor = await _resolve(self._controls.aggregate(pipeline))
            rows: list[Document] = await cursor.to_list(None)
        return {
            str(row["_id"]): frozenset(str(holder) for holder in row["holders"])
            for row in rows
            if row.get("_id") is not None
        }

    # -- reads ------------------------------------------------------------------------------

    async def _inspect_find(
        self,
        collection: AsyncCollection[Document],
        filter_: Mapping[str, Any],
        *,
        sort: list[tuple[str, int]],
        limit: int,
        hint: Mapping[str, int],
        bounded: tuple[str, ...],
    ) -> list[Document]:
        try:
            try:
                return await self._inspect_page(collection, filter_, sort, limit, hint, bounded)
            except OperationFailure as error:
                if isinstance(error, ExecutionTimeout):
                    raise
                read_without_missing_hint(
                    error, hint, collection=collection.name, seen=self._missing_hints
                )
                return await self._inspect_page(collection, filter_, sort, limit, None, bounded)
        except ExecutionTimeout:
            if not bounded:
                raise
            raise QueryTooBroadError(bounded, qi.UNINDEXED_MAX_TIME_MS / 1000) from None

    async def _inspect_page(
        self,
        collection: AsyncCollection[Document],
        filter_: Mapping[str, Any],
        sort: list[tuple[str, int]],
        limit: int,
        hint: Mapping[str, int] | None,
        bounded: tuple[str, ...],
    ) -> list[Document]:
        cursor = collection.find(filter_).sort(sort).limit(limit)
        if hint is not None:
            cursor = cursor.hint(dict(hint))
        if bounded:
            cursor = cursor.max_time_ms(qi.UNINDEXED_MAX_TIME_MS)
        documents: list[Document] = await cursor.to_list(None)
        return documents

    async def _inspect_aggregate(
        self, pipeline: list[Document], hint: Mapping[str, int]
    ) -> list[Document]:
        try:
            cursor = await _resolve(self._history.aggregate(pipeline, hint=dict(hint)))
        except OperationFailure as error:
            read_without_missing_hint(
                error, hint, collection=self._history.name, seen=self._missing_hints
            )
            cursor = await _resolve(self._history.aggregate(pipeline))
        rows: list[Document] = await cursor.to_list(None)
        return rows
