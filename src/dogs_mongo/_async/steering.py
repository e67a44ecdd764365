"""The steering role of the MongoDB store: what an operator reads and changes, ``get_record``,
``find_records`` by state with a cursor, and the atomic steps behind cancel, retry, reschedule
and delete (``delete_record``, ``modify_record``, ``delete_records``).

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
from dogs_core.domain.records import JobRecord, JobState
from dogs_core.domain.steering import JobChange, check_bulk_state, check_state
from dogs_core.domain.tags import validate_tag_filter
from dogs_core.errors import InvalidOptionError
from dogs_mongo import queries as q
from dogs_mongo.errors import read_without_missing_hint, translate_errors

__all__ = ["MongoSteering"]


Document = dict[str, Any]


class MongoSteering:
    """The operators' methods of the store and the reads behind ``dogs status``/``history``."""

    _records: AsyncCollection[Document]
    _history: AsyncCollection[Document]
    _fenced: AsyncCollection[Document]
    _missing_hints: set[str]

    async def get_record(self, job_id: str) -> JobRecord | None:
        with translate_errors("get_record", write=False):
            document = await self._records.find_one({"_id": job_id})
        return None if document is None else q.record_from_document(document)

    async def find_records(
        self,
        *,
        job_name: str | None = None,
        state: JobState | None = None,
        unique_identifier: str | None = None,
        after: str | None = None,
        limit: int = 100,
        now: datetime | None = None,
        tags: Sequence[str] | None = None,
    ) -> list[JobRecord]:
        """One ``find`` sorted by ``_id``, through the state's index, or the tags' one
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
            tags=validate_tag_filter(tags),
        )
        with translate_errors("find_records", write=False):
            if wanted is JobState.FAILED and job_name is None and unique_identifier is None:
                # The failed index is by name then id: one scan per name, merged in id order
                # by the server (SORT_MERGE), instead of every failed record sorted in memory.
                # The names through the partial index alone (a covered DISTINCT_SCAN).
                status = {"status": q.failed_filter()["status"]}
                names = await self._records.distinct("jobName", status)
                query.filter["jobName"] = {"$in": [str(name) for name in names]}
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

    async def delete_records(
        self, *, job_name: str | None, state: JobState, now: datetime, dry_run: bool = False
    ) -> int:
        """One ``deleteMany`` (or, with ``dry_run``, one count) of the state's filter, through
        its index; a record whose lock is live at ``now`` never matches."""
        wanted = check_bulk_state(state)
        validation.boolean("dry_run", dry_run)
        _check_strings(job_name=job_name)
        filter_, hint = q.delete_jobs_query(job_name=job_name, state=wanted, now=now)
        operation = "delete_records (count)" if dry_run else "delete_records"
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

    async def delete_record(
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
        with translate_errors("delete_record", write=True):
            before = await self._fenced.find_one_and_delete(filter_)
        return None if before is None else q.record_from_document(before)

    async def modify_record(
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
            with translate_errors("modify_record (read)", write=False):
                document = await self._fenced.find_one(filter_)
        else:
            with translate_errors("modify_record", write=True):
                document = await self._fenced.find_one_and_update(
                    filter_, update, return_document=ReturnDocument.AFTER
                )
        return None if document is None else q.record_from_document(document)


def _check_id(job_id: object) -> None:
    if not isinstance(job_id, str):
        raise InvalidOptionError("job_id", job_id, "must be a string")


def _check_strings(**values: object) -> None:
    """Each given value is ``None`` or a string (``InvalidOptionError`` naming it otherwise)."""
    for field, value in values.items():
        if value is not None and not isinstance(value, str):
            raise InvalidOptionError(field, value, "must be a string")
