"""The workflows' collections (additive, docs/differences.md): their documents, indexes and the
filters of the workflows role (:class:`~dogs_mongo._async.workflows.MongoWorkflows`).

``orionjs.jobs_dogs_workflows`` holds one document per workflow, ``orionjs.jobs_dogs_workflow_
steps`` one per step. Neither is read by Dogs 4.6.8; a step's record enters Dogs' records
collection only when the step is released, as a plain event record (Dogs' fields and types)
with the additive ``workflow`` field. Field names are camelCase like Dogs' own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.records import HistoryStatus, to_millis
from dogs_core.domain.uniqueness import PARKED_AT
from dogs_core.domain.workflow_records import (
    Gate,
    StepOutcome,
    StepRecord,
    StepState,
    WorkflowRecord,
    WorkflowState,
)
from dogs_core.domain.workflows import FailurePolicy
from dogs_mongo.queries.common import _trace_context
from dogs_mongo.queries.indexes import IndexSpec

__all__ = [
    "DEFAULT_WORKFLOWS_COLLECTION",
    "DEFAULT_WORKFLOW_STEPS_COLLECTION",
    "SMALL_FAN_IN",
    "STAGED_UNTIL",
    "STEP_INDEXES",
    "WORKFLOW_INDEXES",
    "outcome_document",
    "staged_filter",
    "staged_record",
    "step_changes_pipeline",
    "step_document",
    "step_from_document",
    "unstage_update",
    "workflow_changes_pipeline",
    "workflow_document",
    "workflow_from_document",
]

DEFAULT_WORKFLOWS_COLLECTION: Final = "orionjs.jobs_dogs_workflows"
DEFAULT_WORKFLOW_STEPS_COLLECTION: Final = "orionjs.jobs_dogs_workflow_steps"

#: A step with at most this many dependencies is decided from their gates read at once; one
#: with more (a batch's callback) through two index lookups on ``{children, gate}``, so that a
#: fan-in of 10,000 costs the same as one of 10 at every end.
SMALL_FAN_IN: Final = 64

WORKFLOW_INDEXES: Final[tuple[IndexSpec, ...]] = (
    IndexSpec("jobs_dogs_workflows_created", (("createdAt", -1), ("_id", -1))),
    IndexSpec("jobs_dogs_workflows_state_created", (("state", 1), ("createdAt", -1))),
)

STEP_INDEXES: Final[tuple[IndexSpec, ...]] = (
    # get_workflow: the steps in the order they were added
    IndexSpec("jobs_dogs_workflow_steps_workflow_seq", (("workflowId", 1), ("seq", 1))),
    # a workflow's blocked or released steps (fail, cancel, finish), its counts per state
    IndexSpec("jobs_dogs_workflow_steps_workflow_state", (("workflowId", 1), ("state", 1))),
    # the released step of a history row's jobId
    IndexSpec("jobs_dogs_workflow_steps_record", (("recordId", 1),), {"sparse": True}),
    # does any dependency of step C still wait (or skip it)? {children: C, gate: "wait"}
    IndexSpec("jobs_dogs_workflow_steps_children_gate", (("children", 1), ("gate", 1))),
    # the sweep: released steps in id order
    IndexSpec("jobs_dogs_workflow_steps_state_id", (("state", 1), ("_id", 1))),
    # the sweep: ends whose consequences are not all written
    IndexSpec(
        "jobs_dogs_workflow_steps_pending",
        (("pending", 1), ("_id", 1)),
        {"partialFilterExpression": {"pending": True}},
    ),
)


#: The ``nextRunAt`` of a step's record written but not yet released (a release is three
#: writes: the record staged, the step released with it, the record made due): no claim, ours
#: or Dogs 4.6.8's (``nextRunAt <= now``), ever matches it (the date of a unique call's parked
#: record). ``workflow.stagedAt`` marks it.
STAGED_UNTIL: Final = PARKED_AT


def staged_record(document: dict[str, Any], at: datetime) -> dict[str, Any]:
    """A released step's record ``document`` as first written: staged (never claimed)."""
    marker = dict(document.get("workflow") or {})
    marker["stagedAt"] = at
    return {**document, "nextRunAt": STAGED_UNTIL, "workflow": marker}


