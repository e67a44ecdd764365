"""``dogs unlock-all``: release the lock of every job record, for when no worker runs.

::

    dogs unlock-all [--yes]

Without ``--yes`` it asks first: a job still running in a worker may then run twice.
"""

from __future__ import annotations

from typing import Annotated

import typer

from dogs_cli.common import Connection, connected_client, run, with_connection

__all__ = ["unlock_all"]


@with_connection()
def unlock_all(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    *,
    connection: Connection,
) -> None:
    """Release the lock of every job record (only when no worker is running)."""
    container = connection.logged_container()
    if not yes:
        typer.confirm(
            "Release the lock of every job record? Jobs still running in a worker may then run "
            "twice; only do this when no worker is running.",
            abort=True,
        )

    async def go() -> int:
        async with connected_client(container) as client:
            return await client.unlock_all()

    count = run(go)
    typer.echo(f"Unlocked {count} job record(s).")
