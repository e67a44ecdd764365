"""The ``dogs`` command: the root Typer app, ``--version``, and one command group per module.

::

    dogs worker myapp.jobs:jobs --workers-count 16         # dogs_cli.worker
    dogs schedule myapp.jobs:jobs send_welcome --params '{"user_id": 42}' --run-in 5m
                                                           # dogs_cli.schedule
    dogs status [--json]                                   # dogs_cli.status
    dogs jobs list|show|cancel|retry|reschedule|delete ... # dogs_cli.jobs
    dogs jobs logs ID [--follow] [--json]                  # dogs_cli.logs
    dogs history [--name send_welcome] [--status error] [--param user.id=42] [--json]
                                                           # dogs_cli.finding
    dogs errors [--window 1h], dogs find ID_OR_UNIQUE_KEY
    dogs workflows list|show|cancel|retry ...              # dogs_cli.workflows
    dogs pause NAME | --all, dogs resume NAME | --all      # dogs_cli.controls
    dogs stats [--name NAME] [--window 1h] [--json]        # dogs_cli.stats
    dogs archive --older-than 30d [--dry-run] [--json]     # dogs_cli.archive
    dogs schedules list|show|set|pause|resume|delete ...   # dogs_cli.schedules
    dogs dashboard [--host H] [--port N] [--read-only]     # dogs_cli.dashboard
    dogs unlock-all [--yes]                                # dogs_cli.unlock
    dogs mongod [--dbpath DIR] [--port N]                  # a local development server
    dogs workers list|show|quiet|stop ...                  # dogs_cli.workers
    dogs bulk retry|cancel|reschedule|delete|resume ...    # dogs_cli.bulk
    dogs audit [--action A] [--actor U] [--job-id ID]      # dogs_cli.audit
    dogs --version

The MongoDB URI comes from ``--uri`` or ``$DOGS_MONGODB_URI``; the database from ``--database``,
``$DOGS_MONGODB_DATABASE`` or the URI path. Bad input (a registry that does not import, an unknown
job, bad JSON or durations, an unreachable server) ends with a one-line message and exit code 2.

What every command shares (the database options, the errors, the connection) is in
:mod:`dogs_cli.common`; what the commands print is formatted in
:mod:`dogs_cli.output` and :mod:`dogs_cli.tables`. This module only wires the
commands together, so no command module imports another's commands.
"""

from __future__ import annotations

import importlib.metadata
from typing import Annotated

import typer

from dogs_cli.archive import archive
from dogs_cli.audit import audit
from dogs_cli.bulk import bulk_app
from dogs_cli.common import OneLineErrors
from dogs_cli.controls import pause, resume
from dogs_cli.dashboard import dashboard
from dogs_cli.finding import errors, find, history
from dogs_cli.jobs import jobs_app
from dogs_cli.logs import logs
from dogs_cli.mongod import mongod
from dogs_cli.schedule import schedule
from dogs_cli.schedules import schedules_app
from dogs_cli.stats import stats
from dogs_cli.status import status
from dogs_cli.unlock import unlock_all
from dogs_cli.worker import worker
from dogs_cli.workers import workers_app
from dogs_cli.workflows import workflows_app

__all__ = ["app", "main", "package_version"]

#: The distribution that installs the ``dogs`` command.
DISTRIBUTION = "dogs-py"

app = typer.Typer(
    name="dogs",
    cls=OneLineErrors,
    help="Dogs for Python: run workers, schedule jobs and inspect a Dogs job database.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def package_version() -> str:
    """The installed version of Dogs for Python (its package metadata)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"dogs {package_version()}")
        raise typer.Exit()


@app.callback()
def _dogs(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the installed version of Dogs for Python and exit.",
        ),
    ] = False,
) -> None:
    """Dogs for Python: run workers, schedule jobs and inspect a Dogs job database."""


# In the order `dogs --help` lists them.
app.command("worker")(worker)
app.command("schedule")(schedule)
app.command("status")(status)
jobs_app.command("logs")(logs)
app.add_typer(jobs_app, name="jobs")
app.command("history")(history)
app.command("errors")(errors)
app.command("find")(find)
app.add_typer(workflows_app, name="workflows")
app.command("pause")(pause)
app.command("resume")(resume)
app.command("stats")(stats)
app.command("archive")(archive)
app.add_typer(schedules_app, name="schedules")
app.command("dashboard")(dashboard)
app.command("unlock-all")(unlock_all)
app.command("mongod")(mongod)
# the operator's console: the fleet, bulk actions, the audit trail
app.add_typer(workers_app, name="workers")
app.add_typer(bulk_app, name="bulk")
app.command("audit")(audit)


def main() -> None:
    """The ``dogs`` console script."""
    app(prog_name="dogs")
