"""The leases role of the MongoDB store: named distributed locks with fencing tokens, one
document each in the additive controls collection (:mod:`dogs_mongo.queries.controls`).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/leases.py`` from this module. :class:`MongoLeases` is a base of the store class; it uses
the store's ``_controls`` collection (on the primary, with the store's write concern). Each
decision is one atomic write on one document, so no read-then-write race exists.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from dogs_core.domain import validation
from dogs_core.domain.controls import Lease, check_lease
from dogs_mongo import queries as q
from dogs_mongo.errors import translate_errors

__all__ = ["MongoLeases"]

Document = dict[str, Any]


class MongoLeases:
    """Named distributed locks (``acquire_lease`` ... ``get_lease``)."""

    _controls: AsyncCollection[Document]

    async def acquire_lease(
        self, name: str, *, owner: str, until: datetime, now: datetime
    ) -> int | None:
        """One ``findOneAndUpdate`` upsert of the lease while nobody holds it; a duplicate key
        (its insert, refused because the lease exists and is held) means held."""
        validation.text("name", name)
        validation.text("owner", owner)
        try:
            with translate_errors("acquire_lease", write=True):
                document = await self._controls.find_one_and_update(
                    q.acquire_lease_filter(name, now),
                    q.acquire_lease_update(owner, until),
                    projection=dict(q.LEASE_TOKEN_PROJECTION),
                    upsert=True,
                    return_document=ReturnDocument.AFTER,
                )
        except DuplicateKeyError:
            return None
        return None if document is None else q.lease_token(document)

    async def renew_lease(
        self, name: str, *, owner: str, token: int, until: datetime, now: datetime
    ) -> bool:
        check_lease(name, owner, token)
        with translate_errors("renew_lease", write=True):
            result = await self._controls.update_one(
                q.renew_lease_filter(name, owner, token, now), q.renew_lease_update(until)
            )
        return result.matched_count == 1

    async def release_lease(self, name: str, *, owner: str, token: int) -> bool:
        check_lease(name, owner, token)
        with translate_errors("release_lease", write=True):
            result = await self._controls.update_one(
                q.held_lease_filter(name, owner, token), q.release_lease_update()
            )
        return result.matched_count == 1

    async def get_lease(self, name: str) -> Lease | None:
        validation.text("name", name)
        with translate_errors("get_lease", write=False):
            document = await self._controls.find_one({"_id": q.lease_id(name)})
        return q.lease_from_document(name, document)
