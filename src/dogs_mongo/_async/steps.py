"""The steps role of the MongoDB store (:class:`~dogs_core.ports.AsyncStepStore`): a durable
step recorded on its record by one fenced ``updateOne`` (:mod:`dogs_mongo.queries.steps` builds
it), under the store's write concern like every fenced write; a transactional step's function
and that write in one transaction of the store's client.

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/steps.py`` from this module. :class:`MongoSteps` is a base of the store class and uses
its records collection. A claim reads the steps back with the record (no read of its own).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection

from dogs_core.domain.schedules import ensure_utc
from dogs_core.domain.steps import RecordedStep
from dogs_core.errors import InvalidOptionError
from dogs_mongo import queries as q
from dogs_mongo._async.transactions import run_transaction
from dogs_mongo.errors import FenceMissedError, translate_errors
from dogs_mongo.queries import steps as qs

__all__ = ["MongoSteps"]

Document = dict[str, Any]


class MongoSteps:
    """Durable steps on records."""

    _client: Any
    _fenced: AsyncCollection[Document]

    async def record_step(
        self,
        job_id: str,
        lock_id: str,
        index: int,
        step: RecordedStep,
        *,
        sleep_until: datetime | None = None,
    ) -> bool:
        """One fenced pipeline ``updateOne``: the record's first ``index`` steps, then ``step``
        (and with ``sleep_until``, its ``nextRunAt`` and ``sleepingUntil``)."""
        _check_index(index)
        if not isinstance(step, RecordedStep):
            raise InvalidOptionError("step", step, "must be a RecordedStep")
        if sleep_until is not None:
            sleep_until = ensure_utc(sleep_until, field="sleep_until", error=InvalidOptionError)
        update = qs.record_step_update(index, step, sleep_until=sleep_until)
        with translate_errors("record_step", write=True):
            result = await self._fenced.update_one(q.fenced_filter(job_id, lock_id), update)
        return result.matched_count == 1

    async def record_step_in_transaction(
        self,
        job_id: str,
        lock_id: str,
        index: int,
        make_step: Callable[[Any], Awaitable[RecordedStep]],
    ) -> RecordedStep | None:
        """The step's function and the same fenced ``updateOne``, in one transaction of the
        store's client (``with_transaction``: run again after a transient conflict)."""
        _check_index(index)
        client: AsyncMongoClient[Document] = self._client

        async def body(session: Any) -> RecordedStep:
            step = await make_step(session)
            update = qs.record_step_update(index, step)
            fenced = q.fenced_filter(job_id, lock_id)
            result = await self._fenced.update_one(fenced, update, session=session)
            if result.matched_count != 1:
                raise FenceMissedError
            return step

        try:
            step: RecordedStep = await run_transaction(
                client,
                self._fenced.write_concern,
                "record_step_in_transaction",
                body,
                feature="transactional steps",
            )
        except FenceMissedError:
            return None
        return step


def _check_index(index: object) -> None:
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise InvalidOptionError("index", index, "must be an int >= 0")
