"""The ``dogs`` commands run from a framework's own command line (``manage.py dogs_worker``,
``flask dogs worker``): the framework's settings become the commands' flags where they have
one and the container's defaults where they do not, so the options, checks, messages and exit
codes are those of ``dogs COMMAND`` itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from dogs_core.errors import InvalidOptionError
from dogs_core.jobs import Jobs
from dogs_mongo.settings import DogsSettings

__all__ = ["registry", "run_dogs_command"]

#: The registry a framework command hands to ``dogs``: ``dogs_cli.frameworks:registry``
#: is the MODULE:REGISTRY argument :func:`run_dogs_command` gives (set just before).
registry: Jobs | None = None

#: Container options with a flag of the ``dogs`` commands: given as flags, so a flag the user
#: types after them still wins (the last one counts), and so do the commands' own checks.
_FLAGS: Final = {
    "uri": "--uri",
    "database": "--database",
    "driver": "--driver",
    "records_collection": "--records-collection",
    "history_collection": "--history-collection",
    "controls_collection": "--controls-collection",
    "n_partitions": "--n-partitions",
}


def _flags_of(command: str) -> set[str]:
    import typer.main

    from dogs_cli.app import app

    group = typer.main.get_command(app)
    found = getattr(group, "commands", {}).get(command)
    if found is None:
        raise InvalidOptionError("command", command, "not a dogs command")
    return {flag for parameter in found.params for flag in getattr(parameter, "opts", ())}


def _as_flags(command: str, options: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The options the command has a flag for, as flags; the others, to be given as the
    container's defaults."""
    known = _flags_of(command)
    flags: list[str] = []
    rest: dict[str, Any] = {}
    settings = DogsSettings.from_config(options)
    for name, value in options.items():
        flag = _FLAGS.get(name)
        if flag in known and value is not None:
            flags += [flag, str(value)]
        elif name == "server_selection_timeout" and "--timeout" in known and value is not None:
            timeout = settings.server_selection_timeout
            assert timeout is not None
            flags += ["--timeout", f"{timeout.total_seconds():g}"]
        else:
            rest[name] = value
    return flags, rest


@contextlib.contextmanager
def _registry_given(jobs: Jobs) -> Iterator[str]:
    global registry
    previous, registry = registry, jobs
    try:
        yield f"{__name__}:registry"
    finally:
        registry = previous


def run_dogs_command(
    command: str,
    jobs: Jobs,
    options: Mapping[str, Any],
    args: Sequence[str],
    *,
    prog_name: str,
) -> None:
    """Run ``dogs COMMAND`` (``worker``, ``schedule``) on ``jobs`` with the container options of
    the framework's settings, then the user's ``args``: the same options, checks, messages and
    exit codes as ``dogs COMMAND`` (it raises ``SystemExit`` with the command's code).

    Its ``--help`` and its messages name it ``prog_name`` (``manage.py dogs_worker``) and leave
    out the ``MODULE:REGISTRY`` argument (and ``--app-dir``, where it is imported from), which
    the framework fills itself."""
    from dogs_cli.common import container_defaults

    flags, defaults = _as_flags(command, options)
    group, name = _framework_command(command, prog_name)
    prog, _, _ = prog_name.rpartition(" ")
    with _registry_given(jobs) as spec, container_defaults(defaults):
        group.main(args=[name, spec, *flags, *args], prog_name=prog or prog_name)


def _framework_command(command: str, prog_name: str) -> tuple[Any, str]:
    """The ``dogs`` group holding only ``command``, renamed after the last word of
    ``prog_name`` (so usage lines read ``manage.py dogs_worker [OPTIONS]``, not ``manage.py
    dogs_worker worker [OPTIONS] MODULE:REGISTRY``), its registry argument hidden."""
    import copy

    import typer.main

    from dogs_cli.app import app

    group = typer.main.get_command(app)  # built afresh: changing it changes no other call
    found = copy.copy(getattr(group, "commands", {})[command])
    name = prog_name.rpartition(" ")[2]
    found.name = name
    for parameter in found.params:
        if parameter.metavar == "MODULE:REGISTRY" or parameter.name == "app_dir":
            parameter.hidden = True

    def usage_pieces(ctx: Any) -> list[str]:
        pieces = [found.options_metavar] if found.options_metavar else []
        for parameter in found.get_params(ctx):
            if not getattr(parameter, "hidden", False):
                pieces += parameter.get_usage_pieces(ctx)
        return pieces

    found.collect_usage_pieces = usage_pieces
    group.commands = {name: found}  # type: ignore[attr-defined]
    return group, name