def staged_filter(record_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """The staged records (of ``record_ids``)."""
    filter_: dict[str, Any] = {"workflow.stagedAt": {"$exists": True}}
    if record_ids is not None:
        filter_["_id"] = {"$in": list(record_ids)}
    return filter_


def unstage_update(at: datetime) -> dict[str, Any]:
    """A staged record made due ``at`` (its step is released with it)."""
    return {"$set": {"nextRunAt": at}, "$unset": {"workflow.stagedAt": ""}}


def workflow_document(workflow: WorkflowRecord) -> dict[str, Any]:
    document: dict[str, Any] = {
        "_id": workflow.id,
        "name": workflow.name,
        "state": workflow.state.value,
        "createdAt": to_millis(workflow.created_at),
        "stepCount": workflow.step_count,
        "generation": workflow.generation,
    }
    if workflow.ended_at is not None:
        document["endedAt"] = to_millis(workflow.ended_at)
    if workflow.trace_context:
        document["traceContext"] = dict(workflow.trace_context)
    return document


def workflow_from_document(doc: Mapping[str, Any]) -> WorkflowRecord:
    name = doc.get("name")
    return WorkflowRecord(
        id=str(doc["_id"]),
        name=name if isinstance(name, str) else None,
        state=WorkflowState(doc["state"]),
        created_at=doc["createdAt"],
        step_count=int(doc.get("stepCount") or 0),
        ended_at=doc.get("endedAt"),
        generation=int(doc.get("generation") or 0),
        trace_context=_trace_context(doc),
    )


def step_document(step: StepRecord, seq: int) -> dict[str, Any]:
    """The document of a step at its insert (``seq``: its place in the workflow)."""
    document: dict[str, Any] = {
        "_id": step.id,
        "workflowId": step.workflow_id,
        "seq": seq,
        "name": step.name,
        "jobName": step.job_name,
        "params": dict(step.params) if step.params is not None else None,
        "priority": step.priority,
        "partition": step.partition,
        "after": list(step.after),
        "children": list(step.children),
        "parentCount": len(step.after),
        "childCount": len(step.children),
        "policy": step.policy.value,
        "summary": step.summary,
        "state": step.state.value,
        "gate": step.gate.value,
        "generation": step.generation,
    }
    if step.record_id is not None:
        document["recordId"] = step.record_id
    if step.released_at is not None:
        document["releasedAt"] = to_millis(step.released_at)
    if step.trace_context:
        document["traceContext"] = dict(step.trace_context)
    return document


def outcome_document(outcome: StepOutcome) -> dict[str, Any]:
    return {
        "status": None if outcome.status is None else outcome.status.value,
        "endedAt": to_millis(outcome.ended_at),
        "executionId": outcome.execution_id,
        "errorMessage": outcome.error_message,
        "result": outcome.result,
        "resultOmitted": outcome.result_omitted,
    }


def _outcome(doc: Any) -> StepOutcome | None:
    if not isinstance(doc, Mapping):
        return None
    status = doc.get("status")
    return StepOutcome(
        status=None if status is None else HistoryStatus(status),
        ended_at=doc["endedAt"],
        execution_id=doc.get("executionId"),
        error_message=doc.get("errorMessage"),
        result=doc.get("result"),
        result_omitted=bool(doc.get("resultOmitted")),
    )


def step_from_document(doc: Mapping[str, Any]) -> StepRecord:
    params = doc.get("params")
    return StepRecord(
        id=str(doc["_id"]),
        workflow_id=str(doc["workflowId"]),
        name=str(doc["name"]),
        job_name=str(doc["jobName"]),
        params=params if isinstance(params, Mapping) else None,
        priority=int(doc.get("priority") or 0),
        partition=int(doc.get("partition") or 0),
        after=tuple(str(i) for i in doc.get("after") or ()),
        children=tuple(str(i) for i in doc.get("children") or ()),
        policy=FailurePolicy(doc.get("policy") or FailurePolicy.FAIL.value),
        state=StepState(doc["state"]),
        gate=Gate(doc.get("gate") or Gate.WAIT.value),
        generation=int(doc.get("generation") or 0),
        summary=bool(doc.get("summary")),
        record_id=doc.get("recordId"),
        released_at=doc.get("releasedAt"),
        ended_at=doc.get("endedAt"),
        outcome=_outcome(doc.get("outcome")),
        pending=bool(doc.get("pending")),
        trace_context=_trace_context(doc),
    )


def failing_step_filter(workflow_ids: Sequence[str]) -> dict[str, Any]:
    """The steps of these workflows that fail them (:func:`~dogs_core.domain.workflow_release.
    fails_workflow`): failed or cancelled under ``fail`` (a missing policy is ``fail``)."""
    return {
        "workflowId": {"$in": list(workflow_ids)},
        "state": {"$in": [StepState.FAILED.value, StepState.CANCELLED.value]},
        "policy": {"$in": [FailurePolicy.FAIL.value, None]},
    }


def step_changes_pipeline(except_instance: str | None = None) -> list[dict[str, Any]]:
    """The ``watch`` pipeline on the history of the rows that may end a step: inserts (first
    writes) of a row carrying ``workflowId`` (a step's execution by a Python worker), or
    without ``wasStale`` (every row of ours has it: the row was written by a Node Dogs worker,
    which does not know workflows); but not the rows of the ``Workers`` instance
    ``except_instance`` (``owner.instanceId``: a Node row has no owner). Params and
    tracebacks stay out of the events."""
    match: dict[str, Any] = {
        "operationType": "insert",
        "$or": [
            {"fullDocument.workflowId": {"$exists": True}},
            {"fullDocument.wasStale": {"$exists": False}},
        ],
    }
    if except_instance is not None:
        match["fullDocument.owner.instanceId"] = {"$ne": except_instance}
    return [
        {"$match": match},
        {"$project": {"fullDocument.params": 0, "fullDocument.errorTraceback": 0}},
    ]


def workflow_changes_pipeline(workflow_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The ``watch`` pipeline of changes of these workflows' documents."""
    return [
        {"$match": {"documentKey._id": {"$in": list(workflow_ids)}}},
        {"$project": {"documentKey": 1}},
    ]


def workflow_change(event: Mapping[str, Any]) -> str | None:
    key = (event.get("documentKey") or {}).get("_id")
    return key if isinstance(key, str) else None


def at(moment: datetime) -> datetime:
    """A time as stored (milliseconds)."""
    return to_millis(moment)
