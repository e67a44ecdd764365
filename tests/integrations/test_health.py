"""The worker's health endpoints (dogs_core.runtime.worker.health) served by real HTTP on a free
port:
liveness and readiness over the in-memory store, a store that fails or hangs, draining, and
the bad inputs (a port in use, a port out of range). ``dogs worker --health-port`` with mongod
stopped and started again under it is in tests/integrations/test_health_cli.py."""

from __future__ import annotations

import json
import socket
from datetime import datetime
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from dogs_core.errors import InvalidOptionError, StoreUnavailableError
from dogs_core.jobs import Jobs
from dogs_core.runtime import DogsClient, JobContext, Workers
from dogs_core.runtime.worker.health import serve_health
from dogs_testing.memory import InMemoryJobStore

pytestmark = pytest.mark.anyio

jobs = Jobs()


@jobs.event
async def nap(params: dict[str, Any] | None, ctx: JobContext) -> None:
    await anyio.sleep(float((params or {}).get("seconds", 0)))


class FlakyStore(InMemoryJobStore):
    """An in-memory store whose server_time fails or hangs on demand."""

    mode = "ok"

    async def server_time(self) -> datetime | None:
        if self.mode == "fail":
            raise StoreUnavailableError("no server answered: connection refused")
        if self.mode == "hang":
            await anyio.sleep(60)
        return None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, Any]]:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(f"{method} {path} HTTP/1.1\r\nHost: probe\r\n\r\n".encode())
        received = b""
        with anyio.fail_after(10):
            while True:
                try:
                    received += await stream.receive()
                except anyio.EndOfStream:
                    break
    head, _, body = received.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    return status, json.loads(body) if body else {}


async def until_ready(port: int) -> None:
    """Until /readyz answers 200 (the workers set up the store first)."""
    with anyio.fail_after(10):
        while (await get(port, "/readyz"))[0] != 200:  # noqa: ASYNC110 - polling what is tested
            await anyio.sleep(0.01)


async def test_liveness_and_readiness_follow_the_workers() -> None:
    store = FlakyStore()
    workers = Workers(store, jobs, poll_interval=0.05)
    async with serve_health(workers, port=0, host="127.0.0.1", store_timeout=0.2) as (_, port):
        status, body = await get(port, "/healthz")
        assert (status, body["phase"]) == (200, "starting"), "alive: about to start"
        assert (await get(port, "/readyz"))[0] == 503
        async with workers:
            await until_ready(port)
            status, body = await get(port, "/healthz")
            assert (status, body["status"], body["phase"]) == (200, "ok", "running")
            status, body = await get(port, "/readyz")
            assert status == 200, body
            assert body["change_feed"] == "open", "the in-memory store has a change feed"
            assert body["store"] == "answering"

            store.mode = "fail"
            status, body = await get(port, "/readyz")
            assert status == 503
            assert body["reason"] == (
                "the database is unreachable: StoreUnavailableError: no server answered: "
                "connection refused"
            )
            assert (await get(port, "/healthz"))[0] == 200, "an outage is not a liveness failure"

            store.mode = "hang"
            status, body = await get(port, "/readyz")
            assert (status, body["reason"]) == (503, "the database did not answer within 0.2s")

            store.mode = "ok"
            assert (await get(port, "/readyz"))[0] == 200
            assert (await get(port, "/metrics"))[0] == 404
            assert (await get(port, "/healthz", "POST"))[0] == 405
            assert (await get(port, "/healthz", "HEAD"))[0] == 200

            await DogsClient(store, jobs).schedule(nap, {"seconds": 0.3})
            with anyio.fail_after(10):
                while workers.running_executions == 0:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            async with anyio.create_task_group() as group:
                group.start_soon(workers.stop, 5)
                await anyio.lowlevel.checkpoint()
                status, body = await get(port, "/readyz")
                assert (status, body["reason"]) == (503, "draining: a stop was requested")
                assert (await get(port, "/healthz"))[0] == 200, "draining is alive"
        with anyio.fail_after(5):
            while (await get(port, "/healthz"))[0] == 200:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        status, body = await get(port, "/healthz")
        assert (status, body["reason"]) == (503, "the scheduler loops have stopped")


async def test_polling_by_choice_is_ready() -> None:
    workers = Workers(InMemoryJobStore(), jobs, poll_interval=0.05, watch_changes=False)
    async with serve_health(workers, port=0, host="127.0.0.1") as (_, port), workers:
        await until_ready(port)
        status, body = await get(port, "/readyz")
        assert (status, body["change_feed"]) == (200, "polling by choice (watch_changes off)")
        await workers.stop()


async def test_a_port_in_use_is_named() -> None:
    workers = Workers(InMemoryJobStore(), jobs)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InvalidOptionError) as caught:
            async with serve_health(workers, port=port, host="127.0.0.1"):
                pass
    assert caught.value.field == "health_port"
    assert str(caught.value) == (
        f"health_port={port}: cannot listen on 127.0.0.1:{port}: the address is already in use"
    )
    with pytest.raises(InvalidOptionError, match="health_port=70000: must be a port number"):
        async with serve_health(workers, port=70000):
            pass
