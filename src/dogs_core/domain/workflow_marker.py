"""The ``workflow`` field of a step's record (pure): written when the step is released, read
by its handler (``ctx.workflow_id``, ``ctx.upstream(...)``, ``ctx.batch``).

Its shape (an additive field, ignored by Node Dogs workers)::

    {"id": <workflow id>, "step": <step id>, "name": <step name>,
     "upstream": [{"step": <id>, "name": <name>, "state": "succeeded", "status": "success",
                   "result": <result>, "resultOmitted": false}, ...],      # a step's dependencies
     "batch": {"total": 10000, "succeeded": 9998, "failed": 2, "skipped": 0,
               "cancelled": 0, "failedSteps": [<step id>, ...]}}            # a batch's callback

Results come from the dependencies' history rows (the release copies each into the step's
end), bounded: :data:`~dogs_core.domain.workflow_records.MAX_STEP_RESULT_BYTES` per result
and :data:`~dogs_core.domain.workflow_records.MAX_UPSTREAM_BYTES` per record; an omitted one
raises :class:`~dogs_core.errors.WorkflowUpstreamError` when read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dogs_core.domain.params import bson_document_size
from dogs_core.domain.records import HistoryStatus
from dogs_core.domain.workflow_records import MAX_UPSTREAM_BYTES, StepRecord, StepState
from dogs_core.errors import WorkflowUpstreamError

__all__ = [
    "BatchSummary",
    "Upstream",
    "batch_entry",
    "read_batch",
    "read_upstream",
    "step_marker",
    "upstream_entries",
]


@dataclass(frozen=True, slots=True)
class Upstream:
    """One dependency of a running step, as its handler reads it (``ctx.upstream(name)``)."""

    step_id: str
    name: str
    state: StepState
    """``succeeded``, or ``failed``/``cancelled`` for a dependency under ``continue``."""
    status: HistoryStatus | None
    _result: Any = None
    result_omitted: bool = False

    @property
    def succeeded(self) -> bool:
        return self.state is StepState.SUCCEEDED

    @property
    def result(self) -> Any:
        """What the dependency's handler returned (as stored: BSON types). Raises
        :class:`~dogs_core.errors.WorkflowUpstreamError` when it was too large to be carried
        here (read it from ``client.get_workflow`` or its history row instead)."""
        if self.result_omitted:
            raise WorkflowUpstreamError(
                f"the result of step {self.name!r} was too large to be carried to its "
                "dependents (see docs/workflows.md#results); read it from its history row"
            )
        return self._result


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """What a batch's callback reads (``ctx.batch``): its items' outcomes."""

    total: int
    succeeded: int
    failed: int
    skipped: int
    cancelled: int
    failed_ids: tuple[str, ...]
    """The step ids of the failed (and cancelled) items."""


def step_marker(step: StepRecord) -> dict[str, Any]:
    """The part of the field every step's record has: its workflow, step id and name."""
    return {"id": step.workflow_id, "step": step.id, "name": step.name}


def upstream_entries(parents: Sequence[StepRecord]) -> list[dict[str, Any]]:
    """The ``upstream`` entries of a step whose dependencies are ``parents`` (in its
    ``after`` order), results kept while they fit :data:`MAX_UPSTREAM_BYTES` in all."""
    entries: list[dict[str, Any]] = []
    budget = MAX_UPSTREAM_BYTES
    for parent in parents:
        outcome = parent.outcome
        entry: dict[str, Any] = {
            "step": parent.id,
            "name": parent.name,
            "state": parent.state.value,
            "status": None if outcome is None or outcome.status is None else outcome.status.value,
            "result": None,
            "resultOmitted": bool(outcome is not None and outcome.result_omitted),
        }
        if outcome is not None and not outcome.result_omitted and outcome.result is not None:
            size = bson_document_size({"result": outcome.result})
            if size <= budget:
                entry["result"] = outcome.result
                budget -= size
            else:
                entry["resultOmitted"] = True
        entries.append(entry)
    return entries


def batch_entry(counts: Mapping[StepState, int], failed_ids: Sequence[str]) -> dict[str, Any]:
    """The ``batch`` entry of a batch's callback from its items' counts per state."""
    return {
        "total": sum(counts.values()),
        "succeeded": counts.get(StepState.SUCCEEDED, 0),
        "failed": counts.get(StepState.FAILED, 0),
        "skipped": counts.get(StepState.SKIPPED, 0),
        "cancelled": counts.get(StepState.CANCELLED, 0),
        "failedSteps": list(failed_ids),
    }


def read_upstream(marker: Mapping[str, Any] | None) -> tuple[Upstream, ...]:
    """The dependencies a step's record carries (none for a step without any)."""
    if not marker:
        return ()
    found: list[Upstream] = []
    for entry in marker.get("upstream") or ():
        if not isinstance(entry, Mapping):
            continue
        status = entry.get("status")
        found.append(
            Upstream(
                step_id=str(entry.get("step")),
                name=str(entry.get("name")),
                state=StepState(str(entry.get("state"))),
                status=None if status is None else HistoryStatus(str(status)),
                _result=entry.get("result"),
                result_omitted=bool(entry.get("resultOmitted")),
            )
        )
    return tuple(found)


def read_batch(marker: Mapping[str, Any] | None) -> BatchSummary | None:
    """The batch summary a callback's record carries (``None`` for any other record)."""
    batch = None if not marker else marker.get("batch")
    if not isinstance(batch, Mapping):
        return None
    return BatchSummary(
        total=int(batch.get("total") or 0),
        succeeded=int(batch.get("succeeded") or 0),
        failed=int(batch.get("failed") or 0),
        skipped=int(batch.get("skipped") or 0),
        cancelled=int(batch.get("cancelled") or 0),
        failed_ids=tuple(str(step) for step in batch.get("failedSteps") or ()),
    )
