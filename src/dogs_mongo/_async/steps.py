"""The steps role of the MongoDB store (:class:`~dogs_core.ports.AsyncStepStore`): a durable
step recorded on its record by one fenced ``updateOne`` (:mod:`dogs_mongo.queries.steps` builds
it), under the store's write concern like every fenced write.

Part of the async adapter (the source of truth): ``scripts/generate_sync.py`` generates
``_sync/steps.py`` from this module. :class:`MongoSteps` is a base of the store class and uses
its records collection. A claim reads the steps back with the record (no read of its own).
"""

from __future__ import annotations

from typing import Any

from pymongo.asynchronous.collection import AsyncCollection

from dogs_core.domain.steps import RecordedStep
from dogs_core.errors import InvalidOptionError
from dogs_mongo import queries as q
from dogs_mongo.errors import translate_errors
from dogs_mongo.queries import steps as qs

__all__ = ["MongoSteps"]

Document = dict[str, Any]


class MongoSteps:
    """Durable steps on records."""

    _fenced: AsyncCollection[Document]

    async def record_step(self, job_id: str, lock_id: str, index: int, step: RecordedStep) -> bool:
        """One fenced pipeline ``updateOne``: the record's first ``index`` steps, then ``step``."""
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise InvalidOptionError("index", index, "must be an int >= 0")
        if not isinstance(step, RecordedStep):
            raise InvalidOptionError("step", step, "must be a RecordedStep")
        update = qs.record_step_update(index, step)
        with translate_errors("record_step", write=True):
            result = await self._fenced.update_one(q.fenced_filter(job_id, lock_id), update)
        return result.matched_count == 1
