"""What an operator reads and changes in the MongoDB job store: ``find_jobs`` by state with a
cursor, ``status_counts``, ``get_executions``, and the atomic steps behind cancel, retry,
reschedule and delete (``delete_job``, ``modify_job``, ``delete_jobs``).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/steering.py`` from this module. :class:`MongoSteering` is a base of the store class; it
uses the store's collections (``_fenced``, the store's write concern, for the writes). The
filters, one per :class:`~dogs_core.domain.records.JobState`, are in
:mod:`dogs_mongo.queries.states`.

Each read goes through the index of its state, named by a hint. When that index is missing
(a database set up by Node Dogs only, or a ``setup`` that failed), the read is sent again
without the hint and a warning names the index: slower, still right.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import OperationFailure

from dogs_core.domain import validation
from dogs_core.domain.feeds import check_history_filter
from dogs_core.domain.records import HistoryRecord, HistoryStatus, JobRecord, JobState, NameStatus
from dogs_core.domain.steering import JobChange, check_bulk_state, check_state
from dogs_core.errors import InvalidOptionError
from dogs_mongo import queries as q
from dogs_mongo._async.changes import _resolve
from dogs_mongo.errors import read_without_missing_hint, translate_errors

__all__ = ["MongoSteering"]


Document = dict[str, Any]


class MongoSteering:
    """The operators' methods of the store and the reads behind ``dogs status``/``history``."""

    _records: AsyncCollection[Document]
    _history: AsyncCollection[Document]
    _fenced: AsyncCollection[Document]
    _missing_hints: set[str]

    # ------------------------------------------------------------------------------------------
    # Records by state
    # ------------------------------------------------------------------------------------------

    async def find_jobs(
        self,
        *,
        job_name: str | None = None,
        state: JobState | None = None,
        unique_identifier: str | None = None,
        after: str | None = None,
        limit: int = 100,
        now: datetime | None = None,
    ) -> list[JobRecord]:
        """One ``find`` sorted by ``_id``, through the state's index
        (:func:`~dogs_mongo.queries.find_jobs_query`)."""
        wanted = check_state(state)
        validation.integer("limit", limit, minimum=1)
        _check_strings(job_name=job_name, unique_identifier=unique_identifier, after=after)
        if wanted is not None and now is None:
            raise InvalidOptionError("now", now, "is required with a state filter")
        query = q.find_jobs_query(
            job_name=job_name,
            state=wanted,
            unique_identifier=unique_identifier,
            after=after,
            limit=limit,
            now=now,
        )
        with translate_errors("find_jobs", write=False):
            try:
                documents = await self._find_page(query, query.hint)
            except OperationFailure as error:
                self._missing_hint(error, query.hint)
                documents = await self._find_page(query, None)
        return [q.record_from_document(document) for document in documents]

    async def _find_page(
        self, query: q.FindJobsQuery, hint: Mapping[str, int] | None
    ) -> list[Document]:
        cursor = self._records.find(query.filter).sort(query.sort).limit(query.limit)
        if hint is not None:
            cursor = cursor.hint(dict(hint))
        documents: list[Document] = await cursor.to_list(None)
        return documents

    def _missing_hint(self, error: OperationFailure, hint: Mapping[str, int]) -> None:
        read_without_missing_hint(
            error, hint, collection=self._records.name, seen=self._missing_hints
        )

    async def delete_jobs(
        self, *, job_name: str | None, state: JobState, now: datetime, dry_run: bool = False
    ) -> int:
        """One ``deleteMany`` (or, with ``dry_run``, one count) of the state's filter, through
        its index; a record whose lock is live at ``now`` never matches."""
        wanted = check_bulk_state(state)
        validation.boolean("dry_run", dry_run)
        _check_strings(job_name=job_name)
        filter_, hint = q.delete_jobs_query(job_name=job_name, state=wanted, now=now)
        operation = "delete_jobs (count)" if dry_run else "delete_jobs"
        with translate_errors(operation, write=not dry_run):
            try:
                return await self._delete_or_count(filter_, hint, dry_run)
            except OperationFailure as error:
                self._missing_hint(error, hint)
                return await self._delete_or_count(filter_, None, dry_run)

    async def _delete_or_count(
        self, filter_: Mapping[str, Any], hint: Mapping[str, int] | None, dry_run: bool
    ) -> int:
        options: dict[str, Any] = {} if hint is None else {"hint": dict(hint)}
        if dry_run:
            return int(await self._records.count_documents(filter_, **options))
        result = await self._fenced.delete_many(filter_, **options)
        return int(result.deleted_count)

    # ------------------------------------------------------------------------------------------
    # One record
    # ------------------------------------------------------------------------------------------

    async def delete_job(
        self,
        job_id: str,
        *,
        unless_running_at: datetime | None = None,
        unless_failed: bool = False,
    ) -> JobRecord | None:
        """One ``findOneAndDelete`` by ``_id`` (and the conditions), returning the record."""
        _check_id(job_id)
        validation.boolean("unless_failed", unless_failed)
        filter_ = q.delete_job_filter(
            job_id, unless_running_at=unless_running_at, unless_failed=unless_failed
        )
        with translate_errors("delete_job", write=True):
            before = await self._fenced.find_one_and_delete(filter_)
        return None if before is None else q.record_from_document(before)

    async def modify_job(
        self, job_id: str, change: JobChange, *, now: datetime
    ) -> JobRecord | None:
        """One ``findOneAndUpdate`` by ``_id`` unless the lock is live at ``now``, returning the
        record after it (a change of nothing is one ``findOne`` of the same filter)."""
        _check_id(job_id)
        if not isinstance(change, JobChange):
            raise InvalidOptionError("change", change, "must be a JobChange")
        filter_ = q.modify_job_filter(job_id, now)
        update = q.modify_job_update(change)
        if not update:
            with translate_errors("modify_job (read)", write=False):
                document = await self._fenced.find_one(filter_)
        else:
            with translate_errors("modify_job", write=True):
                document = await self._fenced.find_one_and_update(
                    filter_, update, return_document=ReturnDocument.AFTER
                )
        return None if document is None else q.record_from_document(document)

    # ------------------------------------------------------------------------------------------
    # Views
    # ------------------------------------------------------------------------------------------

    async def status_counts(self, *, now: datetime) -> list[NameStatus]:
        with translate_errors("status_counts", write=False):
            cursor = await _resolve(self._records.aggregate(q.status_counts_pipeline(now)))
            rows: list[Document] = await cursor.to_list(None)
        return [
            NameStatus(
                job_name=str(row["_id"]),
                due=int(row["due"]),
                scheduled_later=int(row["later"]),
                running=int(row["running"]),
                stale=int(row["stale"]),
                terminal=int(row["terminal"]),
                oldest_due_at=row.get("oldestDueAt"),
            )
            for row in rows
        ]

    async def get_executions(
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
        if status is not None:
            status = HistoryStatus(
                validation.choice("status", status, tuple(s.value for s in HistoryStatus))
            )
        validation.integer("limit", limit, minimum=0)
        validation.integer("skip", skip, minimum=0)
        if limit == 0:
            return []
        filter_ = q.get_executions_filter(job_name, job_id, status)
        lead = 1 if skip > 0 else 0
        with translate_errors("get_executions", write=False):
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


def _check_id(job_id: object) -> None:
    if not isinstance(job_id, str):
        raise InvalidOptionError("job_id", job_id, "must be a string")


def _check_strings(**values: object) -> None:
    """Each given value is ``None`` or a string (``InvalidOptionError`` naming it otherwise)."""
    for field, value in values.items():
        if value is not None and not isinstance(value, str):
            raise InvalidOptionError(field, value, "must be a string")
