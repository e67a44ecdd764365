"""The uniqueness role of the MongoDB store: holds of unique keys in their own collection (one
document per key, ``expiresAt`` under a TTL index) and the compare-and-set steps on records that
replace, debounce, take over or publish them. Each method is one single-document operation.

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/uniqueness.py`` from this module. :class:`MongoUniqueness` is a base of the store class.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from dogs_core.domain.records import JobRecord
from dogs_core.domain.uniqueness import HoldState, PendingUpdate, UniqueHold
from dogs_mongo import queries as q
from dogs_mongo.errors import translate_errors
from dogs_mongo.queries import uniqueness as qu

__all__ = ["MongoUniqueness"]

Document = dict[str, Any]


class MongoUniqueness:
    """Unique keys' holds, and the compare-and-set steps of unique scheduling."""

    _fenced: AsyncCollection[Document]
    _primary: AsyncCollection[Document]
    _unique_keys: AsyncCollection[Document]
    #: ``"keys"`` and ``"records"`` with ``w: 1``: see the store's constructor.
    _before_durable: dict[str, AsyncCollection[Document]]

    async def read_unique_hold(self, key: str) -> UniqueHold | None:
        with translate_errors("read_unique_hold", write=False):
            document = await self._unique_keys.find_one({"_id": key})
        return qu.hold_from_document(document)

    async def take_unique_hold(
        self, key: str, job_id: str, *, until: datetime, now: datetime
    ) -> UniqueHold | None:
        """One upsert filtered on the hold being over: it matches (taken over), inserts (no
        hold), or fails on ``_id`` (a live hold, read back and returned)."""
        for _ in range(3):
            try:
                with translate_errors("take_unique_hold", write=True):
                    # w: 1: the record inserted next, under the store's concern, makes it durable
                    await self._before_durable["keys"].update_one(
                        qu.take_hold_filter(key, now),
                        qu.take_hold_update(job_id, until),
                        upsert=True,
                    )
                return None
            except DuplicateKeyError:
                live = await self.read_unique_hold(key)
                if live is not None and live.until > now:
                    return live
                # Expired between the two steps (or removed by the TTL): take it again.
        return await self.read_unique_hold(key)

    async def extend_unique_hold(self, key: str, job_id: str, *, until: datetime) -> None:
        for attempt in (1, 2):
            try:
                with translate_errors("extend_unique_hold", write=True):
                    await self._unique_keys.update_one(
                        {"_id": key}, qu.extend_hold_update(job_id, until), upsert=True
                    )
                return
            except DuplicateKeyError:
                if attempt == 2:  # pragma: no cover - two upserts of one new key at once
                    raise

    async def release_unique_identifier(
        self, job_id: str, identifier: str, *, state: HoldState, now: datetime
    ) -> bool:
        with translate_errors("release_unique_identifier", write=True):
            result = await self._fenced.update_one(
                qu.holding_filter(job_id, identifier, state, now),
                {"$unset": {"uniqueIdentifier": ""}},
            )
        return result.matched_count == 1

    async def update_pending(
        self, job_id: str | None, identifier: str, update: PendingUpdate, *, now: datetime
    ) -> JobRecord | None:
        with translate_errors("update_pending", write=True):
            document = await self._fenced.find_one_and_update(
                qu.holding_filter(job_id, identifier, HoldState.PENDING, now),
                qu.pending_update(update, now),
                return_document=ReturnDocument.AFTER,
            )
        return None if document is None else q.record_from_document(document)

    async def publish_parked(self, job_id: str, *, parked_at: datetime, run_at: datetime) -> bool:
        with translate_errors("publish_parked", write=True):
            result = await self._fenced.update_one(
                qu.parked_filter(job_id, parked_at), qu.publish_update(run_at)
            )
        return result.matched_count == 1

    async def drop_parked(self, job_id: str, *, parked_at: datetime) -> bool:
        with translate_errors("drop_parked", write=True):
            result = await self._fenced.delete_one(qu.parked_filter(job_id, parked_at))
        return result.deleted_count == 1
