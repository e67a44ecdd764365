"""The commands of the steps role (:mod:`dogs_mongo._async.steps`): the fenced write of one
durable step on a record, and the record's ``steps`` array read back into
:class:`~dogs_core.domain.steps.RecordedStep` values.

Stored form (additive; Node Dogs never reads it): ``steps: [{name, result, recordedAt,
executionId, durationMs}]`` on the record, in the order the handler called them, and
``sleepingUntil`` (a date: the wake-up of its last ``ctx.sleep``, in force while it is the
``nextRunAt``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from dogs_core.domain.records import to_millis
from dogs_core.domain.steps import RecordedStep

__all__ = [
    "SLEEPING_FIELD",
    "STEPS_FIELD",
    "record_step_update",
    "step_document",
    "steps_from_document",
]

STEPS_FIELD = "steps"
SLEEPING_FIELD = "sleepingUntil"


def step_document(step: RecordedStep) -> dict[str, Any]:
    """The stored form of one step."""
    return {
        "name": step.name,
        "result": step.result,
        "recordedAt": to_millis(step.recorded_at),
        "executionId": step.execution_id,
        "durationMs": step.duration_ms,
    }


def record_step_update(
    index: int, step: RecordedStep, *, sleep_until: datetime | None = None
) -> list[dict[str, Any]]:
    """The pipeline update that makes ``step`` step number ``index``: the first ``index``
    steps kept, this one after them (a retried write writes the same array again). The step is
    a ``$literal``: a result may hold strings that start with ``$``. With ``sleep_until``, the
    record's ``nextRunAt`` and ``sleepingUntil`` become it in the same write."""
    kept = {"$slice": [{"$ifNull": [f"${STEPS_FIELD}", []]}, index]} if index else []
    to_set: dict[str, Any] = {
        STEPS_FIELD: {"$concatArrays": [kept, [{"$literal": step_document(step)}]]}
    }
    if sleep_until is not None:
        wake = {"$literal": to_millis(sleep_until)}
        to_set.update({"nextRunAt": wake, SLEEPING_FIELD: wake})
    return [{"$set": to_set}]


def steps_from_document(value: object) -> tuple[RecordedStep, ...]:
    """A stored ``steps`` array (empty when absent or not ours; a malformed entry ends it: a
    replay never skips a step)."""
    if not isinstance(value, list):
        return ()
    steps = []
    for entry in value:
        step = _step(entry)
        if step is None:
            break
        steps.append(step)
    return tuple(steps)


def _step(entry: object) -> RecordedStep | None:
    if not isinstance(entry, Mapping):
        return None
    name, at, execution = entry.get("name"), entry.get("recordedAt"), entry.get("executionId")
    if not isinstance(name, str) or not isinstance(at, datetime) or not isinstance(execution, str):
        return None
    duration = entry.get("durationMs")
    return RecordedStep(
        name=name,
        result=entry.get("result"),
        recorded_at=at,
        execution_id=execution,
        duration_ms=int(duration) if isinstance(duration, int | float) else 0,
    )
