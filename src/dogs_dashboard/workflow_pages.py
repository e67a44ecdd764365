"""The dashboard's workflow pages (GET only): the workflows, newest first, by state; and one
workflow with its graph drawn (:mod:`dogs_dashboard.dag`), each step's state and a link to its
job's page. Both read through the client (``list_workflows``, ``get_workflow``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from dogs_core.domain.workflow_records import WorkflowState
from dogs_core.errors import DogsError, MissingRoleError, WorkflowNotFoundError
from dogs_dashboard.context import Dashboard
from dogs_dashboard.dag import dag_svg

__all__ = ["WORKFLOW_STATES", "workflow_list", "workflow_page"]

#: The states the list can be filtered by (in the order of the tabs).
WORKFLOW_STATES = tuple(state.value for state in WorkflowState)
_PAGE = 50


async def workflow_list(dash: Dashboard, request: Request) -> Response:
    """The workflows, newest first (of one state), with their steps' counts."""
    state = request.query_params.get("state") or None
    if state is not None and state not in WORKFLOW_STATES:
        choices = ", ".join(WORKFLOW_STATES)
        return dash.error(request, 400, f"state {state!r}: expected one of {choices}")
    skip_text = request.query_params.get("skip") or "0"
    if not skip_text.isdigit():
        return dash.error(request, 400, f"skip {skip_text!r}: expected a number")
    try:
        found = await dash.client.list_workflows(state=state, limit=_PAGE, skip=int(skip_text))
    except MissingRoleError as error:
        return dash.error(request, 404, str(error))
    except DogsError as error:
        return dash.error(request, 400, str(error))
    return dash.render(
        request,
        "workflows.html",
        "_workflows_data.html",
        workflows=found,
        state=state,
        states=WORKFLOW_STATES,
        skip=int(skip_text),
        page_size=_PAGE,
    )


async def workflow_page(dash: Dashboard, request: Request) -> Response:
    """One workflow: its state, its graph, its steps."""
    workflow_id = str(request.path_params["workflow_id"])
    try:
        view = await dash.client.get_workflow(workflow_id)
    except (WorkflowNotFoundError, MissingRoleError) as error:
        return dash.error(request, 404, str(error))
    except DogsError as error:
        return dash.error(request, 400, str(error))
    names = {step.id: step.name for step in view.steps}
    graph = dag_svg(
        view.steps,
        lambda record_id: dash.link(request, f"/jobs/{record_id}"),
        label=f"graph of workflow {view.workflow.name or view.id}",
    )
    return dash.render(
        request,
        "workflow.html",
        "_workflow_data.html",
        view=view,
        counts=view.counts(),
        names=names,
        graph=graph,
    )
