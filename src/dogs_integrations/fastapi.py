"""FastAPI and Starlette: the client opened by the application's lifespan, handed to handlers by
a dependency, and (for a small deployment) workers in the same process.

::

    from fastapi import FastAPI
    from dogs_integrations.fastapi import DogsClientDep, DogsLifespan
    from dogs_mongo import DogsContainer

    dogs = DogsLifespan(DogsContainer(uri=..., database="app"), jobs, run_workers=False)
    app = FastAPI(lifespan=dogs)

    @app.post("/signup")
    async def signup(user_id: int, client: DogsClientDep) -> dict[str, str]:
        outcome = await client.schedule(send_welcome, {"user_id": user_id})
        return {"job": outcome.id}

The lifespan builds the container's async client inside the server's event loop (an
``AsyncMongoClient`` belongs to the loop that first used it), puts it in the lifespan state
(``request.state.dogs_client``, and ``request.state.dogs_workers`` when workers run), stops the
workers with ``grace`` at shutdown (running jobs finish, the rest are released for other
workers) and closes the container's MongoDB clients. With ``run_workers=True`` the jobs of the
registry run in the web process itself: fine for a small deployment; for anything else run
``dogs worker`` processes beside it (see the deployment page).

Inside an application with a lifespan of its own, enter it there::

    @asynccontextmanager
    async def lifespan(app):
        async with dogs(app) as dogs_state:
            yield {**dogs_state, "other": ...}

The lifespan uses Starlette's API only (lifespan state), so a plain Starlette application
takes it too and calls :func:`get_dogs_client` with its request. This module needs the
``fastapi`` extra; nothing else in Dogs imports it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from typing import Annotated, Any

from fastapi import Depends
from starlette.requests import Request

from dogs_core.domain import validation
from dogs_core.errors import DogsError, InvalidOptionError
from dogs_core.jobs import Jobs
from dogs_core.runtime.client._async.client import DogsClient
from dogs_core.runtime.worker.workers import Workers
from dogs_mongo.container import DogsContainer

__all__ = ["DogsClientDep", "DogsLifespan", "DogsNotStartedError", "get_dogs_client"]

logger = logging.getLogger("dogs.fastapi")

#: The keys of the lifespan state.
CLIENT_STATE = "dogs_client"
WORKERS_STATE = "dogs_workers"


class DogsNotStartedError(DogsError, RuntimeError):
    """A handler asked for the Dogs client of an application whose lifespan has not opened it."""


class DogsLifespan:
    """The lifespan of an application that schedules jobs (see the module documentation).

    ``container``
        A :class:`~dogs_mongo.DogsContainer`; its MongoDB clients are closed at shutdown.
    ``jobs``
        The :class:`~dogs_core.Jobs` registry: of the client (scheduling by name) and of the
        workers. Required with ``run_workers``.
    ``run_workers``
        Run the registry's jobs in this process while the application runs.
    ``grace``
        How long running jobs may finish at shutdown (a duration, 30 s by default).
    ``worker_options``
        Options of the workers (``workers_count=8``...), over the container's defaults.
    """

    def __init__(
        self,
        container: DogsContainer,
        jobs: Jobs | None = None,
        *,
        run_workers: bool = False,
        grace: timedelta | float | str = 30,
        **worker_options: Any,
    ) -> None:
        if not hasattr(container, "client") or not hasattr(container, "workers"):
            raise InvalidOptionError("container", container, "must be a dogs_mongo DogsContainer")
        if jobs is not None and not isinstance(jobs, Jobs):
            raise InvalidOptionError("jobs", jobs, "must be a dogs_core.Jobs registry")
        validation.boolean("run_workers", run_workers)
        if run_workers and (jobs is None or len(jobs) == 0):
            raise InvalidOptionError("jobs", jobs, "run_workers=True needs a registry with jobs")
        if worker_options and not run_workers:
            name = sorted(worker_options)[0]
            reason = "a worker option: pass run_workers=True to run workers in this process"
            raise InvalidOptionError(name, worker_options[name], reason)
        self.container = container
        self.jobs = jobs
        self.run_workers = run_workers
        self.grace = validation.duration("grace", grace)
        container.settings().worker_settings(**worker_options)  # a bad option fails now
        self.worker_options = worker_options

    def __call__(self, app: object) -> contextlib.AbstractAsyncContextManager[Mapping[str, Any]]:
        return self._lifespan()

    @contextlib.asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[Mapping[str, Any]]:
        client = self.container.client(self.jobs)
        try:
            if not self.run_workers:
                yield {CLIENT_STATE: client}
                return
            assert self.jobs is not None
            workers: Workers = self.container.workers(self.jobs, **self.worker_options)
            async with workers:
                logger.info("workers started in the web process (%d job(s))", len(self.jobs))
                try:
                    yield {CLIENT_STATE: client, WORKERS_STATE: workers}
                finally:
                    await workers.stop(self.grace)
        finally:
            await self.container.aclose()


def get_dogs_client(request: Request) -> DogsClient:
    """The client the :class:`DogsLifespan` opened (a FastAPI dependency, or call it with a
    Starlette request)."""
    client = getattr(request.state, CLIENT_STATE, None)
    if not isinstance(client, DogsClient):
        raise DogsNotStartedError(
            "no Dogs client in the lifespan state: create the application with "
            "lifespan=DogsLifespan(container, jobs), and use TestClient as a context manager "
            "(with TestClient(app) as client: ...) so that the lifespan runs in tests"
        )
    return client


#: ``client: DogsClientDep`` in a FastAPI handler's signature receives the application's client.
DogsClientDep = Annotated[DogsClient, Depends(get_dogs_client)]
