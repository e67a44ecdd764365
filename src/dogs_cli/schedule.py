"""``dogs schedule``: schedule one run of an event job from the shell.

::

    dogs schedule myapp.jobs:jobs send_welcome --params '{"user_id": 42}' --run-in 5m
                  [--run-at 2026-01-01T09:00Z] [--priority 5] [--unique-key K]

The registry is imported, so the job's params are checked (JSON, then the job's own model)
before connecting. It prints ``Scheduled <id>`` or ``Duplicate <id>``
(:func:`~dogs_cli.output.print_schedule_outcome`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from dogs_cli.common import (
    AppDirOption,
    Connection,
    NPartitionsOption,
    RegistryArgument,
    connected_client,
    duration,
    fail,
    load_registry,
    priority_flag,
    run,
    setup_logging,
    user_errors,
    when,
    with_connection,
    worker_flag_names,
)
from dogs_cli.output import print_schedule_outcome
from dogs_core.domain.definitions import EventJobDefinition, validate_params
from dogs_core.domain.records import ScheduleOutcome
from dogs_core.domain.tags import validate_tags
from dogs_core.jobs import Jobs

__all__ = ["schedule"]


ParamsOption = Annotated[
    str | None, typer.Option("--params", "-p", help="Params as a JSON object.")
]
RunInOption = Annotated[
    str | None, typer.Option("--run-in", help="Delay, e.g. 90s, 5m, 1h30m (default: now).")
]
RunAtOption = Annotated[
    str | None,
    typer.Option("--run-at", help="ISO 8601 time with a timezone, e.g. 2026-01-01T09:00Z."),
]
PriorityOption = Annotated[
    str | None, typer.Option("--priority", help="Priority, an integer (default: the job's).")
]
UniqueKeyOption = Annotated[
    str | None, typer.Option("--unique-key", help="Schedule only if no record holds this key.")
]


@with_connection()
def schedule(
    registry: RegistryArgument,
    job: Annotated[str, typer.Argument(help="Name of the event job.", show_default=False)],
    params: ParamsOption = None,
    run_in: RunInOption = None,
    run_at: RunAtOption = None,
    priority: PriorityOption = None,
    unique_key: UniqueKeyOption = None,
    n_partitions: NPartitionsOption = 1,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="A tag to find the job by (repeatable).")
    ] = None,
    start_before: Annotated[
        str | None,
        typer.Option("--start-before", help="Discard it if not started within, e.g. 15m."),
    ] = None,
    *,
    connection: Connection,
    app_dir: AppDirOption = Path("."),
) -> None:
    """Schedule one run of an event job; prints 'Scheduled <id>' or 'Duplicate <id>'."""
    setup_logging(connection.log_level)
    jobs = load_registry(registry, app_dir)
    definition = _event_job(jobs, job)
    parsed_params = _parse_params(definition, params)
    chosen_priority = priority_flag(priority)  # checked before connecting, as the params
    moment = when(run_in, run_at)
    if start_before is not None:
        moment["start_before"] = duration("--start-before", start_before)
    if tag:
        with user_errors():
            moment["tags"] = validate_tags(tag, field="--tag")
    flags = worker_flag_names({}, n_partitions)
    container = connection.container(flags, n_partitions=n_partitions)

    async def go() -> ScheduleOutcome:
        async with connected_client(container, jobs) as client:
            with user_errors():
                return await client.schedule(
                    definition,
                    parsed_params,
                    priority=chosen_priority,
                    unique_key=unique_key,
                    **moment,
                )

    print_schedule_outcome(run(go))


def _event_job(jobs: Jobs, name: str) -> EventJobDefinition:
    with user_errors():
        definition = jobs.get(name)
    if not isinstance(definition, EventJobDefinition):
        fail(f"job {name!r} is a recurrent job: only event jobs can be scheduled")
    return definition


def _parse_params(definition: EventJobDefinition, params: str | None) -> object:
    """``--params`` as JSON, checked against the job before connecting."""
    parsed: object = None
    if params is not None:
        try:
            parsed = json.loads(params)
        except json.JSONDecodeError as error:
            fail(f"--params is not valid JSON: {error}")
    with user_errors():
        validate_params(definition, parsed)
    return parsed
