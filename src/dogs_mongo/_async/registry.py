"""The registry role of the MongoDB store (:class:`~dogs_core.ports.AsyncRegistryStore`): one
document per ``Workers`` instance in ``orionjs.jobs_dogs_workers`` (additive, Node Dogs never
reads it), a TTL on ``expiresAt`` (:mod:`dogs_mongo.queries.registry` builds every command).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/registry.py`` from this module. :class:`MongoRegistry` is a base of the store class.

A beat is one ``findOneAndUpdate`` (an upsert by instance id, ``w: 1``: a beat lost in a
failover is repaired by the next one) that returns the stored command; a command is one
``findOneAndUpdate`` under the store's write concern.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.write_concern import WriteConcern

from dogs_core.domain.records import to_millis
from dogs_core.domain.registry import WorkerCommand, WorkerInfo, check_instance_id
from dogs_core.domain.validation import text
from dogs_core.errors import InvalidOptionError
from dogs_mongo._async.indexes import ensure_indexes
from dogs_mongo.errors import translate_errors
from dogs_mongo.queries import registry as qr

__all__ = ["MongoRegistry"]

Document = dict[str, Any]

_BEATS = WriteConcern(w=1)


class MongoRegistry:
    """The workers' registry half of the store."""

    _db: AsyncDatabase[Document]
    _fenced: AsyncCollection[Document]
    _workers_name: str = qr.DEFAULT_WORKERS_COLLECTION

    def use_registry_collection(self, name: str) -> None:
        """Keep the registry in collection ``name`` (before the first registry call)."""
        self._workers_name = text("name", name)

    @property
    def registry_collection(self) -> AsyncCollection[Document]:
        """The registry's collection (the store's write concern)."""
        return self._db.get_collection(self._workers_name, write_concern=self._fenced.write_concern)

    async def setup_registry(self) -> None:
        with translate_errors("registry setup", write=True):
            await ensure_indexes(self.registry_collection, qr.REGISTRY_INDEXES)

    async def beat_worker(self, info: WorkerInfo) -> WorkerCommand | None:
        if not isinstance(info, WorkerInfo):
            raise InvalidOptionError("info", info, "must be a WorkerInfo")
        beats = self.registry_collection.with_options(write_concern=_BEATS)
        with translate_errors("beat_worker", write=True):
            document = await beats.find_one_and_update(
                {"_id": check_instance_id(info.instance_id)},
                qr.worker_beat_update(info),
                upsert=True,
                projection={"command": 1},
                return_document=ReturnDocument.AFTER,
            )
        return None if document is None else qr.command_from_document(document.get("command"))

    async def list_workers(self) -> list[WorkerInfo]:
        with translate_errors("list_workers", write=False):
            cursor = self.registry_collection.find({}).sort([("startedAt", -1)])
            documents: list[Document] = await cursor.to_list(None)
        return [qr.worker_from_document(document) for document in documents]

    async def get_worker(self, instance_id: str) -> WorkerInfo | None:
        with translate_errors("get_worker", write=False):
            document = await self.registry_collection.find_one(
                {"_id": check_instance_id(instance_id)}
            )
        return None if document is None else qr.worker_from_document(document)

    async def command_worker(
        self, instance_id: str, command: WorkerCommand, *, now: datetime
    ) -> WorkerInfo | None:
        if not isinstance(command, WorkerCommand):
            raise InvalidOptionError("command", command, "must be a WorkerCommand")
        with translate_errors("command_worker", write=True):
            document = await self.registry_collection.find_one_and_update(
                qr.commandable_filter(check_instance_id(instance_id), to_millis(now)),
                {"$set": {"command": qr.command_document(command)}},
                return_document=ReturnDocument.AFTER,
            )
        return None if document is None else qr.worker_from_document(document)
