"""The steps role of the in-memory store (optional in the port; this store has it): a durable
step kept on its record by a fenced write under the state's one lock, as MongoDB's single-document
update does. See :mod:`dogs_core.ports.steps` and :mod:`dogs_testing.memory`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from dogs_core.domain.records import to_millis
from dogs_core.domain.schedules import ensure_utc
from dogs_core.domain.steps import RecordedStep
from dogs_core.errors import InvalidOptionError, TransactionsNotSupportedError
from dogs_testing._memory_state import MemoryState

__all__ = ["MemorySteps"]


class MemorySteps(MemoryState):
    """Durable steps on records."""

    def record_step(
        self,
        job_id: str,
        lock_id: str,
        index: int,
        step: RecordedStep,
        *,
        sleep_until: datetime | None = None,
    ) -> bool:
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise InvalidOptionError("index", index, "must be an int >= 0")
        if not isinstance(step, RecordedStep):
            raise InvalidOptionError("step", step, "must be a RecordedStep")
        wake = (
            None
            if sleep_until is None
            else to_millis(ensure_utc(sleep_until, field="sleep_until", error=InvalidOptionError))
        )
        stored = dataclasses.replace(
            step, result=copy.deepcopy(step.result), recorded_at=to_millis(step.recorded_at)
        )
        with self._state():
            old = self._fenced(job_id, lock_id)
            if old is None:
                return False
            new = dataclasses.replace(old, steps=(*old.steps[:index], stored))
            if wake is not None:
                new = dataclasses.replace(new, next_run_at=wake, sleeping_until=wake)
            self._put(old, new)
            return True

    def record_step_in_transaction(
        self,
        job_id: str,
        lock_id: str,
        index: int,
        make_step: Callable[[Any], Any],
    ) -> RecordedStep | None:
        raise TransactionsNotSupportedError(
            "record_step_in_transaction: transactional steps need MongoDB transactions; the "
            "in-memory store has none (test the step's function on its own, or with "
            "FakeJobContext, which passes session=None)"
        )
