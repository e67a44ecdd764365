"""Runner tasks: executions run one after another on reused tasks.

Starting a job then costs a wake-up, not a task spawn. Runners beyond ``keep_idle`` idle ones end
(a stale execution left running holds its runner). Each execution gets its own copy of the
runner's starting context, as a task of its own would: context variables a handler sets do not
leak into the next job (see :mod:`dogs_core.runtime.isolation`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc

from dogs_core.runtime.isolation import run_in_context

__all__ = ["RunnerPool"]

Job = Callable[[], Coroutine[Any, Any, None]]
"""One execution's ``run``."""


class RunnerPool:
    """Hands executions to idle runner tasks, or starts a runner in ``group``."""

    __slots__ = ("_group", "_idle", "_keep_idle")

    def __init__(self, group: anyio.abc.TaskGroup, *, keep_idle: int) -> None:
        self._group = group
        self._keep_idle = keep_idle
        self._idle: list[_Handoff] = []

    def run(self, job: Job) -> None:
        """Run ``job`` on an idle runner, or on a new one."""
        if self._idle:
            self._idle.pop().hand_over(job)
            return
        self._group.start_soon(self._runner, job, name="dogs job runner")

    async def _runner(self, job: Job) -> None:
        fresh = contextvars.copy_context()
        while True:
            await run_in_context(job(), fresh.copy())
            if len(self._idle) >= self._keep_idle:
                return
            handoff = _Handoff()
            self._idle.append(handoff)
            job = await handoff.wait()


class _Handoff:
    """An idle runner's mailbox: the lanes put one execution in it and wake the runner."""

    __slots__ = ("_event", "_job")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._job: Job | None = None

    def hand_over(self, job: Job) -> None:
        self._job = job
        self._event.set()

    async def wait(self) -> Job:
        await self._event.wait()
        assert self._job is not None
        return self._job
