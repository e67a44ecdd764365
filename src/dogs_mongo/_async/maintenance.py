"""The maintenance role of the MongoDB store: setup (the indexes), the capabilities of the
server (which claim path), its clock, and the upkeep (partition repair, retention backfill,
releasing every lock).

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/maintenance.py`` from this module. :class:`MongoMaintenance` is a base of the store
class.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio
from pymongo import AsyncMongoClient, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError

from dogs_core.domain import validation
from dogs_core.domain.partitions import check_chosen_partition
from dogs_core.ports import StoreCapabilities
from dogs_mongo import queries as q
from dogs_mongo._async.indexes import ensure_indexes, list_indexes
from dogs_mongo.errors import translate_errors
from dogs_mongo.queries import uniqueness as qu
from dogs_mongo.queries.claims import (
    CLAIM_PATH_SORTED_UPDATE_ONE,
    SORTED_UPDATE_MIN_WIRE_VERSION,
    choose_claim_path,
)

__all__ = ["MongoMaintenance"]

log = logging.getLogger("dogs.mongo.store")

Document = dict[str, Any]


class MongoMaintenance:
    """Setup, capabilities, the server's clock and upkeep."""

    _client: AsyncMongoClient[Any]
    _owns_client: bool
    _db: AsyncDatabase[Document]
    _records: AsyncCollection[Document]
    _history: AsyncCollection[Document]
    _controls: AsyncCollection[Document]
    _unique_keys: AsyncCollection[Document]
    _primary: AsyncCollection[Document]
    _claim_path_option: str
    _setup_lock: anyio.Lock
    _capabilities_lock: anyio.Lock
    _setup_done: bool
    _capabilities: StoreCapabilities | None

    if TYPE_CHECKING:

        def _note_claim_indexes(self, ready: Iterable[str]) -> None: ...

    async def setup(self) -> None:
        """Create the indexes of the three collections (index failures are logged, not raised).
        An index that exists with other options is dropped and recreated. Done once per store;
        retried on a later call only when a transient error prevented it. An unreachable
        server raises :class:`~dogs_core.errors.StoreUnavailableError` at the first
        collection, so that the caller's retry policy bounds the wait."""
        async with self._setup_lock:
            if self._setup_done:
                return
            records_ok = await ensure_indexes(self._records, q.RECORD_INDEXES)
            history_ok = await ensure_indexes(self._history, q.HISTORY_INDEXES)
            controls_ok = await ensure_indexes(self._controls, q.CONTROL_INDEXES)
            keys_ok = await ensure_indexes(self._unique_keys, qu.UNIQUE_KEY_INDEXES)
            self._setup_done = records_ok and history_ok and controls_ok and keys_ok

    async def server_time(self) -> datetime | None:
        """The server's clock: ``localTime`` of ``hello`` (milliseconds), or ``None`` when the
        reply has none (a server that does not report it)."""
        with translate_errors("server time", write=False):
            hello = await self._db.command("hello")
        local_time = hello.get("localTime")
        if not isinstance(local_time, datetime):
            return None
        if local_time.tzinfo is None:
            return local_time.replace(tzinfo=UTC)
        return local_time.astimezone(UTC)

    async def capabilities(self) -> StoreCapabilities:
        """Once per store, after :meth:`setup`: which claim path this server supports."""
        if self._capabilities is not None:  # the hot path: every claim asks
            return self._capabilities
        async with self._capabilities_lock:
            if self._capabilities is not None:
                return self._capabilities
            await self.setup()
            with translate_errors("capability detection", write=False):
                hello = await self._db.command("hello")
                build_info = await self._db.command("buildInfo")
                indexes = (await list_indexes(self._records)).ready
            self._note_claim_indexes(indexes)  # claims never hint an index that is not there
            wire_version = int(hello.get("maxWireVersion", 0))
            has_lock_index = q.LOCK_ID_INDEX_NAME in indexes
            version = build_info.get("version")
            path = choose_claim_path(wire_version, has_lock_index, self._claim_path_option)
            if self._claim_path_option != q.CLAIM_PATH_AUTO:
                log.info("dogs: claim path forced to %s (MongoDB %s)", path, version)
            elif path == CLAIM_PATH_SORTED_UPDATE_ONE:
                log.info("dogs: claims use the sorted updateOne (MongoDB %s)", version)
            elif wire_version >= SORTED_UPDATE_MIN_WIRE_VERSION:
                log.warning(
                    "dogs: index %s is missing on %s: claims fall back to findOneAndUpdate",
                    q.LOCK_ID_INDEX_NAME,
                    self._records.name,
                )
            else:
                log.info(
                    "dogs: claims use findOneAndUpdate (MongoDB %s, wire version %d < %d)",
                    version,
                    wire_version,
                    SORTED_UPDATE_MIN_WIRE_VERSION,
                )
            self._capabilities = StoreCapabilities(
                claim_path=path,
                supports_probe=True,
                server_version=str(version) if version is not None else None,
            )
            return self._capabilities

    async def reconcile_partitions(
        self,
        *,
        job_names: Sequence[str],
        n_partitions: int,
        now: datetime,
        limit: int,
        choose_partition: Callable[[], int],
    ) -> int:
        validation.positive_int("n_partitions", n_partitions)
        if limit <= 0 or not job_names:
            return 0
        select = q.reconcile_select_filter(job_names=job_names, n_partitions=n_partitions, now=now)
        with translate_errors("reconcile_partitions (scan)", write=False):
            cursor = self._primary.find(select, dict(q.RECONCILE_PROJECTION)).limit(limit)
            found = await cursor.to_list(None)
        if not found:
            return 0
        updates: list[UpdateOne] = []
        for document in found:
            partition = check_chosen_partition(choose_partition(), n_partitions)
            updates.append(
                UpdateOne(
                    q.reconcile_cas_filter(document["_id"], n_partitions=n_partitions, now=now),
                    q.reconcile_update(partition),
                )
            )
        try:
            with translate_errors("reconcile_partitions", write=True):
                result = await self._records.bulk_write(updates, ordered=False)
        except BulkWriteError as error:
            modified = int(error.details.get("nModified", 0))
            log.warning(
                "dogs: partition reconciler: %d of %d updates failed (%s)",
                len(error.details.get("writeErrors", [])),
                len(updates),
                error,
            )
            return modified
        return int(result.modified_count)

    async def backfill_retention(self, *, retention: timedelta | None, now: datetime) -> int:
        update = q.backfill_retention_update(retention=retention, now=now)
        with translate_errors("backfill_retention", write=True):
            result = await self._records.update_many(q.backfill_retention_filter(), update)
        return int(result.modified_count)

    async def release_all_locks(self) -> int:
        with translate_errors("release_all_locks", write=True):
            result = await self._records.update_many(q.unlock_all_filter(), q.unlock_all_update())
        return int(result.modified_count)

    async def close(self) -> None:
        """Close the client when this store created it (:meth:`from_uri`)."""
        if self._owns_client:
            await self._client.close()
