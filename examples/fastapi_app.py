"""A FastAPI application that schedules jobs, waits for their results, and runs its workers in
the same process (a small deployment).

    python examples/fastapi_app.py                  # answer a few requests in-process, exit
    python examples/fastapi_app.py --uri mongodb://localhost:27017/?replicaSet=rs0
    python examples/fastapi_app.py --serve          # uvicorn on http://127.0.0.1:8000

``DogsLifespan`` opens the container's client inside the server's event loop, starts the
workers (``run_workers=True``) and stops them with a grace at shutdown; ``DogsClientDep`` gives
each handler the client. ``POST /thumbnails`` schedules a job (once per image and width an
hour: a unique key with a window), ``GET /thumbnails/{job_id}?wait=5`` waits up to 5 s for its
result (``client.wait_for``). The in-memory store by default; with ``--uri`` a fresh database,
dropped at the end. See docs/fastapi.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from dogs_core import Duplicate, HistoryStatus, JobContext, Jobs, Unique
from dogs_core.errors import InvalidIdError, JobNotFoundError, WaitTimeoutError
from dogs_integrations.fastapi import DogsClientDep, DogsLifespan
from dogs_mongo import DogsContainer, Example, example_parser, run_blocking_example
from dogs_testing import InMemoryJobStore

jobs = Jobs()


@dataclass
class Thumbnail:
    image: str
    width: int


@jobs.event(max_tries=1)
async def make_thumbnail(params: Thumbnail, ctx: JobContext) -> str:
    if params.width <= 0:
        raise ValueError(f"no such width: {params.width}")
    await anyio.sleep(0.02)  # the resizing
    return f"{params.image} at {params.width}px"


def create_app(container: DogsContainer) -> FastAPI:
    dogs = DogsLifespan(
        container, jobs, run_workers=True, grace=5, workers_count=4, poll_interval=0.5
    )
    app = FastAPI(lifespan=dogs)

    @app.post("/thumbnails")
    async def request_thumbnail(image: str, width: int, client: DogsClientDep) -> dict[str, Any]:
        # The same image and width within an hour is the same job, whether it is still
        # queued or has already run (a unique key alone holds only while the job exists).
        unique = Unique(f"thumb:{image}:{width}", period="1h")
        outcome = await client.schedule(make_thumbnail, Thumbnail(image, width), unique=unique)
        if isinstance(outcome, Duplicate):
            return {"job_id": outcome.existing_id, "new": False}
        return {"job_id": outcome.id, "new": True}

    @app.get("/thumbnails/{job_id}")
    async def thumbnail(job_id: str, client: DogsClientDep, wait: float = 0) -> dict[str, Any]:
        try:
            missing = await client.get_job(job_id) is None
            missing = missing and await client.get_result(job_id) is None
        except InvalidIdError:  # not even an id: no such job either
            raise HTTPException(404, f"no job {job_id}") from None
        if missing:
            raise HTTPException(404, f"no job {job_id}")
        try:
            execution = await client.wait_for(job_id, timeout=wait, poll_interval=0.2)
        except WaitTimeoutError:
            raise HTTPException(202, "not done yet") from None
        except JobNotFoundError:  # deleted meanwhile, without history
            raise HTTPException(404, f"no job {job_id}") from None
        if execution.status is HistoryStatus.SUCCESS:
            return {"status": "done", "thumbnail": execution.result}
        return {"status": "failed", "error": execution.error_message}

    return app


def check(container: DogsContainer) -> None:
    with TestClient(create_app(container)) as http:
        first = http.post("/thumbnails", params={"image": "cat.png", "width": 640}).json()
        again = http.post("/thumbnails", params={"image": "cat.png", "width": 640}).json()
        print(f"POST cat.png 640: new={first['new']}; again: new={again['new']}")
        print(f"the same job both times: {first['job_id'] == again['job_id']}")
        done = http.get(f"/thumbnails/{first['job_id']}", params={"wait": 10}).json()
        print(f"GET its result (waiting up to 10 s): {done}")
        bad = http.post("/thumbnails", params={"image": "cat.png", "width": 0}).json()
        failed = http.get(f"/thumbnails/{bad['job_id']}", params={"wait": 30}).json()
        print(f"width 0: {failed}")
        missing = http.get("/thumbnails/no-such-job", params={"wait": 10})
        print(f"GET an unknown job: {missing.status_code}")
    print("lifespan over: workers stopped, clients closed")


def run(example: Example) -> None:
    if example.args.serve:
        import uvicorn

        uvicorn.run(create_app(example.container), host="127.0.0.1", port=8000)
    else:
        check(example.container)


def main(argv: Sequence[str] | None = None) -> None:
    parser = example_parser("Dogs in a FastAPI application")
    parser.add_argument("--serve", action="store_true", help="serve with uvicorn on :8000")
    # The async driver: the app's lifespan runs the workers in the event loop of the server.
    run_blocking_example(
        run, argv, name="fastapi", memory=InMemoryJobStore, parser=parser, driver="async"
    )


if __name__ == "__main__":
    main()
