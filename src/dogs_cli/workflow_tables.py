"""What ``dogs workflows`` prints: the list of workflows, and one workflow with its steps and
its graph as text, as tables or as JSON. Pure presentation (no MongoDB, no options)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rich.table import Table

from dogs_cli.tables import _console, _moment, print_json
from dogs_core.domain.records import HistoryStatus
from dogs_core.domain.workflow_layout import levels, text_dag
from dogs_core.domain.workflow_records import (
    StepRecord,
    StepState,
    WorkflowSummary,
    WorkflowView,
)

__all__ = ["print_workflow", "print_workflows", "step_json", "workflow_json"]

#: Steps listed in the table of ``show`` (the rest is summed up, and in ``--json``).
MAX_STEP_ROWS = 200


def _counts_text(counts: dict[StepState, int] | Any) -> str:
    shown = [f"{count} {state.value}" for state, count in counts.items() if count]
    return ", ".join(shown) or "-"


def print_workflows(found: Sequence[WorkflowSummary], now: datetime, *, as_json: bool) -> None:
    """``dogs workflows list``."""
    if as_json:
        print_json(
            [
                {**workflow_json(s.workflow), "counts": {k.value: v for k, v in s.counts.items()}}
                for s in found
            ]
        )
        return
    console = _console()
    if not found:
        console.print("No workflows match.", highlight=False)
        return
    table = Table(box=None, pad_edge=False)
    for column in ("Id", "Name", "State", "Steps", "Created", "Ended"):
        table.add_column(column, no_wrap=column in ("Id", "State"))
    for summary in found:
        workflow = summary.workflow
        table.add_row(
            workflow.id,
            workflow.name or "-",
            workflow.state.value,
            f"{workflow.step_count}: {_counts_text(dict(summary.counts))}",
            _moment(workflow.created_at, now),
            _moment(workflow.ended_at, now),
        )
    console.print(table)


def print_workflow(view: WorkflowView, now: datetime, *, as_json: bool) -> None:
    """``dogs workflows show``: the workflow, a table of its steps, its graph as text."""
    if as_json:
        print_json({**workflow_json(view.workflow), "steps": [step_json(s) for s in view.steps]})
        return
    console = _console()
    workflow = view.workflow
    console.print(
        f"Workflow {workflow.id}  {workflow.name or ''}\n"
        f"  state: {workflow.state.value}   steps: {workflow.step_count} "
        f"({_counts_text(view.counts())})   retries: {workflow.generation}\n"
        f"  created: {_moment(workflow.created_at, now)}   ended: "
        f"{_moment(workflow.ended_at, now)}",
        highlight=False,
        soft_wrap=True,
    )
    names = {step.id: step.name for step in view.steps}
    depth = {step.id: level.depth for level in levels(view.steps) for step in level.steps}
    table = Table(box=None, pad_edge=False, title="Steps", title_justify="left")
    for column in ("Level", "Step", "State", "Job id", "After", "On failure", "Outcome"):
        table.add_column(column, no_wrap=column in ("Step", "State", "Job id"))
    for step in view.steps[:MAX_STEP_ROWS]:
        after = ", ".join(names.get(p, p) for p in step.after[:4])
        if len(step.after) > 4:
            after += f", ... ({len(step.after)})"
        table.add_row(
            str(depth[step.id]),
            step.name,
            step.state.value,
            step.record_id or "-",
            after or "-",
            step.policy.value,
            _outcome_text(step),
        )
    console.print(table)
    if len(view.steps) > MAX_STEP_ROWS:
        console.print(f"... and {len(view.steps) - MAX_STEP_ROWS} more steps (--json lists all)")
    console.print("\nGraph (+ succeeded, x failed, - skipped, / cancelled, ~ released):")
    for line in text_dag(view.steps):
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _outcome_text(step: StepRecord) -> str:
    outcome = step.outcome
    if outcome is None:
        return "-"
    if outcome.error_message:
        return outcome.error_message[:80]
    if outcome.result_omitted:
        return "(result too large to keep)"
    status = outcome.status
    if outcome.result is None and status is not None and status is not HistoryStatus.SUCCESS:
        # a cancelled or stale run has no result: its status says more than "null"
        return f"({status.value})"
    text = json.dumps(outcome.result, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def workflow_json(workflow: Any) -> dict[str, Any]:
    return {
        "id": workflow.id,
        "name": workflow.name,
        "state": workflow.state.value,
        "step_count": workflow.step_count,
        "created_at": workflow.created_at.isoformat(),
        "ended_at": None if workflow.ended_at is None else workflow.ended_at.isoformat(),
        "retries": workflow.generation,
    }


def step_json(step: StepRecord) -> dict[str, Any]:
    outcome = step.outcome
    return {
        "id": step.id,
        "name": step.name,
        "job_name": step.job_name,
        "state": step.state.value,
        "job_id": step.record_id,
        "after": list(step.after),
        "on_failure": step.policy.value,
        "generation": step.generation,
        "released_at": None if step.released_at is None else step.released_at.isoformat(),
        "ended_at": None if step.ended_at is None else step.ended_at.isoformat(),
        "outcome": None
        if outcome is None
        else {
            "status": None if outcome.status is None else outcome.status.value,
            "error_message": outcome.error_message,
            "result": outcome.result,
            "result_omitted": outcome.result_omitted,
        },
    }
