"""A workflow made ready to store (pure): its steps checked, ids given, and the records of the
steps that start at once; and the record of a step when it is released.

:func:`compile_workflow` takes what the client knows (how to find a job's definition, new ids,
partitions, the time): every check happens here, before anything is written, and names the
step. :func:`release_job` is the record a released step gets, the same at the start and at
every later release (by any store).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from dogs_core.domain.definitions import EventJobDefinition, validate_params
from dogs_core.domain.records import NewJob
from dogs_core.domain.workflow_marker import batch_entry, step_marker, upstream_entries
from dogs_core.domain.workflow_records import (
    Gate,
    NewWorkflow,
    StepRecord,
    StepState,
    WorkflowRecord,
    WorkflowState,
)
from dogs_core.domain.workflows import JobRef, StepSpec, Workflow, job_name_of
from dogs_core.errors import DogsError, InvalidParamsError, InvalidWorkflowError

__all__ = ["compile_workflow", "release_job", "with_trace_context"]


def compile_workflow(
    workflow: object,
    *,
    resolve: Callable[[JobRef], EventJobDefinition],
    new_id: Callable[[], str],
    partition: Callable[[], int],
    now: datetime,
) -> NewWorkflow:
    """``workflow`` checked (:meth:`Workflow.validate`, each step's job and params) and made
    into what a store inserts. Raises a :class:`~dogs_core.errors.ValidationError` naming the
    step before anything is written."""
    if not isinstance(workflow, Workflow):
        raise InvalidWorkflowError(
            "workflow", workflow, "start_workflow takes a Workflow (or a Batch)"
        )
    workflow.validate()
    specs = workflow.steps
    ids = {spec.name: new_id() for spec in specs}
    workflow_id = new_id()
    children: dict[str, list[str]] = {spec.name: [] for spec in specs}
    for spec in specs:
        for parent in spec.after:
            children[parent].append(ids[spec.name])
    steps: list[StepRecord] = []
    records: list[NewJob] = []
    for spec in specs:
        definition = _definition(spec, resolve)
        step = StepRecord(
            id=ids[spec.name],
            workflow_id=workflow_id,
            name=spec.name,
            job_name=definition.name,
            params=_params(spec, definition),
            priority=definition.priority if spec.priority is None else spec.priority,
            partition=partition(),
            after=tuple(ids[parent] for parent in spec.after),
            children=tuple(children[spec.name]),
            policy=spec.on_failure,
            state=StepState.BLOCKED,
            gate=Gate.WAIT,
            summary=spec.summary,
        )
        if not spec.after:
            record_id = new_id()
            step = _released(step, record_id, now)
            records.append(release_job(step, record_id=record_id, now=now))
        steps.append(step)
    stored = WorkflowRecord(
        id=workflow_id,
        name=workflow.name,
        state=WorkflowState.RUNNING,
        created_at=now,
        step_count=len(steps),
    )
    return NewWorkflow(workflow=stored, steps=tuple(steps), records=tuple(records))


def with_trace_context(workflow: NewWorkflow, carrier: Mapping[str, str]) -> NewWorkflow:
    """``workflow`` carrying the trace context ``carrier`` (on the workflow, every step and
    every record), so that each step's execution can join the workflow's trace."""
    carried = dict(carrier)
    return NewWorkflow(
        workflow=dataclasses.replace(workflow.workflow, trace_context=carried),
        steps=tuple(dataclasses.replace(step, trace_context=carried) for step in workflow.steps),
        records=tuple(
            dataclasses.replace(record, trace_context=carried) for record in workflow.records
        ),
    )


def release_job(
    step: StepRecord,
    *,
    record_id: str,
    now: datetime,
    upstream: Sequence[StepRecord] = (),
    batch: tuple[Mapping[StepState, int], Sequence[str]] | None = None,
) -> NewJob:
    """The record of ``step`` released now as ``record_id``: due at once, its job name,
    params, priority and partition as stored at the start, and the ``workflow`` field
    (:mod:`dogs_core.domain.workflow_marker`) with its dependencies' outcomes (``upstream``,
    in its ``after`` order) or, for a batch's callback, the ``batch`` counts and failed ids."""
    marker = step_marker(step)
    if step.summary:
        counts, failed = batch if batch is not None else ({}, ())
        marker["batch"] = batch_entry(counts, failed)
    elif upstream:
        marker["upstream"] = upstream_entries(upstream)
    return NewJob(
        id=record_id,
        job_name=step.job_name,
        params=step.params,
        next_run_at=now,
        priority=step.priority,
        partition=step.partition,
        trace_context=step.trace_context,
        workflow=marker,
    )


def _released(step: StepRecord, record_id: str, now: datetime) -> StepRecord:
    return dataclasses.replace(step, state=StepState.RELEASED, record_id=record_id, released_at=now)


def _definition(
    spec: StepSpec, resolve: Callable[[JobRef], EventJobDefinition]
) -> EventJobDefinition:
    try:
        definition = resolve(spec.job)
    except DogsError as error:
        raise InvalidWorkflowError(spec.name, job_name_of(spec.job), str(error)) from error
    if definition.save_executions_for <= timedelta(0):
        raise InvalidWorkflowError(
            spec.name,
            definition.name,
            "its job keeps no history (save_executions_for=0), and a step's end is read from "
            "its history row",
        )
    return definition


def _params(spec: StepSpec, definition: EventJobDefinition) -> dict[str, object] | None:
    try:
        return validate_params(definition, spec.params)
    except InvalidParamsError as error:
        raise InvalidParamsError(
            f"steps[{spec.name!r}].params",
            error.value,
            error.reason,
            message=f"step {spec.name!r}: {error}",
        ) from error
