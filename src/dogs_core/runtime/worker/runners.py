"""Runner tasks: executions run one after another on reused tasks.

Starting a job then costs at most a wake-up, not a task spawn, and usually not even that: a
runner goes on with the next queued execution when its job ends, and the next runner is woken
only when one is needed (an execution was queued and no runner is on its way to it), so a
claim's worth of jobs that finish without suspending runs on one runner, one after another.
Runners beyond ``keep_idle`` idle ones end (a stale execution left running holds its runner).
Each execution gets its own copy of the runner's starting context, as a task of its own would:
context variables a handler sets do not leak into the next job (see
:mod:`dogs_core.runtime.plumbing.loop`).
"""

from __future__ import annotations

import contextvars
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc

from dogs_core.runtime.plumbing.loop import Event, new_event, run_in_context

__all__ = ["RunnerPool"]

Job = Callable[[], Coroutine[Any, Any, None]]
"""One execution's ``run``."""


class RunnerPool:
    """Runs queued executions on idle runner tasks, or on runners it starts in ``group``."""

    __slots__ = ("_group", "_idle", "_keep_idle", "_queued", "_woken")

    def __init__(self, group: anyio.abc.TaskGroup, *, keep_idle: int) -> None:
        self._group = group
        self._keep_idle = keep_idle
        self._queued: deque[Job] = deque()
        self._idle: list[Event] = []
        self._woken = 0  # runners woken (or started) that have not yet looked at the queue

    def run(self, job: Job) -> None:
        """Run ``job`` as soon as a runner is free (at once while one is idle)."""
        self._queued.append(job)
        if self._woken == 0:
            self._wake_one()

    def _wake_one(self) -> None:
        self._woken += 1
        if self._idle:
            self._idle.pop().set()
        else:
            self._group.start_soon(self._runner, name="dogs job runner")

    async def _runner(self) -> None:
        fresh = contextvars.copy_context()
        queued = self._queued
        while True:
            self._woken -= 1
            while queued:
                job = queued.popleft()
                if queued and self._woken == 0:
                    # Should this job suspend, the next one must not wait for it.
                    self._wake_one()
                await run_in_context(job(), fresh.copy())
            if len(self._idle) >= self._keep_idle:
                return
            wake = new_event()
            self._idle.append(wake)
            await wake.wait()
