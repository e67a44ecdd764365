"""Runner tasks on asyncio's real event loop.

The runtime suite (``tests/runtime``) runs on trio under a virtual clock. Executions run on
reused runner tasks through a coroutine trampoline (``dogs_core.runtime.plumbing.loop``), so
this
module checks the same path on asyncio too: cancellation at shutdown, a shielded cleanup, the
released lock and context isolation. asyncio has no virtual clock, so it waits a few tens of
milliseconds of real time; nothing here asserts a duration.
"""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
import pytest

from dogs_core import DogsClient, JobContext, Jobs, Workers
from dogs_testing import InMemoryJobStore

Params = dict[str, Any] | None

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_shutdown_cancellation_and_shielded_cleanup_on_a_runner(backend: str) -> None:
    """On both event loops: a handler on a runner task is cancelled at the end of the grace
    period, its shielded cleanup still runs, the lock is released, and a variable it set does
    not leak to the next job."""

    async def main() -> None:
        store = InMemoryJobStore()
        jobs = Jobs()
        started = anyio.Event()
        cleaned: list[bool] = []
        seen: list[str] = []
        after_ran = anyio.Event()

        @jobs.event(priority=200)
        async def forever(params: Params, ctx: JobContext) -> None:
            request_id.set("forever")
            started.set()
            try:
                await anyio.sleep(1000)
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(0.01)
                    cleaned.append(True)

        @jobs.event
        async def after(params: Params, ctx: JobContext) -> None:
            seen.append(request_id.get())
            after_ran.set()

        client = DogsClient(store, jobs)
        await client.schedule(forever)
        await client.schedule(after)
        async with Workers(store, jobs, workers_count=1, poll_interval=0.05) as workers:
            await started.wait()
            with anyio.fail_after(10):
                await workers.stop(grace=0.05)
        assert cleaned == [True]
        [record] = [r for r in await store.find_records() if r.job_name == "forever"]
        assert record.tries == 1
        # The lock was released at shutdown: another instance claims the job again at once.
        async with Workers(store, jobs, workers_count=2, poll_interval=0.05) as workers:
            with anyio.fail_after(10):
                await after_ran.wait()
            await workers.stop(grace=0)
        [record] = [r for r in await store.find_records() if r.job_name == "forever"]
        assert record.tries == 2
        assert seen == ["unset"]

    anyio.run(main, backend=backend)
