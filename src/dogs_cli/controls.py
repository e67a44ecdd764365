"""``dogs pause`` and ``dogs resume``: stop and restart the claims of a job name, or of every
name, across every Python worker sharing the database; and what ``dogs status`` reads of the
fleet controls (:func:`fleet_view`).

::

    dogs pause NAME [--force] | --all
    dogs resume NAME | --all

Each is one call of :class:`~dogs_core.runtime.client._async.client.DogsClient` (``pause``,
``resume``,
then ``paused`` to say what stays paused). Workers see a change at once through their pause feed
(MongoDB change streams), else within one poll interval; running executions finish. Pausing a
paused name, or resuming one that is not paused, says so and exits 0 (the name is in the state
asked for). Pausing a name that no record and no history row bears fails (exit 2, with the
known names close to it) unless ``--force``. Bad input is one ``Error:`` line and exit code 2.
Node Dogs workers ignore pauses (docs/fleet-controls.md).
"""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

import typer

from dogs_cli.common import (
    Connection,
    connected_client,
    fail,
    run,
    user_errors,
    with_connection,
)
from dogs_cli.output import FleetView
from dogs_core.domain.controls import EVERY_JOB
from dogs_core.runtime.client._async.client import DogsClient

__all__ = ["fleet_view", "pause", "resume"]

NameArgument = Annotated[
    str | None,
    typer.Argument(metavar="[NAME]", help="The job name.", show_default=False),
]
AllOption = Annotated[bool, typer.Option("--all", help="Every job name at once.")]


async def fleet_view(client: DogsClient, now: datetime) -> FleetView:
    """The paused names and, when the store can count them, the slots held per name."""
    paused = await client.paused()
    try:
        held: dict[str, int] | None = await client.store.held_slots(now=now)
    except NotImplementedError:
        held = None
    return FleetView(paused=paused, held_slots=held)


def _target(name: str | None, every: bool, action: str) -> str | None:
    """The job name of ``NAME`` / ``--all`` (``None``: every job), checked."""
    if name is not None and every:
        fail("pass a job NAME or --all, not both")
    if every:
        return None
    if name is None:
        fail(f"pass a job NAME, or --all to {action} every job")
    if not name.strip():
        fail(f"NAME {shlex.quote(name)}: must not be empty")
    if name == EVERY_JOB:
        fail(f"NAME {shlex.quote(name)}: pass --all to {action} every job")
    return name


@dataclass(frozen=True, slots=True)
class _Outcome:
    changed: bool
    paused: frozenset[str]
    has_records: bool


async def _known(client: DogsClient, name: str) -> tuple[bool, list[str]]:
    """Whether any record or history row bears ``name``, and the known names close to it."""
    if (await client.find_jobs(name, limit=1)).jobs:
        return True, []
    if await client.get_executions(name, limit=1):
        return True, []
    names = {row.job_name for row in await client.status()} | set(await client.paused())
    names.discard(EVERY_JOB)
    return False, difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.6)


def _set_paused(
    target: str | None, paused: bool, connection: Connection, *, force: bool = False
) -> _Outcome:
    """Pause or resume ``target`` (``None``: every job); then read what is paused. A name no
    record and no history row bears is refused (a typo would pause nothing that runs) unless
    ``force``."""
    container = connection.logged_container()

    async def go() -> _Outcome:
        async with connected_client(container) as client:
            with user_errors():
                if paused and target is not None and not force:
                    known, close = await _known(client, target)
                    if not known:
                        hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
                        fail(
                            f"NAME {shlex.quote(target)}: no job of that name has records or "
                            f"history here{hint}; nothing paused. Pass --force to pause a name "
                            "before its first job."
                        )
                if paused:
                    changed = await client.pause(target)
                else:
                    changed = await client.resume(target)
                has_records = True
                if paused and changed and target is not None:
                    has_records = bool((await client.find_jobs(target, limit=1)).jobs)
                return _Outcome(changed, await client.paused(), has_records)

    return run(go)


@with_connection(controls=True)
def pause(
    name: NameArgument = None,
    every: AllOption = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Pause a name no record or history row bears (yet)."),
    ] = False,
    *,
    connection: Connection,
) -> None:
    """Stop every Python worker from claiming a job name (or every name, --all): at once with
    change streams, else within one poll interval; running executions finish. A name without
    records or history is refused (a typo?) unless --force. Undo with dogs resume."""
    target = _target(name, every, "pause")
    outcome = _set_paused(target, True, connection, force=force)
    if not outcome.changed:
        typer.echo(
            "Every job was already paused." if target is None else f"{target} was already paused."
        )
        return
    what, it = ("every job", "") if target is None else (target, " it")
    typer.echo(
        f"Paused {what}: Python workers stop claiming{it} at once (within one poll interval "
        "without change streams); running executions finish."
    )
    if not outcome.has_records:
        typer.echo(f"Note: no job records named {target!r} right now.", err=True)


@with_connection(controls=True)
def resume(
    name: NameArgument = None,
    every: AllOption = False,
    *,
    connection: Connection,
) -> None:
    """Let Python workers claim a paused job name again (--all: lift the pause of every job;
    names paused on their own stay paused)."""
    target = _target(name, every, "resume")
    outcome = _set_paused(target, False, connection)
    changed, paused = outcome.changed, outcome.paused
    if target is None:
        typer.echo("Resumed every job." if changed else "There was no pause of every job.")
        alone = sorted(paused - {EVERY_JOB})
        if alone:
            typer.echo(f"Still paused on their own: {', '.join(alone)} (dogs resume NAME).")
        return
    typer.echo(f"Resumed {target}." if changed else f"{target} was not paused.")
    if EVERY_JOB in paused:
        typer.echo(f"Every job is still paused, {target} too (dogs resume --all).")
