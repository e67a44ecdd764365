"""The claims role of the MongoDB store: single claims on either claim path, ``claim_many``'s
two round trips (three when another writer took some of its candidates), the fenced lock
extension, the claim query's probe, and the claim hints' fallback when their index is missing.

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/claims.py`` from this module. :class:`MongoClaims` is a base of the store class; it
uses the store's collections (``_fenced`` for the claim writes, ``_primary`` for reads of its
own writes) and its :meth:`capabilities`.

A claim never carries a hint whose index does not exist (the server refuses such a query):
capability detection tells :meth:`MongoClaims._note_claim_indexes` which claim indexes are
ready, and a claim the server refuses for its hint (the index was dropped since) marks it
missing and is sent again. A missing index's claims carry the other claim index's hint, or none
when both are missing, with one WARNING per index; while one is missing the indexes are listed
again every :data:`CLAIM_INDEX_RECHECK_SECONDS`, and a claim index that is back is used again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pymongo import ReadPreference, ReturnDocument, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, OperationFailure, PyMongoError

from dogs_core.domain.batches import check_claim_requests
from dogs_core.domain.records import ClaimedJob, ClaimRequest
from dogs_core.errors import StoreError, TransientStoreError
from dogs_core.ports import StoreCapabilities
from dogs_mongo import queries as q
from dogs_mongo._async.indexes import list_indexes
from dogs_mongo.errors import claim_many_write_error, is_missing_hint, translate_errors
from dogs_mongo.queries.claims import (
    CLAIM_INDEX_RECHECK_SECONDS,
    CLAIM_MANY_ROUNDS,
    CLAIM_PATH_SORTED_UPDATE_ONE,
    HINT_INDEX_NAMES,
    available_hint,
    missing_hints,
)

__all__ = [
    "MongoClaims",
]

log = logging.getLogger("dogs.mongo.store")


Document = dict[str, Any]
_T = TypeVar("_T")


class MongoClaims:
    """Taking due records (``claim``, ``claim_many``), keeping their locks (``extend_lock``)
    and timing the claim query (``probe``)."""

    _db: AsyncDatabase[Document]
    _records: AsyncCollection[Document]
    _fenced: AsyncCollection[Document]
    _primary: AsyncCollection[Document]
    #: The hints (``byJobName``, ``globalPriority``) whose index is missing, and when
    #: (``time.monotonic()``) the indexes were last listed; the store sets both.
    _missing_claim_hints: set[str]
    _claim_indexes_listed_at: float

    if TYPE_CHECKING:

        async def capabilities(self) -> StoreCapabilities: ...

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        if not request.job_names:
            return None
        capabilities = await self.capabilities()
        if capabilities.claim_path == CLAIM_PATH_SORTED_UPDATE_ONE:
            return await self._claim_sorted_update_one(request)
        return await self._claim_find_one_and_update(request)

    async def _claim_sorted_update_one(self, request: ClaimRequest) -> ClaimedJob | None:
        command = q.sorted_update_one_claim(request)

        async def send(hint: dict[str, int] | None) -> Any:
            return await self._fenced.update_one(
                command.filter, command.update, sort=command.sort, hint=hint
            )

        with translate_errors("claim", write=True):
            result = await self._with_claim_hint(request.hint, send)
        if result.matched_count == 0:
            return None
        with translate_errors("claim read-back", write=False):
            document = await self._primary.find_one(q.lock_id_filter(request.lock_id))
        if document is None:
            log.warning(
                "dogs: claim %s matched a record but the read-back by lockId found nothing; "
                "dropping it (the record is recovered as stale when its lock expires)",
                request.lock_id,
            )
            return None
        return q.claim_from_read_back(request, document)

    async def _claim_find_one_and_update(self, request: ClaimRequest) -> ClaimedJob | None:
        command = q.find_one_and_update_claim(request)

        async def send(hint: dict[str, int] | None) -> Document | None:
            before: Document | None = await self._fenced.find_one_and_update(
                command.filter,
                command.update,
                sort=list(command.sort.items()),
                hint=hint,
                return_document=ReturnDocument.BEFORE,
            )
            return before

        with translate_errors("claim", write=True):
            before = await self._with_claim_hint(request.hint, send)
        if before is None:
            return None
        return q.claim_from_before_image(request, before)

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        """Up to ``len(requests)`` claims in two round trips, whatever the claim path (pipeline
        updates: MongoDB 4.2+): a ``find`` of the best eligible records (claim sort, the
        request's hint, limited to the number of requests; a miss ends here), and one unordered
        ``bulkWrite`` of one ``updateOne`` per candidate, locked for the request of the same
        rank while it is still as the find read it (:func:`~dogs_mongo.queries.unchanged_filter`:
        a candidate another writer took or changed in between is not matched). When every
        candidate was locked, each claimed job is built from the document the find read
        (its before-image: :func:`~dogs_mongo.queries.claim_from_before_image`); when only some
        were, one read-back by their lock ids tells which (a third round trip). When other
        claimers took every candidate between the find and the write, it looks again (up to
        four finds), so that an empty result means an empty partition, not lost races. A
        modified record the read-back misses is logged and dropped (it is recovered as stale
        when its lock expires). When the ``bulkWrite`` fails in a way that may have
        applied, the read-back is tried once anyway: the records it finds are locked under this
        call's lock ids and are returned rather than left to wait out their lock; when it fails
        too, the write's ``TransientStoreError`` is raised. Requests that disagree on anything
        but their lock id, or repeat a lock id, raise ``InvalidOptionError`` before anything is
        sent."""
        checked = check_claim_requests(requests)
        if not checked or not checked[0].job_names:
            return []
        query = q.claim_candidates_query(checked[0], len(checked))
        for _ in range(CLAIM_MANY_ROUNDS):
            candidates = await self._claim_many_candidates(query, checked[0].hint)
            if not candidates:
                return []
            used = checked[: len(candidates)]
            modified, salvaged = await self._claim_many_write(candidates, used)
            if salvaged is not None:
                return salvaged
            if modified == len(candidates):
                return [
                    q.claim_from_before_image(request, candidate)
                    for candidate, request in zip(candidates, used, strict=True)
                ]
            if modified > 0:
                return await self._claim_many_result(used, modified)
            # Every candidate was taken by another claimer between the find and the write:
            # that is no miss (a miss would put the workers to sleep), so look again.
        return []

    async def _claim_many_candidates(self, query: q.CandidateQuery, hint: str) -> list[Document]:
        """The best eligible records, whole (the first round trip of ``claim_many``)."""

        async def send(index: dict[str, int] | None) -> list[Document]:
            cursor = self._primary.find(query.filter).sort(query.sort)
            if index is not None:
                cursor = cursor.hint(index)
            found: list[Document] = await cursor.limit(query.limit).to_list(None)
            return found

        with translate_errors("claim_many (candidates)", write=False):
            return await self._with_claim_hint(hint, send)

    async def extend_lock(self, job_id: str, lock_id: str, locked_until: datetime) -> bool:
        with translate_errors("extend_lock", write=True):
            result = await self._fenced.update_one(
                q.fenced_filter(job_id, lock_id), q.extend_lock_update(locked_until)
            )
        return result.matched_count == 1

    async def probe(
        self, *, hint: str, job_names: Sequence[str], partition: int, now: datetime
    ) -> float:
        """``explain`` (executionStats, ``maxTimeMS`` 1000, on the primary) of the claim query
        with ``hint``; returns ``executionTimeMillis``. A timeout raises
        ``TransientStoreError``; a result without a finite time raises ``StoreError``."""
        command = q.probe_explain_command(
            self._records.name, hint=hint, job_names=job_names, partition=partition, now=now
        )
        with translate_errors("probe", write=False):
            result = await self._db.command(
                command,
                read_preference=ReadPreference.PRIMARY,
                codec_options=self._db.codec_options,
            )
        try:
            return q.probe_execution_millis(result)
        except ValueError as error:
            raise StoreError(f"probe with hint {hint!r}: {error}") from error

    # -- the claim hints' fallback ------------------------------------------------------------

    def _note_claim_indexes(self, ready: Iterable[str]) -> None:
        """Capability detection (and each re-check): the claim indexes among the ``ready``
        index names decide the hints claims carry; one WARNING per index found missing, one
        INFO per index back."""
        missing = missing_hints(set(ready))
        for hint in sorted(missing - self._missing_claim_hints):
            instead = available_hint(hint, missing)
            log.warning(
                "dogs: the claim index %s of %s is missing (run the store's setup): claims "
                "asking for %s use %s until it is back",
                HINT_INDEX_NAMES[hint],
                self._primary.name,
                hint,
                "no hint" if instead is None else f"the hint {instead}",
            )
        for hint in sorted(self._missing_claim_hints - missing):
            log.info(
                "dogs: the claim index %s of %s is ready: claims use the hint %s again",
                HINT_INDEX_NAMES[hint],
                self._primary.name,
                hint,
            )
        self._missing_claim_hints = missing
        self._claim_indexes_listed_at = time.monotonic()

    async def _recheck_claim_indexes(self) -> None:
        """While a claim index is missing: list the indexes again, at most every
        :data:`CLAIM_INDEX_RECHECK_SECONDS` (a failure waits for the next time)."""
        if not self._missing_claim_hints:
            return
        if time.monotonic() - self._claim_indexes_listed_at < CLAIM_INDEX_RECHECK_SECONDS:
            return
        self._claim_indexes_listed_at = time.monotonic()
        try:
            listing = await list_indexes(self._primary)
        except PyMongoError as error:
            log.debug("dogs: re-listing the claim indexes failed: %s", error)
            return
        self._note_claim_indexes(listing.ready)

    async def _with_claim_hint(
        self, hint: str, send: Callable[[dict[str, int] | None], Awaitable[_T]]
    ) -> _T:
        """``send(index)`` with the index the claim asking for ``hint`` may carry; when the
        server says that index does not exist, it is marked missing and sent again without it
        (the other claim index, then none)."""
        await self._recheck_claim_indexes()
        while True:
            chosen = available_hint(hint, self._missing_claim_hints)
            try:
                return await send(None if chosen is None else q.hint_spec(chosen))
            except OperationFailure as error:
                if chosen is None or not is_missing_hint(error):
                    raise
                self._note_claim_indexes(
                    {
                        index
                        for name, index in HINT_INDEX_NAMES.items()
                        if name != chosen and name not in self._missing_claim_hints
                    }
                )

    async def _claim_many_write(
        self, candidates: Sequence[Document], used: Sequence[ClaimRequest]
    ) -> tuple[int, list[ClaimedJob] | None]:
        """Lock the candidates, the i-th for ``used[i]``: ``(modified, None)``, or
        ``(0, claimed)`` when the write failed after it may have applied and a read-back found
        what it claimed (when the read-back fails too, the write's error is raised)."""
        updates = [
            UpdateOne(filter_, update, hint=dict(q.CLAIM_MANY_UPDATE_HINT))
            for filter_, update in q.claim_many_updates(candidates, used)
        ]
        try:
            with translate_errors("claim_many", write=True):
                result = await self._fenced.bulk_write(updates, ordered=False)
            return int(result.modified_count), None
        except BulkWriteError as error:
            return claim_many_write_error(error, len(updates)), None
        except TransientStoreError as error:
            if not error.write_may_have_applied:
                raise
            salvaged = await self._claim_many_salvage(used)
            if salvaged is None:
                raise
            log.warning(
                "dogs: claim_many failed after it may have applied (%s); the read-back found "
                "%d claimed records, returned",
                error,
                len(salvaged),
            )
            return 0, salvaged

    async def _claim_many_salvage(self, used: Sequence[ClaimRequest]) -> list[ClaimedJob] | None:
        """The read-back after a write that may have applied; ``None`` when it fails too."""
        try:
            return await self._claim_many_read_back(used)
        except TransientStoreError as read_back_error:
            log.debug(
                "dogs: claim_many read-back after a failed write failed too: %s",
                read_back_error,
            )
            return None

    async def _claim_many_result(
        self, used: Sequence[ClaimRequest], modified: int
    ) -> list[ClaimedJob]:
        """The read-back of ``modified`` claimed records (the last round trip)."""
        try:
            claimed = await self._claim_many_read_back(used)
        except TransientStoreError as error:
            raise TransientStoreError(
                f"claim_many: {modified} records were claimed but could not be read back "
                f"(they are recovered as stale when their locks expire): {error}",
                write_may_have_applied=True,
            ) from error
        if len(claimed) < modified:
            log.warning(
                "dogs: claim_many modified %d records but the read-back by lockId found %d; "
                "dropping the others (they are recovered as stale when their locks expire)",
                modified,
                len(claimed),
            )
        return claimed

    async def _claim_many_read_back(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        lock_ids = [request.lock_id for request in requests]
        with translate_errors("claim_many read-back", write=False):
            cursor = self._primary.find(q.lock_ids_filter(lock_ids))
            documents = await cursor.to_list(None)
        return q.claims_from_read_back(requests, documents)
