"""The audit role of the MongoDB store (:class:`~dogs_core.ports.AsyncAuditStore`): one
document per operator action in ``orionjs.jobs_dogs_audit`` (additive, Node Dogs never reads
it), a TTL on ``expiresAt`` (:mod:`dogs_mongo.queries.audit` builds every command).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/audit.py`` from this module. :class:`MongoAudit` is a base of the store class.

Reads: newest first by ``_id`` (UUIDv7), through ``_id`` or the index of the filter (one job's
entries: ``{jobIds, _id}``; one action's or actor's: ``{action, _id}``, ``{actor.name, _id}``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from dogs_core.domain.audit import AuditEntry, AuditOutcome, AuditQuery
from dogs_core.domain.records import to_millis
from dogs_core.domain.validation import text
from dogs_core.errors import InvalidOptionError
from dogs_mongo._async.indexes import ensure_indexes
from dogs_mongo.errors import translate_errors
from dogs_mongo.queries import audit as qa

__all__ = ["MongoAudit"]

Document = dict[str, Any]


class MongoAudit:
    """The audit half of the store."""

    _db: AsyncDatabase[Document]
    _fenced: AsyncCollection[Document]
    _audit_name: str = qa.DEFAULT_AUDIT_COLLECTION

    def use_audit_collection(self, name: str) -> None:
        """Keep the audit in collection ``name`` (before the first audit call)."""
        self._audit_name = text("name", name)

    @property
    def audit_collection(self) -> AsyncCollection[Document]:
        """The audit's collection (the store's write concern)."""
        return self._db.get_collection(self._audit_name, write_concern=self._fenced.write_concern)

    async def setup_audit(self) -> None:
        with translate_errors("audit setup", write=True):
            await ensure_indexes(self.audit_collection, qa.AUDIT_INDEXES)

    async def record_audit(self, entry: AuditEntry) -> None:
        document = qa.audit_document(_entry(entry))
        with translate_errors("record_audit", write=True):
            try:
                await self.audit_collection.insert_one(document)
            except DuplicateKeyError:
                return  # a retried insert that had landed: the first one stays

    async def update_audit(self, entry: AuditEntry, *, runner: str | None) -> bool:
        document = qa.audit_document(_entry(entry))
        with translate_errors("update_audit", write=True):
            result = await self.audit_collection.replace_one(
                {"_id": entry.id, "bulk.runner": runner}, document
            )
        return bool(result.matched_count)

    async def take_over_audit(
        self, entry_id: str, *, runner: str, stalled_before: datetime, now: datetime
    ) -> AuditEntry | None:
        text("runner", runner)
        with translate_errors("take_over_audit", write=True):
            document = await self.audit_collection.find_one_and_update(
                qa.take_over_filter(text("entry_id", entry_id), stalled_before),
                {
                    "$set": {
                        "bulk.runner": runner,
                        "updatedAt": to_millis(now),
                        "outcome": AuditOutcome.RUNNING.value,
                    },
                    "$unset": {"error": ""},
                },
                return_document=ReturnDocument.AFTER,
            )
        return None if document is None else qa.entry_from_document(document)

    async def get_audit(self, entry_id: str) -> AuditEntry | None:
        with translate_errors("get_audit", write=False):
            document = await self.audit_collection.find_one({"_id": text("entry_id", entry_id)})
        return None if document is None else qa.entry_from_document(document)

    async def read_audit(self, query: AuditQuery) -> list[AuditEntry]:
        if not isinstance(query, AuditQuery):
            raise InvalidOptionError("query", query, "must be an AuditQuery")
        with translate_errors("read_audit", write=False):
            cursor = (
                self.audit_collection.find(qa.audit_filter(query))
                .sort([("_id", -1)])
                .limit(query.limit)
            )
            documents: list[Document] = await cursor.to_list(None)
        return [qa.entry_from_document(document) for document in documents]


def _entry(entry: object) -> AuditEntry:
    if not isinstance(entry, AuditEntry):
        raise InvalidOptionError("entry", entry, "must be an AuditEntry")
    return entry
