"""Query plans read back as text: what ``explain`` said, in a form a table or a check can use."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["plan_indexes", "plan_tree", "stage_chain"]


def _children(plan: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    children = list(plan.get("inputStages", []))
    if "inputStage" in plan:
        children.insert(0, plan["inputStage"])
    return children


def plan_tree(plan: Mapping[str, Any]) -> str:
    """A winning plan as ``STAGE > STAGE > IXSCAN[index]`` (branches in parentheses)."""
    if "queryPlan" in plan:  # the slot-based engine wraps the classic tree
        plan = plan["queryPlan"]
    stage = str(plan.get("stage", "?"))
    if "indexName" in plan:
        stage += f"[{plan['indexName']}]"
    children = _children(plan)
    if not children:
        return stage
    if len(children) == 1:
        return f"{stage} > {plan_tree(children[0])}"
    return f"{stage} > (" + " | ".join(plan_tree(child) for child in children) + ")"


def plan_indexes(plan: Mapping[str, Any]) -> Iterator[str]:
    """The names of the indexes a plan scans, in plan order (repeats included)."""
    if "queryPlan" in plan:
        plan = plan["queryPlan"]
    if "indexName" in plan:
        yield str(plan["indexName"])
    for child in _children(plan):
        yield from plan_indexes(child)


def stage_chain(plan: Mapping[str, Any]) -> str:
    """A plan's stages as ``LIMIT > FETCH > SORT_MERGE > 200×IXSCAN``: where the plan branches,
    one branch stands for all (a merge of one index scan per job name reads short)."""
    stages = []
    node: Mapping[str, Any] | None = plan
    while node is not None:
        stages.append(str(node.get("stage")))
        children = node.get("inputStages") or ([node["inputStage"]] if "inputStage" in node else [])
        if len(children) > 1:
            stages.append(f"{len(children)}×{stage_chain(children[0])}")
            break
        node = children[0] if children else None
    return " > ".join(stages)
