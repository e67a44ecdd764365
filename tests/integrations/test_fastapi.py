"""dogs_integrations.fastapi with FastAPI's and Starlette's test clients over the in-memory store:
the lifespan's client in a handler, workers in the process, a plain Starlette application, and
the bad inputs. The example (examples/fastapi_app.py) runs in tests/test_examples.py, also on
the real mongod."""

from __future__ import annotations

import inspect
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from dogs_core import JobContext, Jobs, Scheduled
from dogs_core.errors import InvalidOptionError
from dogs_integrations.fastapi import (
    DogsClientDep,
    DogsLifespan,
    DogsNotStartedError,
    get_dogs_client,
)
from dogs_mongo import DogsContainer
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@jobs.event
async def ping(params: dict[str, Any] | None, ctx: JobContext) -> str:
    return "pong"


def container() -> DogsContainer:
    return DogsContainer(store=InMemoryJobStore())


def test_a_handler_gets_the_client_and_the_workers_run_in_process() -> None:
    app = FastAPI(lifespan=DogsLifespan(container(), jobs, run_workers=True, poll_interval=0.1))
    seen: list[object] = []

    @app.post("/ping")
    async def schedule_ping(client: DogsClientDep) -> dict[str, Any]:
        seen.append(client)
        outcome = await client.schedule(ping)
        assert isinstance(outcome, Scheduled)
        done = await client.wait_for(outcome.id, timeout=10)
        return {"result": done.result}

    @app.get("/state")
    async def state(request: Request) -> dict[str, bool]:
        seen.append(get_dogs_client(request))
        return {"running": request.state.dogs_workers.running}

    with TestClient(app) as http:
        assert http.get("/state").json() == {"running": True}
        assert http.post("/ping").json() == {"result": "pong"}, "run by the in-process workers"
        assert http.post("/ping").json() == {"result": "pong"}
    assert len(seen) == 3
    assert seen[0] is seen[1] is seen[2], "one client for the application's lifetime"


def test_a_starlette_application_takes_the_lifespan() -> None:
    async def count(request: Request) -> JSONResponse:
        client = get_dogs_client(request)
        await client.schedule(ping)
        return JSONResponse({"jobs": len(await client.find_jobs(ping))})

    app = Starlette(routes=[Route("/", count)], lifespan=DogsLifespan(container(), jobs))
    with TestClient(app) as http:
        assert http.get("/").json() == {"jobs": 1}
        assert http.get("/").json() == {"jobs": 2}


def test_without_the_lifespan_the_handler_is_told_why() -> None:
    app = FastAPI()

    @app.get("/")
    async def handler(client: DogsClientDep) -> None:
        raise AssertionError("not reached")

    with pytest.raises(DogsNotStartedError, match="lifespan=DogsLifespan"):
        TestClient(app).get("/")


@pytest.mark.parametrize(
    ("arguments", "options", "message"),
    [
        ((object(),), {}, "container=<object object at"),
        ((container(), "jobs"), {}, "jobs='jobs': must be a dogs_core.Jobs registry"),
        ((container(),), {"run_workers": True}, "jobs=None: run_workers=True needs a registry"),
        ((container(), jobs), {"workers_count": 4}, "workers_count=4: a worker option: pass"),
        ((container(), jobs), {"run_workers": True, "workers_count": 0}, "workers_count=0: must"),
        ((container(), jobs), {"run_workers": True, "graze": 1}, "graze=1: unknown worker option"),
        ((container(), jobs), {"grace": "soon"}, "grace='soon'"),
    ],
)
def test_bad_input_names_the_argument(
    arguments: tuple[Any, ...], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidOptionError, match=message.replace("(", r"\(")):
        DogsLifespan(*arguments, **options)


def _handler_block(source: str, route: str) -> str:
    """The lines of the handler under ``route`` in ``source``, up to the blank line after it,
    without their indentation."""
    start = source.rindex("\n", 0, source.index(route)) + 1
    return textwrap.dedent(source[start:].split("\n\n")[0])


def test_the_pages_snippet_is_the_examples_handler() -> None:
    """docs/fastapi.md shows the example's handlers, which answer a job still due 202 at
    ``wait=0`` (``WaitTimeoutError``) and an unknown id 404 (``JobNotFoundError``), not 500."""
    from examples import fastapi_app

    source = inspect.getsource(fastapi_app.create_app)
    page = (Path(__file__).resolve().parents[2] / "docs" / "fastapi.md").read_text()
    for route in ('@app.post("/thumbnails")', '@app.get("/thumbnails/{job_id}")'):
        assert _handler_block(source, route) in page, f"docs/fastapi.md differs at {route}"
    box = DogsContainer(store=InMemoryJobStore())
    with TestClient(fastapi_app.create_app(box)) as http:
        later = http.portal.call(  # type: ignore[union-attr]
            lambda: box.client().schedule(
                fastapi_app.make_thumbnail, fastapi_app.Thumbnail("dog.png", 64), run_in="1h"
            )
        )
        assert isinstance(later, Scheduled)
        running = http.get(f"/thumbnails/{later.id}")
        assert (running.status_code, running.json()) == (202, {"detail": "not done yet"})
        nobody = str(uuid.uuid4())
        unknown = http.get(f"/thumbnails/{nobody}")
        assert (unknown.status_code, unknown.json()) == (404, {"detail": f"no job {nobody}"})
