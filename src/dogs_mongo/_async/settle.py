"""The settle role of the MongoDB store: the fenced writes that end executions, a batch in one
``bulkWrite``.

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/settle.py`` from this module. :class:`MongoSettle` is a base of the store class; it
writes through ``_fenced`` (the store's write concern) and reads its own writes back on
``_primary``.

One unordered ``bulkWrite`` per :data:`~dogs_mongo.queries.MAX_BATCH_SIZE` settlements: the
completions (``Delete``) as one ``deleteMany`` of their ids and lock ids
(:func:`~dogs_mongo.queries.complete_many_filter`), every other command as one fenced
``updateOne`` (:func:`~dogs_mongo.queries.settle_update`). Each record is named once per call
(:func:`~dogs_core.domain.settle.check_settlements`), so the order of the writes cannot matter.
MongoDB reports counts, not which write matched: when the deletes or the updates fall short of
their number, one ``find`` of the batch's records tells which landed
(:func:`~dogs_core.domain.settle.settled_as_commanded`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pymongo import DeleteMany, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError

from dogs_core.domain.outcome import Delete
from dogs_core.domain.records import HistoryRecord, JobRecord
from dogs_core.domain.settle import (
    Settlement,
    check_settlements,
    rows_of,
    settled_as_commanded,
)
from dogs_core.errors import TransientStoreError
from dogs_mongo import queries as q
from dogs_mongo.errors import translate_errors

__all__ = ["MongoSettle"]

log = logging.getLogger("dogs.mongo.store")

Document = dict[str, Any]


class MongoSettle:
    """The fenced writes that end executions (``settle_many``)."""

    _fenced: AsyncCollection[Document]
    _primary: AsyncCollection[Document]
    #: The history collection for the rows a batch carries: ``w: 1`` unless the store was given
    #: a history write concern (the settlements' own concern makes them durable, see below).
    _settled_rows: AsyncCollection[Document]

    if TYPE_CHECKING:

        async def _write_rows(
            self,
            collection: AsyncCollection[Document],
            records: Sequence[HistoryRecord],
            operation: str,
        ) -> None: ...

    async def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        """See the port. A transient failure after an earlier batch was written reports
        ``write_may_have_applied``; a retry then reports ``False`` for what the lost attempt
        applied (the runtime reads those records back)."""
        checked = check_settlements(settlements)
        rows = rows_of(checked)
        if rows:
            # Written first, acknowledged by the primary alone: the settlements that follow are
            # sent with the store's write concern (majority by default), and once they are
            # majority-committed so is every write before them (MongoDB replicates and journals
            # in oplog order). One journal wait per batch instead of two.
            await self._write_rows(self._settled_rows, rows, "settle_many (history rows)")
        verdicts: list[bool] = []
        for batch in q.batches(checked):
            try:
                verdicts.extend(await self._settle_batch(batch))
            except TransientStoreError as error:
                if not verdicts or error.write_may_have_applied:
                    raise
                raise TransientStoreError(
                    f"settle_many: {len(verdicts)} of {len(checked)} settlements were written "
                    f"before this failure: {error}",
                    write_may_have_applied=True,
                ) from error
        return verdicts

    async def _settle_batch(self, batch: Sequence[Settlement]) -> list[bool]:
        deletes = [s for s in batch if isinstance(s.command, Delete)]
        requests: list[DeleteMany | UpdateOne] = []
        if deletes:
            pairs = [(s.job_id, s.lock_id) for s in deletes]
            requests.append(DeleteMany(q.complete_many_filter(pairs)))
        requests.extend(
            UpdateOne(*q.settle_update(s)) for s in batch if not isinstance(s.command, Delete)
        )
        try:
            with translate_errors("settle_many", write=True):
                result = await self._fenced.bulk_write(requests, ordered=False)
        except BulkWriteError as error:
            concern_errors = error.details.get("writeConcernErrors")
            if concern_errors and not error.details.get("writeErrors"):
                raise TransientStoreError(
                    f"settle_many: write concern error ({concern_errors[0]})",
                    write_may_have_applied=True,
                ) from error
            raise
        deleted, matched = int(result.deleted_count), int(result.matched_count)
        if deleted == len(deletes) and matched == len(batch) - len(deletes):
            return [True] * len(batch)
        return await self._read_back(batch, deleted=deleted, matched=matched)

    async def _read_back(
        self, batch: Sequence[Settlement], *, deleted: int, matched: int
    ) -> list[bool]:
        """The verdicts of a batch whose counts fell short, from its records as they are now.
        A kind of write (deletes, updates) that matched nothing has only ``False`` verdicts;
        otherwise each settlement whose record shows it applied is ``True`` (exact when as
        many show it as matched; else some were applied before, which one count cannot tell
        apart: the port's leeway)."""
        ids = [s.job_id for s in batch]
        try:
            with translate_errors("settle_many (read-back)", write=False):
                found = await self._primary.find(q.ids_filter(ids)).to_list(None)
        except TransientStoreError as error:
            raise TransientStoreError(
                f"settle_many: the batch was written but what landed could not be read back: "
                f"{error}",
                write_may_have_applied=True,
            ) from error
        records: dict[str, JobRecord] = {
            str(document["_id"]): q.record_from_document(document) for document in found
        }
        verdicts: list[bool] = []
        for settlement in batch:
            completes = isinstance(settlement.command, Delete)
            if (deleted if completes else matched) == 0:
                verdicts.append(False)
            else:
                verdicts.append(settled_as_commanded(settlement, records.get(settlement.job_id)))
        looks_deleted = sum(
            v for s, v in zip(batch, verdicts, strict=True) if isinstance(s.command, Delete)
        )
        looks_updated = sum(verdicts) - looks_deleted
        if (deleted and looks_deleted != deleted) or (matched and looks_updated != matched):
            log.debug(
                "dogs: settle_many applied %d deletes and %d updates; %d and %d look applied, "
                "reporting those",
                deleted,
                matched,
                looks_deleted,
                looks_updated,
            )
        return verdicts
