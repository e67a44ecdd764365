"""The following role of the MongoDB store (:class:`~dogs_core.ports.AsyncFollowingStore`): the
fenced progress write on a record, the executions' log lines in a collection of our own, and
their two change feeds (:mod:`dogs_mongo.queries.following` builds every command).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/following.py`` from this module. :class:`MongoFollowing` is a base of the store class
and uses its records and history collections.

Costs. ``write_progress`` is one fenced ``updateOne`` (the lock renewal it rides on, with one
more field). ``write_log_lines`` is one unordered ``insertMany`` per call (the runtime sends one
per flush for every execution of the process), ``w: 1``: lines are a diagnostic, and a
failover may lose the last ones; a line already kept (a retried batch) is skipped by its
duplicate ``_id``. A read is one ``find`` merging two index scans in ``_id`` order.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from datetime import datetime
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from dogs_core.domain.log_lines import LogLine, check_log_page, check_owner_id
from dogs_core.domain.progress import Progress
from dogs_core.domain.validation import optional_text
from dogs_core.errors import InvalidOptionError
from dogs_mongo import queries as q
from dogs_mongo._async.feeds import _feed
from dogs_mongo._async.indexes import ensure_indexes
from dogs_mongo.errors import raise_unless_duplicates, translate_errors
from dogs_mongo.queries import following as qf
from dogs_mongo.queries.following import LINES_WRITE_CONCERN

__all__ = ["MongoFollowing"]

Document = dict[str, Any]


class MongoFollowing:
    """Progress on records, log lines of executions, and their feeds."""

    _db: AsyncDatabase[Document]
    _records: AsyncCollection[Document]
    _fenced: AsyncCollection[Document]
    _history: AsyncCollection[Document]
    _logs_name: str | None = None

    def use_logs_collection(self, name: str | None) -> None:
        """Keep the log lines in ``name`` (``None``: beside the history collection,
        ``<x>_logs`` for ``<x>_history``). Call it before the first write."""
        chosen = optional_text("name", name)
        if chosen is not None and chosen in (self._history.name, self._records.name):
            raise InvalidOptionError("name", chosen, "must not be a live collection of Dogs")
        self._logs_name = chosen

    @property
    def logs_collection(self) -> AsyncCollection[Document]:
        """The log lines' collection."""
        name = self._logs_name or qf.logs_collection_name(self._history.name)
        return self._db.get_collection(name, write_concern=LINES_WRITE_CONCERN)

    async def setup_following(self) -> None:
        """The logs collection's indexes (``{jobId, _id}``, ``{executionId, _id}``, the TTL on
        ``expiresAt``)."""
        with translate_errors("following setup", write=True):
            await ensure_indexes(self.logs_collection, qf.LOG_INDEXES)

    async def write_progress(
        self, job_id: str, lock_id: str, progress: Progress, *, locked_until: datetime | None
    ) -> bool:
        """One fenced ``updateOne`` setting ``progress`` (and ``lockedUntil`` when given)."""
        if not isinstance(progress, Progress):
            raise InvalidOptionError("progress", progress, "must be a Progress")
        if progress.execution_id != lock_id:
            raise InvalidOptionError(
                "progress", progress.execution_id, f"is not the progress of lock {lock_id!r}"
            )
        update = qf.write_progress_update(progress, locked_until)
        with translate_errors("write_progress", write=True):
            result = await self._fenced.update_one(q.fenced_filter(job_id, lock_id), update)
        return result.matched_count == 1

    async def write_log_lines(self, lines: Sequence[LogLine]) -> None:
        """One unordered ``insertMany``; lines already kept are skipped (duplicate ``_id``)."""
        documents = []
        for line in lines:
            if not isinstance(line, LogLine):
                raise InvalidOptionError("lines", line, "must be LogLine values")
            documents.append(qf.log_line_document(line))
        if not documents:
            return
        try:
            with translate_errors("write_log_lines", write=True):
                await self.logs_collection.insert_many(documents, ordered=False)
        except BulkWriteError as error:
            raise_unless_duplicates(error)

    async def read_log_lines(
        self, owner_id: str, *, after: str | None = None, limit: int = 1_000
    ) -> list[LogLine]:
        owner = check_owner_id(owner_id)
        size, after = check_log_page(limit, after)
        with translate_errors("read_log_lines", write=False):
            cursor = (
                self.logs_collection.find(qf.log_lines_filter(owner, after))
                .sort("_id", 1)
                .limit(size)
            )
            documents: list[Document] = await cursor.to_list(None)
        return [qf.log_line_from_document(document) for document in documents]

    async def execution_job_id(self, execution_id: str) -> str | None:
        """The record locked by ``execution_id`` (the sparse ``lockId`` index), else its history
        row (``executionId_1``)."""
        wanted = check_owner_id(execution_id, field="execution_id")
        with translate_errors("execution_job_id", write=False):
            record = await self._records.find_one(q.lock_id_filter(wanted), {"_id": 1})
            if record is not None:
                return str(record["_id"])
            row = await self._history.find_one(q.history_filter(wanted), {"jobId": 1})
        return None if row is None else str(row["jobId"])

    def watch_log_lines(self, owner_id: str) -> AsyncGenerator[list[str], None]:
        """The inserts of lines of ``owner_id`` in the logs collection."""
        return _feed(
            "watch_log_lines",
            self.logs_collection,
            lambda: qf.log_lines_changes_pipeline(check_owner_id(owner_id)),
            qf.changed_id,
        )

    def watch_progress(self, job_id: str) -> AsyncGenerator[list[str], None]:
        """Every change of the record ``job_id`` (update, replace, delete)."""
        return _feed(
            "watch_progress",
            self._records,
            lambda: qf.progress_changes_pipeline(check_owner_id(job_id, field="job_id")),
            qf.changed_id,
        )
