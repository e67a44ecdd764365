"""The workers as their executions see them (an
:class:`~dogs_core.runtime.execution.services.ExecutionHost`): where an execution runs its tasks
(the
workers' task groups, set while they run), the event loop's clock and cancel scopes (bound to
the running backend once it runs: called on every job, they are the backend's own callables, no
frame of ours in between), and the workers' own callbacks."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc

from dogs_core.domain.records import ClaimedJob
from dogs_core.errors import WorkersStateError
from dogs_core.runtime.execution import Milestone
from dogs_core.runtime.plumbing.loop import cancel_scope_factory, loop_clock

__all__ = ["WorkersHost"]

Task = Callable[[], Coroutine[Any, Any, None]]


class WorkersHost:
    """What the workers give their executions: ``report``, ``hold_back`` and
    ``may_free_early`` are the workers' own; ``loop_time`` and ``cancel_scope`` anyio's until
    :meth:`bind_to_loop`; the task groups are set by the workers while they run."""

    __slots__ = (
        "background",
        "cancel_scope",
        "executions",
        "hold_back",
        "loop_time",
        "may_free_early",
        "report",
    )

    def __init__(
        self,
        *,
        report: Callable[[ClaimedJob, Milestone], None],
        hold_back: Callable[[str, float], None],
        may_free_early: Callable[[], bool],
    ) -> None:
        self.report = report
        self.hold_back = hold_back
        self.may_free_early = may_free_early
        self.loop_time: Callable[[], float] = anyio.current_time
        self.cancel_scope: Callable[[], anyio.CancelScope] = anyio.CancelScope
        self.background: anyio.abc.TaskGroup | None = None
        self.executions: anyio.abc.TaskGroup | None = None

    def bind_to_loop(self) -> None:
        """Bind the hot path's clock and cancel scopes to the running backend (once it runs)."""
        self.loop_time = loop_clock()
        self.cancel_scope = cancel_scope_factory()

    def spawn(self, task: Task) -> None:
        """Start a task of an execution (it ends before the workers stop, or is cancelled with
        the executions left over after the drain)."""
        if self.executions is None:
            raise WorkersStateError("workers are not running")
        self.executions.start_soon(task)

    def spawn_background(self, task: Task) -> None:
        """Run a fire-and-forget background task tied to the workers' lifetime."""
        if self.background is None:
            raise WorkersStateError("workers are not running")
        self.background.start_soon(task)
