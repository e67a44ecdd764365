"""``dogs status``: the counts of every job name, the paused names and the slots held.

::

    dogs status [--json]

Per job name: due, later, running, held, stale and failed counts and the oldest job waiting to
run (:meth:`~dogs_core.runtime.client._async.client.DogsClient.fleet_status`: a job claimed but not
admitted by its fleet limit counts as held); then what the fleet controls hold
(:func:`~dogs_cli.controls.fleet_view`). :func:`~dogs_cli.output.print_status`
prints them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from dogs_cli.common import Connection, connected_client, run, with_connection
from dogs_cli.controls import fleet_view
from dogs_cli.output import FleetView, print_status
from dogs_core.domain.records import NameStatus

__all__ = ["status"]


@with_connection(controls=True)
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    *,
    connection: Connection,
) -> None:
    """Per job name: due, later, running, held (by a fleet limit), stale and failed counts, and
    the oldest job waiting to run (due, held, or stale: waiting for recovery); the paused names
    and the concurrency slots held."""
    container = connection.logged_container()

    async def go() -> tuple[list[NameStatus], datetime, FleetView]:
        async with connected_client(container) as client:
            now = client.clock.now()
            return await client.fleet_status(), now, await fleet_view(client, now)

    statuses, now, fleet = run(go)
    records = connection.records_collection
    print_status(statuses, now, records_collection=records, as_json=as_json, fleet=fleet)
