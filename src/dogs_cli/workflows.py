"""``dogs workflows``: see and steer workflows from the shell.

::

    dogs workflows list [--state running|succeeded|completed|failed|cancelled] [--limit 20] [--json]
    dogs workflows show ID [--json]        # the steps, their states and a text DAG
    dogs workflows cancel ID
    dogs workflows retry ID

Each command is one call of the client (``list_workflows``, ``get_workflow``,
``cancel_workflow``, ``retry_workflow``; docs/workflows.md). Exit codes: 0 when it was done, 1
when the workflow was not found or not in a state for it, 2 for bad input or an unreachable
server (one ``Error:`` line).
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, TypeVar

import typer

from dogs_cli.common import (
    EXIT_NOT_DONE,
    Connection,
    connected_client,
    fail,
    job_id_flag,
    run,
    user_errors,
    with_connection,
)
from dogs_cli.workflow_tables import print_workflow, print_workflows
from dogs_core.domain.workflow_records import (
    WorkflowState,
    WorkflowSummary,
    WorkflowView,
)
from dogs_core.runtime.client._async.client import DogsClient
from dogs_core.runtime.client.calls import MAX_WORKFLOW_PAGE
from dogs_mongo.container import DogsContainer

__all__ = ["workflows_app"]

T = TypeVar("T")

workflows_app = typer.Typer(
    name="workflows",
    help="See and steer workflows: list, show (steps and a text DAG), cancel, retry.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

WorkflowIdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="The workflow's id.", show_default=False)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def _call(container: DogsContainer, body: Callable[[DogsClient], Awaitable[T]]) -> T:
    async def go() -> T:
        async with connected_client(container) as client:
            with user_errors():
                return await body(client)

    return run(go)


def _id(text: str) -> str:
    return job_id_flag("ID", text)


@workflows_app.command("list")
@with_connection()
def list_workflows(
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            help="running, succeeded, completed, failed or cancelled.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        str, typer.Option("--limit", help=f"Workflows to show (1 to {MAX_WORKFLOW_PAGE}).")
    ] = "20",
    skip: Annotated[str, typer.Option("--skip", help="Workflows to skip (newest first).")] = "0",
    as_json: JsonOption = False,
    *,
    connection: Connection,
) -> None:
    """List workflows, newest first, with their steps' counts per state."""
    wanted = None
    if state is not None:
        try:
            wanted = WorkflowState(state)
        except ValueError:
            choices = ", ".join(s.value for s in WorkflowState)
            fail(f"--state {shlex.quote(state)}: expected one of {choices}")
    size = _int("--limit", limit, 1, MAX_WORKFLOW_PAGE)
    offset = _int("--skip", skip, 0, None)
    container = connection.logged_container()

    async def go(client: DogsClient) -> tuple[list[WorkflowSummary], datetime]:
        found = await client.list_workflows(state=wanted, limit=size, skip=offset)
        return found, client.clock.now()

    found, now = _call(container, go)
    print_workflows(found, now, as_json=as_json)


@workflows_app.command("show")
@with_connection()
def show(
    workflow_id: WorkflowIdArgument, as_json: JsonOption = False, *, connection: Connection
) -> None:
    """Show one workflow: its state, each step's state, job id, dependencies and outcome, and
    its graph as text (a level at a time)."""
    workflow_id = _id(workflow_id)
    container = connection.logged_container()

    async def go(client: DogsClient) -> tuple[WorkflowView, datetime]:
        return await client.get_workflow(workflow_id), client.clock.now()

    view, now = _call(container, go)
    print_workflow(view, now, as_json=as_json)


@workflows_app.command("cancel")
@with_connection()
def cancel(workflow_id: WorkflowIdArgument, *, connection: Connection) -> None:
    """Cancel a running workflow: nothing is released any more, its blocked steps are
    cancelled, its pending jobs removed and its running ones told to stop."""
    workflow_id = _id(workflow_id)
    container = connection.logged_container()
    outcome: Any = _call(container, lambda client: client.cancel_workflow(workflow_id))
    if outcome.cancelled:
        typer.echo(
            f"Cancelled workflow {workflow_id} ({outcome.stopped} running or pending jobs stopped)"
        )
        return
    typer.echo(f"Not cancelled: workflow {workflow_id} is {outcome.state.value}")
    raise typer.Exit(EXIT_NOT_DONE)


@workflows_app.command("retry")
@with_connection()
def retry(workflow_id: WorkflowIdArgument, *, connection: Connection) -> None:
    """Run again the failed, skipped and cancelled steps of a workflow that has ended
    (succeeded steps keep their results)."""
    workflow_id = _id(workflow_id)
    container = connection.logged_container()
    outcome: Any = _call(container, lambda client: client.retry_workflow(workflow_id))
    if not outcome.step_ids:
        typer.echo(f"Nothing to retry: every step of workflow {workflow_id} succeeded")
        raise typer.Exit(EXIT_NOT_DONE)
    typer.echo(
        f"Retried workflow {workflow_id}: {len(outcome.step_ids)} steps to run again, "
        f"{outcome.released} released now"
    )


def _int(flag: str, text: str, least: int, most: int | None) -> int:
    try:
        value = int(text)
    except ValueError:
        fail(f"{flag} {shlex.quote(text)}: must be an integer")
    if value < least or (most is not None and value > most):
        upper = "" if most is None else f" and at most {most}"
        fail(f"{flag} {text}: must be at least {least}{upper}")
    return value
