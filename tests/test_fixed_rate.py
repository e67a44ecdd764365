"""Fixed-rate recurrent jobs count slots from the due time the claim carried."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

import anyio
import pytest
import trio.testing

from dogs_core import JobContext, Jobs, LoopClock, RunEvery, Workers
from dogs_testing import InMemoryJobStore

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, object]]:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("anchor", "expected"),
    [("slot", [0.0, 10.0, 20.0, 30.0, 40.0]), ("completion", [0.0, 13.0, 26.0, 39.0])],
)
async def test_run_every_anchor(
    anchor: Literal["completion", "slot"], expected: list[float]
) -> None:
    clock = LoopClock(START)
    jobs = Jobs()
    starts: list[float] = []

    async def tick(ctx: JobContext) -> None:
        starts.append((clock.now() - START).total_seconds())
        await anyio.sleep(3)  # the run itself takes 3 s of virtual time

    jobs.recurrent(schedule=RunEvery(timedelta(seconds=10), anchor=anchor), name="tick")(tick)
    async with Workers(InMemoryJobStore(), jobs, clock=clock, poll_interval=0.5) as workers:
        await anyio.sleep(45)
        await workers.stop()
    assert starts == expected
