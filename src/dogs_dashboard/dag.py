"""A workflow's graph as a server-rendered inline SVG (no JavaScript library, nothing from a CDN).

Steps are laid out a level per column (:func:`~dogs_core.domain.workflow_layout.levels`: the
longest chain of dependencies before each step), in the order they were added down each column;
an edge goes from each dependency to its step. Each node is a box coloured by the step's state
(``class="node <state>"``), titled with the step's name, state and job id, and linked to the
job's page once the step has a record. A column of more than ``per_level`` steps (a batch's
10,000 items) shows its first ones and one box summing up the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from dogs_core.domain.workflow_layout import levels
from dogs_core.domain.workflow_records import StepRecord

__all__ = ["dag_svg"]

_NODE_W, _NODE_H = 150, 28
_GAP_X, _GAP_Y = 56, 10
_PAD = 8
_NAME_CHARS = 20


@dataclass(frozen=True, slots=True)
class _Box:
    x: float
    y: float


def dag_svg(
    steps: Sequence[StepRecord],
    job_link: Callable[[str], str],
    *,
    per_level: int = 30,
    label: str = "workflow graph",
) -> Markup:
    """The graph of ``steps``; ``job_link(record_id)`` is the address of a job's page."""
    if per_level < 1:
        raise ValueError(f"per_level must be at least 1, got {per_level}")
    boxes: dict[str, _Box] = {}
    more: dict[int, tuple[_Box, list[StepRecord]]] = {}
    rows = 1
    layout = levels(steps)
    for column, level in enumerate(layout):
        x = _PAD + column * (_NODE_W + _GAP_X)
        shown = level.steps[:per_level]
        for row, step in enumerate(shown):
            boxes[step.id] = _Box(x, _PAD + row * (_NODE_H + _GAP_Y))
        hidden = list(level.steps[per_level:])
        if hidden:
            more[column] = (_Box(x, _PAD + len(shown) * (_NODE_H + _GAP_Y)), hidden)
        rows = max(rows, len(shown) + (1 if hidden else 0))
    width = 2 * _PAD + len(layout) * _NODE_W + max(len(layout) - 1, 0) * _GAP_X
    height = 2 * _PAD + rows * _NODE_H + (rows - 1) * _GAP_Y
    hidden_at = {step.id: box for box, members in more.values() for step in members}
    parts = [
        f'<svg class="dag" id="dag" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" aria-label="{escape(label)}">',
        '<g class="edges">',
    ]
    drawn: set[tuple[float, float, float, float]] = set()
    for step in steps:
        target = boxes.get(step.id) or hidden_at.get(step.id)
        if target is None:
            continue
        for parent in step.after:
            source = boxes.get(parent) or hidden_at.get(parent)
            if source is None:
                continue
            key = (source.x, source.y, target.x, target.y)
            if key not in drawn:
                drawn.add(key)
                parts.append(_edge(source, target))
    parts.append("</g>")
    for step in steps:
        box = boxes.get(step.id)
        if box is not None:
            parts.append(_node(step, box, job_link))
    for box, hidden in more.values():
        parts.append(_more(box, hidden))
    parts.append("</svg>")
    return Markup("".join(parts))


def _edge(source: _Box, target: _Box) -> str:
    x1, y1 = source.x + _NODE_W, source.y + _NODE_H / 2
    x2, y2 = target.x, target.y + _NODE_H / 2
    bend = (x2 - x1) / 2
    return (
        f'<path class="edge" d="M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} '
        f'{x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"/>'
    )


def _node(step: StepRecord, box: _Box, job_link: Callable[[str], str]) -> str:
    name = step.name if len(step.name) <= _NAME_CHARS else step.name[: _NAME_CHARS - 1] + "…"
    state = step.state.value
    tip = f"{step.name}: {state}" + (f" (job {step.record_id})" if step.record_id else "")
    inner = (
        f'<g class="node {state}" data-step="{escape(step.name)}" data-state="{state}">'
        f"<title>{escape(tip)}</title>"
        f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{_NODE_W}" height="{_NODE_H}" rx="5"/>'
        f'<text x="{box.x + 8:.1f}" y="{box.y + _NODE_H / 2 + 4:.1f}">{escape(name)}</text>'
        "</g>"
    )
    if step.record_id is None:
        return inner
    return f'<a href="{escape(job_link(step.record_id))}" class="node-link">{inner}</a>'


def _more(box: _Box, hidden: list[StepRecord]) -> str:
    counts: dict[str, int] = {}
    for step in hidden:
        counts[step.state.value] = counts.get(step.state.value, 0) + 1
    detail = ", ".join(f"{count} {state}" for state, count in sorted(counts.items()))
    return (
        f'<g class="node more" data-hidden="{len(hidden)}">'
        f"<title>{escape(detail)}</title>"
        f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{_NODE_W}" height="{_NODE_H}" rx="5"/>'
        f'<text x="{box.x + 8:.1f}" y="{box.y + _NODE_H / 2 + 4:.1f}">'
        f"… {len(hidden)} more</text></g>"
    )
