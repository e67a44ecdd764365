"""The controls role of the MongoDB store: fleet-wide pauses, concurrency slots and rate
tokens, all in the additive controls collection (its documents:
:mod:`dogs_mongo.queries.controls`).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/controls.py`` from this module. :class:`MongoControls` is a base of the store class; it
uses the store's ``_controls`` collection (on the primary, with the store's write concern, as
claims: a slot acknowledged by a primary that loses it in a failover could be handed out twice).

Each decision is one atomic write on one document (a conditional update, an upsert whose insert
is refused by the unique ``_id`` when the condition fails), so no read-then-write race exists.
Transient failures are raised as :class:`~dogs_core.errors.TransientStoreError`
(:func:`~dogs_mongo.errors.translate_errors`).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from pymongo import ReturnDocument, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError, DuplicateKeyError

from dogs_core.domain import validation
from dogs_core.domain.controls import (
    check_limit_key,
    check_slot,
)
from dogs_core.errors import InvalidOptionError
from dogs_mongo import queries as q
from dogs_mongo._async.feeds import _resolve
from dogs_mongo.errors import translate_errors

__all__ = ["MongoControls"]

log = logging.getLogger("dogs.mongo.store")

Document = dict[str, Any]

_DUPLICATE_KEY = 11000


class MongoControls:
    """The fleet controls of the store (``set_paused`` ... ``take_rate_token``)."""

    _controls: AsyncCollection[Document]

    # ------------------------------------------------------------------------------------------
    # Pauses
    # ------------------------------------------------------------------------------------------

    async def set_paused(self, job_name: str, paused: bool, *, now: datetime) -> bool:
        """Pausing inserts the pause document (a duplicate key: it was paused already);
        resuming deletes it."""
        validation.text("job_name", job_name)
        validation.boolean("paused", paused)
        if not paused:
            with translate_errors("set_paused", write=True):
                result = await self._controls.delete_one({"_id": q.pause_id(job_name)})
            return result.deleted_count == 1
        try:
            with translate_errors("set_paused", write=True):
                await self._controls.insert_one(q.pause_document(job_name, now))
        except DuplicateKeyError:
            return False
        return True

    async def paused_names(self) -> frozenset[str]:
        with translate_errors("paused_names", write=False):
            cursor = self._controls.find(
                dict(q.PAUSED_NAMES_FILTER), dict(q.PAUSED_NAMES_PROJECTION)
            )
            documents: list[Document] = await cursor.to_list(None)
        return q.paused_names_from_documents(documents)

    # ------------------------------------------------------------------------------------------
    # Concurrency slots
    # ------------------------------------------------------------------------------------------

    async def acquire_slot(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        holder: str,
        until: datetime,
        now: datetime,
    ) -> int | None:
        """One ``findOneAndUpdate`` over the holder's window of slots
        (:func:`~dogs_mongo.queries.controls.slot_window`), then, when it matched nothing, one
        over the ids of all the slots ``0 .. limit-1``; when that matches nothing either, the
        missing slots are created free (one unordered bulk of upserts) and it is tried once
        more."""
        check_limit_key(job_name, key)
        validation.positive_int("limit", limit)
        validation.text("holder", holder)
        window = q.slot_window(limit, holder)
        index = await self._take_slot(job_name, key, limit, holder, until, now, window)
        if index is None and len(window) < limit:
            index = await self._take_slot(job_name, key, limit, holder, until, now)
        if index is not None:
            return index
        await self._create_slots(job_name, key, limit, now)
        return await self._take_slot(job_name, key, limit, holder, until, now)

    async def _take_slot(
        self,
        job_name: str,
        key: str,
        limit: int,
        holder: str,
        until: datetime,
        now: datetime,
        indices: list[int] | None = None,
    ) -> int | None:
        filter_ = q.acquire_slot_filter(
            job_name, key, limit=limit, holder=holder, now=now, indices=indices
        )
        with translate_errors("acquire_slot", write=True):
            document = await self._controls.find_one_and_update(
                filter_,
                q.acquire_slot_update(holder, until),
                projection=dict(q.SLOT_INDEX_PROJECTION),
                sort=list(q.ACQUIRE_SLOT_SORT),
                return_document=ReturnDocument.AFTER,
            )
        return None if document is None else q.slot_index(document)

    async def _create_slots(self, job_name: str, key: str, limit: int, now: datetime) -> None:
        requests = [
            UpdateOne(filter_, update, upsert=True)
            for filter_, update in q.create_slot_upserts(job_name, key, limit=limit, now=now)
        ]
        try:
            with translate_errors("acquire_slot (creating the slots)", write=True):
                await self._controls.bulk_write(requests, ordered=False)
        except BulkWriteError as error:
            # Another caller created some of them at the same moment: they exist, as wanted.
            failures = error.details.get("writeErrors", [])
            if any(failure.get("code") != _DUPLICATE_KEY for failure in failures):
                raise
            if error.details.get("writeConcernErrors"):
                log.debug("dogs: acquire_slot: write concern error creating slots: %s", error)

    async def renew_slot(
        self, job_name: str, key: str, index: int, *, holder: str, until: datetime
    ) -> bool:
        check_slot(job_name, key, index, holder)
        with translate_errors("renew_slot", write=True):
            result = await self._controls.update_one(
                q.held_slot_filter(job_name, key, index, holder), q.renew_slot_update(until)
            )
        return result.matched_count == 1

    async def release_slot(self, job_name: str, key: str, index: int, *, holder: str) -> bool:
        check_slot(job_name, key, index, holder)
        with translate_errors("release_slot", write=True):
            result = await self._controls.update_one(
                q.held_slot_filter(job_name, key, index, holder), q.release_slot_update()
            )
        return result.matched_count == 1

    async def held_slots(self, *, now: datetime) -> dict[str, int]:
        with translate_errors("held_slots", write=False):
            cursor = await _resolve(self._controls.aggregate(q.held_slots_pipeline(now)))
            rows: list[Document] = await cursor.to_list(None)
        return q.held_slots_from_rows(rows)

    # ------------------------------------------------------------------------------------------
    # Rate tokens
    # ------------------------------------------------------------------------------------------

    async def take_rate_token(
        self,
        job_name: str,
        key: str,
        *,
        limit: int,
        window_start: datetime,
        window_end: datetime,
    ) -> bool:
        """One ``updateOne`` upsert of the window's counter while it is below ``limit``. Its
        insert is refused with a duplicate key when the counter exists and is full, and also
        when another caller created it at the same moment: then the counter exists, and the
        same conditional ``$inc`` without the upsert decides."""
        check_limit_key(job_name, key)
        validation.positive_int("limit", limit)
        if window_end <= window_start:
            raise InvalidOptionError("window_end", window_end, "must be after window_start")
        filter_ = q.take_rate_token_filter(job_name, key, limit=limit, window_start=window_start)
        update = q.take_rate_token_update(job_name, key, window_end=window_end)
        try:
            with translate_errors("take_rate_token", write=True):
                await self._controls.update_one(filter_, update, upsert=True)
        except DuplicateKeyError:
            with translate_errors("take_rate_token", write=True):
                result = await self._controls.update_one(filter_, update)
            return result.matched_count == 1
        return True
