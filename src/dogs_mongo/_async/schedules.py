"""The schedules role of the MongoDB store: runtime schedules as recurrent records of the records
collection (``jobName`` = the schedule's id, an additive ``schedule`` field), read through Dogs'
partial unique index on ``jobName`` and the additive ``jobs_dogs_records_schedules`` index.

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/schedules.py`` from this module. :class:`MongoSchedules` is a base of the store class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from dogs_core.domain import validation
from dogs_core.domain.records import JobRecord, NewJob
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_mongo import queries as q
from dogs_mongo.errors import translate_errors
from dogs_mongo.queries import schedules as qs

__all__ = ["MongoSchedules"]

Document = dict[str, Any]


class MongoSchedules:
    """Runtime schedules' recurrent records."""

    _records: AsyncCollection[Document]
    _fenced: AsyncCollection[Document]
    _primary: AsyncCollection[Document]

    async def get_schedule_record(self, schedule_id: str) -> JobRecord | None:
        with translate_errors("get_schedule_record", write=False):
            document = await self._primary.find_one(q.ensure_recurrent_filter(schedule_id))
        return None if document is None else q.record_from_document(document)

    async def find_schedule_records(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[JobRecord]:
        size = validation.integer("limit", limit, minimum=1)
        with translate_errors("find_schedule_records", write=False):
            cursor = self._records.find(qs.recurrent_after_filter(after)).sort("jobName", 1)
            documents = await cursor.limit(size).to_list(None)
        return [q.record_from_document(document) for document in documents]

    async def insert_schedule(self, job: NewJob) -> bool:
        try:
            with translate_errors("insert_schedule", write=True):
                await self._fenced.insert_one(q.document_from_new_job(job))
        except DuplicateKeyError as error:
            pattern = (error.details or {}).get("keyPattern") or {}
            return "_id" in pattern  # a retry of an insert that had landed; else the name
        return True

    async def update_schedule(
        self,
        record_id: str,
        *,
        expected: datetime | None,
        spec: ScheduleSpec,
        params: Mapping[str, Any] | None,
        priority: int,
        next_run_at: datetime | None,
    ) -> JobRecord | None:
        with translate_errors("update_schedule", write=True):
            document = await self._fenced.find_one_and_update(
                qs.update_schedule_filter(record_id, expected),
                qs.update_schedule_update(spec, params, priority, next_run_at),
                return_document=ReturnDocument.AFTER,
            )
        return None if document is None else q.record_from_document(document)

    async def delete_schedule(self, schedule_id: str) -> JobRecord | None:
        with translate_errors("delete_schedule", write=True):
            document = await self._fenced.find_one_and_delete(
                qs.runtime_schedule_filter(schedule_id)
            )
        return None if document is None else q.record_from_document(document)

    async def due_schedules(
        self, job_names: Sequence[str], *, until: datetime, limit: int
    ) -> list[tuple[str, datetime]]:
        size = validation.integer("limit", limit, minimum=1)
        if not job_names:
            return []
        with translate_errors("due_schedules", write=False):
            cursor = self._primary.find(
                qs.due_schedules_filter(job_names, until), {"jobName": 1, "nextRunAt": 1}
            )
            documents = await cursor.sort("nextRunAt", 1).limit(size).to_list(None)
        return [(str(doc["jobName"]), doc["nextRunAt"]) for doc in documents]
