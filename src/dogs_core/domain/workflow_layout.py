"""A workflow's graph laid out for people (pure): its steps by level (the longest chain of
dependencies before each), as ``dogs workflows show`` prints it and the dashboard draws it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dogs_core.domain.workflow_records import StepRecord, StepState

__all__ = ["Level", "levels", "text_dag"]


@dataclass(frozen=True, slots=True)
class Level:
    """The steps at one depth, in the order they were added."""

    depth: int
    steps: tuple[StepRecord, ...]


def levels(steps: Sequence[StepRecord]) -> list[Level]:
    """``steps`` by depth: 0 for a step without dependencies, else one more than its deepest
    dependency. A dependency missing from ``steps`` counts as depth -1."""
    by_id = {step.id: step for step in steps}
    depth: dict[str, int] = {}
    for step in steps:
        stack = [step.id]
        while stack:
            current = stack[-1]
            if current in depth:
                stack.pop()
                continue
            pending = [p for p in by_id[current].after if p in by_id and p not in depth]
            if pending:
                stack.extend(pending)
                continue
            parents = [depth[p] for p in by_id[current].after if p in by_id]
            depth[current] = 1 + max(parents, default=-1)
            stack.pop()
    grouped: dict[int, list[StepRecord]] = {}
    for step in steps:
        grouped.setdefault(depth[step.id], []).append(step)
    return [Level(d, tuple(grouped[d])) for d in sorted(grouped)]


_MARK = {
    StepState.BLOCKED: " ",
    StepState.RELEASED: "~",
    StepState.SUCCEEDED: "+",
    StepState.FAILED: "x",
    StepState.SKIPPED: "-",
    StepState.CANCELLED: "/",
}


def text_dag(steps: Sequence[StepRecord], *, per_level: int = 12) -> list[str]:
    """The graph as lines of text, a level at a time: ``[+] name  <- dep, dep`` (``+``
    succeeded, ``x`` failed, ``-`` skipped, ``/`` cancelled, ``~`` released, blank
    blocked); a level of more than ``per_level`` steps is summed up after its first ones."""
    names = {step.id: step.name for step in steps}
    lines = []
    for level in levels(steps):
        lines.append(f"level {level.depth}")
        for step in level.steps[:per_level]:
            after = ", ".join(names.get(p, p) for p in step.after[:6])
            if len(step.after) > 6:
                after += f", ... ({len(step.after)} in all)"
            arrow = f"  <- {after}" if after else ""
            lines.append(f"  [{_MARK[step.state]}] {step.name} ({step.state.value}){arrow}")
        hidden = level.steps[per_level:]
        if hidden:
            counts: dict[str, int] = {}
            for step in hidden:
                counts[step.state.value] = counts.get(step.state.value, 0) + 1
            summary = ", ".join(f"{count} {state}" for state, count in sorted(counts.items()))
            lines.append(f"  ... and {len(hidden)} more ({summary})")
    return lines
