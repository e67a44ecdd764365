"""A store wrapper that times the runtime's claim calls and counts completions.

The benchmarks that drain a backlog through a real ``Workers`` instance (``throughput``,
``adaptive``, ``telemetry_overhead``, ``backlog``, ``many_names``) learn from it when every
record has been completed and how long each claim call took.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio

from dogs_core.domain.outcome import Delete
from dogs_core.domain.records import ClaimedJob, ClaimRequest
from dogs_core.domain.settle import Settlement
from dogs_core.ports import AsyncJobStore
from dogs_testing.wrapper import JobStoreWrapper

__all__ = ["TimedStore"]


class TimedStore(JobStoreWrapper):
    """A store wrapper that times claim calls (single and batched) and counts completions.

    ``done`` is set when ``target`` records have been completed (deleted after success).
    """

    def __init__(self, inner: AsyncJobStore) -> None:
        super().__init__(inner)
        self.claim_seconds: list[float] = []
        self.claim_hits = 0
        self.completed = 0
        self.target: int | None = None
        self.done = anyio.Event()

    def expect(self, target: int) -> None:
        self.target = target
        self.completed = 0
        self.done = anyio.Event()
        self.claim_seconds.clear()
        self.claim_hits = 0

    async def claim(self, request: ClaimRequest) -> ClaimedJob | None:
        began = time.perf_counter()
        job = await self.inner.claim(request)
        self.claim_seconds.append(time.perf_counter() - began)
        if job is not None:
            self.claim_hits += 1
        return job

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimedJob]:
        began = time.perf_counter()
        jobs = await self.inner.claim_many(requests)
        self.claim_seconds.append(time.perf_counter() - began)
        self.claim_hits += len(jobs)
        return jobs

    async def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        verdicts = await self.inner.settle_many(settlements)
        completed = 0
        for settlement, applied in zip(settlements, verdicts, strict=True):
            if applied and settlement.command.__class__ is Delete:
                completed += 1
        self._count(completed)
        return verdicts

    def _count(self, completed: int) -> None:
        self.completed += completed
        if self.target is not None and self.completed >= self.target:
            self.done.set()

    async def close(self) -> None:
        await self.inner.close()
