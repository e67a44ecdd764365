"""Where a ``Workers``' executions run their tasks, and the event loop's clock and cancel scopes
bound once the loop runs: the half of :class:`~dogs_core.runtime.services.ExecutionHost` that
is about tasks and the loop (the workers add what an execution reports)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

from dogs_core.domain.records import ClaimedJob
from dogs_core.errors import WorkersStateError
from dogs_core.runtime.loop import cancel_scope_factory, loop_clock
from dogs_core.runtime.services import Milestone

__all__ = ["Tasks", "WorkersHost"]

Task = Callable[[], Coroutine[Any, Any, None]]


class Tasks:
    """The task groups of one ``Workers`` (set while they run) and the loop's bound clock."""

    __slots__ = ("_loop_clock", "_scope_factory", "background", "executions")

    def __init__(self) -> None:
        self._loop_clock: Callable[[], float] = anyio.current_time  # bound in the loop
        self._scope_factory: Callable[[], anyio.CancelScope] = anyio.CancelScope  # likewise
        self.background: anyio.abc.TaskGroup | None = None
        self.executions: anyio.abc.TaskGroup | None = None

    def bind_to_loop(self) -> None:
        """Bind the hot path's clock and cancel scopes to the running backend (once it runs)."""
        self._loop_clock = loop_clock()
        self._scope_factory = cancel_scope_factory()

    def loop_time(self) -> float:
        return self._loop_clock()

    def cancel_scope(self) -> anyio.CancelScope:
        return self._scope_factory()

    def spawn(self, func: Task) -> None:
        """Start a task of an execution (it ends before the workers stop, or is cancelled with
        the executions left over after the drain)."""
        if self.executions is None:
            raise WorkersStateError("workers are not running")
        self.executions.start_soon(func)

    def spawn_background(self, func: Task) -> None:
        """Run a fire-and-forget background task tied to the workers' lifetime."""
        if self.background is None:
            raise WorkersStateError("workers are not running")
        self.background.start_soon(func)


@dataclass(frozen=True, slots=True)
class WorkersHost:
    """The workers as their executions see them (an
    :class:`~dogs_core.runtime.services.ExecutionHost`): bound methods, called directly."""

    report: Callable[[ClaimedJob, Milestone], None]
    spawn: Callable[[Task], None]
    spawn_background: Callable[[Task], None]
    hold_back: Callable[[str, float], None]
    may_free_early: Callable[[], bool]
    loop_time: Callable[[], float]
    cancel_scope: Callable[[], anyio.CancelScope]
