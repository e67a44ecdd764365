"""``ctx.progress`` and ``ctx.logger``'s kept lines from a sync handler's worker thread: the same
rules as an async handler's, without waiting for the loop. A positive autojump threshold (see
``test_sync_handlers``): the handler's real work must not let virtual time jump."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
import trio.testing

from dogs_core.errors import LockLostError
from dogs_core.jobs import Jobs
from dogs_core.runtime import JobContext
from tests.runtime.test_following import harness

pytestmark = pytest.mark.anyio

Params = dict[str, Any] | None


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0.05)})


async def test_a_sync_handler_reports_progress_and_keeps_lines() -> None:
    jobs = Jobs()

    @jobs.event(store_logs=True)
    def render(params: Params, ctx: JobContext) -> str:
        for page in range(1, 201):
            ctx.progress(page / 200, f"page {page}")  # no await in a sync handler
            if page % 50 == 0:
                ctx.logger.info("page %d rendered", page)
        return "report.pdf"

    h, store = harness(jobs)
    job_id = (await h.client.schedule(render)).id  # type: ignore[union-attr]
    async with h.workers(progress_interval=1) as workers:
        await anyio.sleep(2)
        await workers.stop()
    assert 1 <= len(store.progress_writes) <= 3
    (row,) = store.history("render")
    assert row.progress is not None
    assert row.progress.message == "page 200"
    assert [line.message for line in store.lines(job_id)] == [
        f"page {n} rendered" for n in (50, 100, 150, 200)
    ]


async def test_a_sync_handler_learns_that_its_lock_was_lost() -> None:
    jobs = Jobs()
    raised: list[str] = []

    @jobs.event(lock_time=1, max_tries=1)
    def stuck(params: Params, ctx: JobContext) -> None:
        ctx.progress(0.1, "started")
        deadline = time.monotonic() + 10
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)  # stuck past its lock, silent: it goes stale
        try:
            ctx.progress(0.2, "too late")
        except LockLostError as error:
            raised.append(type(error).__name__)

    h, store = harness(jobs)
    await h.client.schedule(stuck)
    async with h.workers(default_lock_time=1) as workers:
        with anyio.fail_after(30):
            while not raised:  # noqa: ASYNC110 - the handler's own list
                await anyio.sleep(0.1)
        await workers.stop()
    assert raised == ["LockLostError"]
    assert [p.message for _, p, _ in store.progress_writes] == ["started"]
