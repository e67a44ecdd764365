"""``dogs audit``: the audit trail of operator actions, newest first.

::

    dogs audit [--limit 20] [--action cancel] [--actor alice] [--job-id ID] [--chunks]
               [--before ID] [--json]

Every operator action (cancel, retry, reschedule, delete, bulk actions, pause, resume, archive,
a worker's quiet or stop), from the CLI (the OS user), the dashboard (its user) or the API, is
one entry: when, who and from where, what, on what, how many. ``--job-id`` lists what was done
to one job (the chunks of bulk actions that removed it included).
"""

from __future__ import annotations

import shlex
from typing import Annotated

import typer

from dogs_cli.common import (
    Connection,
    connected_client,
    fail,
    job_id_flag,
    run,
    user_errors,
    with_connection,
)
from dogs_cli.console_tables import print_audit
from dogs_core.domain.audit import AUDIT_PAGE_SIZE, AuditAction, AuditEntry

__all__ = ["audit"]


@with_connection()
def audit(
    limit: Annotated[
        str, typer.Option("--limit", help=f"Entries (1 to {AUDIT_PAGE_SIZE}).")
    ] = "20",
    action: Annotated[
        str | None,
        typer.Option("--action", help="Only this action, e.g. cancel, bulk_retry, pause."),
    ] = None,
    actor: Annotated[str | None, typer.Option("--actor", help="Only this user's actions.")] = None,
    job_id: Annotated[
        str | None, typer.Option("--job-id", help="What was done to this job.")
    ] = None,
    chunks: Annotated[
        bool, typer.Option("--chunks", help="List the chunks of bulk deletes and cancels too.")
    ] = False,
    before: Annotated[
        str | None, typer.Option("--before", help="The entries before this id (the next page).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    *,
    connection: Connection,
) -> None:
    """The audit trail of operator actions, newest first."""
    try:
        size = int(limit)
    except ValueError:
        fail(f"--limit {shlex.quote(limit)}: must be an integer")
    if not 1 <= size <= AUDIT_PAGE_SIZE:
        fail(f"--limit {limit}: must be between 1 and {AUDIT_PAGE_SIZE}")
    if action is not None and action not in {one.value for one in AuditAction}:
        choices = ", ".join(one.value for one in AuditAction)
        fail(f"--action {shlex.quote(action)}: expected one of {choices}")
    job_id = job_id_flag("--job-id", job_id)
    before = job_id_flag("--before", before)
    container = connection.logged_container()

    async def go() -> list[AuditEntry]:
        async with connected_client(container) as client:
            with user_errors():
                return await client.audit_log(
                    limit=size,
                    before=before,
                    action=action,
                    actor=actor,
                    job_id=job_id,
                    top_level=not chunks,
                )

    entries = run(go)
    more = None
    if len(entries) == size:
        flags = {"--action": action, "--actor": actor, "--job-id": job_id}
        given = [f"{flag} {shlex.quote(value)}" for flag, value in flags.items() if value]
        given += ["--chunks"] if chunks else []
        more = " ".join(["dogs audit", *given, "--limit", str(size), "--before", entries[-1].id])
    print_audit(entries, as_json=as_json, more=more)
