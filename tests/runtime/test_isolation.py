"""Executions share runner tasks but not context variables: what a handler sets stays with its
job, and cancellation still reaches a coroutine run in its own context."""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from dogs_core import JobContext, Jobs
from dogs_core.runtime.plumbing.loop import run_in_context

from .conftest import Harness, now

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


async def test_a_variable_set_inside_does_not_leak_out() -> None:
    async def sets() -> str:
        request_id.set("inside")
        await anyio.sleep(1)
        return request_id.get()

    assert await run_in_context(sets(), contextvars.copy_context()) == "inside"
    assert request_id.get() == "unset"


async def test_the_coroutine_sees_the_context_it_was_given() -> None:
    context = contextvars.copy_context()
    context.run(request_id.set, "given")

    async def reads() -> str:
        await anyio.lowlevel.checkpoint()
        return request_id.get()

    assert await run_in_context(reads(), context) == "given"


async def test_cancellation_reaches_the_coroutine() -> None:
    cleaned_up: list[float] = []

    async def waits() -> None:
        try:
            await anyio.sleep(100)
        finally:
            cleaned_up.append(now())

    with anyio.move_on_after(2):
        await run_in_context(waits(), contextvars.copy_context())
    assert cleaned_up == [2.0]


async def test_errors_propagate_with_their_type() -> None:
    async def fails() -> None:
        await anyio.lowlevel.checkpoint()
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        await run_in_context(fails(), contextvars.copy_context())


async def test_jobs_on_one_runner_do_not_see_each_others_variables() -> None:
    jobs = Jobs()
    seen: list[str] = []

    @jobs.event
    async def work(params: Params, ctx: JobContext) -> None:
        seen.append(request_id.get())
        request_id.set(f"job {len(seen)}")  # never reset: must not reach the next job

    h = Harness(jobs)
    for _ in range(3):
        await h.client.schedule(work)
    async with h.workers(workers_count=1, poll_interval=1) as workers:
        await anyio.sleep(5)
        await workers.stop()
    assert seen == ["unset", "unset", "unset"]
