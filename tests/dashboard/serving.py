"""The dashboard served by uvicorn in a background thread over a real mongod, for the
browser tests: the thread owns its event loop, the container's async client and the app."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import uvicorn

from dogs_core import DogsClient
from dogs_dashboard import create_app
from dogs_mongo.container import DogsContainer

Seed = Callable[[DogsContainer, DogsClient], Awaitable[dict[str, Any]]]
Served = TypeVar("Served", bound="ServedDashboard")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class ServedDashboard:
    """``url`` answers once :meth:`start` returns; ``seeded`` is what the seed returned."""

    uri: str
    database: str
    seed: Seed
    options: dict[str, Any] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    seeded: dict[str, Any] = field(default_factory=dict)
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None
    _ready: threading.Event = field(default_factory=threading.Event)
    _error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180) -> None:
        self._thread = threading.Thread(target=self._run, name="dashboard", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the dashboard did not start")
        if self._error is not None:
            raise RuntimeError("the dashboard did not start") from self._error

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        try:
            anyio.run(self._serve, backend="asyncio")
        except BaseException as error:
            self._error = error
            self._ready.set()

    async def _serve(self) -> None:
        container = DogsContainer(uri=self.uri, database=self.database)
        try:
            client = container.client()
            self.seeded = await self.seed(container, client)
            app = create_app(client, source=self.uri, **self.options)
            config = uvicorn.Config(
                app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
            )
            self._server = uvicorn.Server(config)
            async with anyio.create_task_group() as group:
                group.start_soon(self._server.serve)
                while not self._server.started:  # noqa: ASYNC110 - uvicorn's own flag
                    await anyio.sleep(0.02)
                self._ready.set()
        finally:
            self._ready.set()
            await container.aclose()


@contextlib.contextmanager
def serving(dashboard: Served) -> Iterator[Served]:
    """``dashboard`` started for the ``with`` block, stopped after it."""
    dashboard.start()
    try:
        yield dashboard
    finally:
        dashboard.stop()
