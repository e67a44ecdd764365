"""Flask: an extension with the configuration in ``app.config``, a blocking client per
application, and the workers run through Flask's command line.

::

    from flask import Flask
    from dogs_integrations.flask import Dogs

    dogs = Dogs()

    def create_app() -> Flask:
        app = Flask(__name__)
        app.config["DOGS_URI"] = "mongodb://localhost/?replicaSet=rs0"
        app.config["DOGS_DATABASE"] = "app"
        app.config["DOGS_JOBS"] = "myapp.jobs:jobs"
        dogs.init_app(app)
        return app

    @bp.post("/signup")
    def signup():
        dogs.client.schedule(send_welcome, {"user_id": user.id})

and ``flask --app myapp dogs worker --workers-count 8`` runs the workers (``flask dogs
schedule JOB --params '{...}'`` schedules one run): the options, checks, messages and exit
codes of ``dogs worker`` and ``dogs schedule``, with the connection of the configuration.

Configuration: ``DOGS_JOBS`` is the registry (a :class:`~dogs_core.Jobs`, or its
``"module:attribute"`` path); every other ``DOGS_<OPTION>`` key is the container option
``<option>`` (``DOGS_URI``, ``DOGS_DATABASE``, ``DOGS_N_PARTITIONS``, ``DOGS_WORKERS_COUNT``,
``DOGS_OPERATION_TIMEOUT``...; see :mod:`dogs_mongo.container`). ``init_app`` checks them: a
wrong, unknown or missing one raises :class:`~dogs_integrations.frameworks.SettingsError`
naming the key.

``dogs.client`` is the :class:`~dogs_core.BlockingDogsClient` of the current application, made
at its first use: each call runs in the request's thread on PyMongo's ``MongoClient`` (one
``schedule()`` is one insert). ``dogs.close(app)`` closes its MongoDB client (at shutdown, in
tests).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import click
from flask import Flask, current_app, has_app_context
from flask.cli import AppGroup

from dogs_cli.frameworks import run_dogs_command
from dogs_core.errors import DogsError
from dogs_core.jobs import Jobs
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_integrations.frameworks import SettingsError, container_options, import_registry
from dogs_mongo.container import DogsContainer

__all__ = ["Dogs", "DogsNotInitializedError", "SettingsError"]

EXTENSION = "dogs"
PREFIX = "DOGS_"
JOBS_KEY = "DOGS_JOBS"


class DogsNotInitializedError(DogsError, RuntimeError):
    """``dogs.client`` was used outside an application context, or in an application that
    ``init_app`` was not called with."""


@dataclass
class _AppState:
    """What one application holds in ``app.extensions["dogs"]``."""

    options: dict[str, Any]
    jobs: Jobs
    overrides: dict[str, Any]
    lock: threading.Lock = field(default_factory=threading.Lock)
    container: DogsContainer | None = None
    client: BlockingDogsClient | None = None

    def the_container(self) -> DogsContainer:
        with self.lock:
            if self.container is None:
                self.container = DogsContainer(**self.options, **self.overrides)
            return self.container

    def the_client(self) -> BlockingDogsClient:
        container = self.the_container()
        with self.lock:
            if self.client is None:
                self.client = container.blocking_client(self.jobs)
            return self.client


def _setting(option: str) -> str:
    return f"{PREFIX}{option.upper()}"


class Dogs:
    """The Flask extension (see the module documentation).

    ``jobs`` overrides ``DOGS_JOBS``.
    """

    def __init__(self, app: Flask | None = None, *, jobs: Jobs | str | None = None) -> None:
        self._jobs = jobs
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask, **overrides: Any) -> None:
        """Read and check the ``DOGS_*`` configuration of ``app`` and add the ``flask dogs``
        commands. ``overrides`` are provider overrides of the application's container
        (``store=...``: another store, in tests)."""
        config = app.config.get_namespace(PREFIX, lowercase=False)
        spec = self._jobs if self._jobs is not None else config.pop("JOBS", None)
        config.pop("JOBS", None)
        if spec is None:
            raise SettingsError(
                JOBS_KEY, None, "missing: the Jobs registry, e.g. 'myapp.jobs:jobs'"
            )
        jobs = import_registry(spec, JOBS_KEY)
        options = container_options({key.lower(): value for key, value in config.items()}, _setting)
        if "uri" not in options and "store" not in overrides:
            raise SettingsError(_setting("uri"), None, "missing: the MongoDB connection string")
        app.extensions[EXTENSION] = _AppState(options, jobs, overrides)
        app.cli.add_command(_commands())

    def _state(self, app: Flask | None = None) -> _AppState:
        if app is None and not has_app_context():
            raise DogsNotInitializedError(
                "no Flask application here: use dogs.client in a request, a CLI command or "
                "'with app.app_context():' (or call dogs.init_app(app) first)"
            )
        target = app if app is not None else current_app
        state = target.extensions.get(EXTENSION)
        if not isinstance(state, _AppState):
            raise DogsNotInitializedError(
                f"Dogs is not set up on the Flask application {target.name!r}: call "
                "dogs.init_app(app) in its factory"
            )
        return state

    @property
    def client(self) -> BlockingDogsClient:
        """The blocking client of the current application."""
        return self._state().the_client()

    def container(self, app: Flask | None = None) -> DogsContainer:
        """The container of ``app`` (the current application by default)."""
        return self._state(app).the_container()

    def jobs(self, app: Flask | None = None) -> Jobs:
        return self._state(app).jobs

    def close(self, app: Flask | None = None) -> None:
        """Close the MongoDB client of ``app``'s container; a later use opens a new one."""
        state = self._state(app)
        with state.lock:
            container, state.container, state.client = state.container, None, None
        if container is not None:
            container.close()


_PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


def _run(command: str, args: Sequence[str]) -> None:
    state = current_app.extensions.get(EXTENSION)
    if not isinstance(state, _AppState):
        raise click.ClickException("Dogs is not set up on this application: call dogs.init_app")
    run_dogs_command(command, state.jobs, state.options, args, prog_name=f"flask dogs {command}")


def _commands() -> AppGroup:
    group = AppGroup("dogs", help="Dogs for Python: run workers, schedule jobs.")

    @group.command(context_settings=_PASS_THROUGH, add_help_option=False)
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def worker(args: tuple[str, ...]) -> None:
        """Run workers for the jobs of DOGS_JOBS (the options of `dogs worker`; --help)."""
        _run("worker", args)

    @group.command(context_settings=_PASS_THROUGH, add_help_option=False)
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def schedule(args: tuple[str, ...]) -> None:
        """Schedule one run of a job of DOGS_JOBS (the options of `dogs schedule`; --help)."""
        _run("schedule", args)

    return group
