"""An execution's tasks and the milestones it reports to its workers: its slot freed exactly
once (:attr:`~dogs_core.runtime.execution.services.Milestone.FREED`, or ``FREED_STALE``), and its
end
(``ENDED``) once the last of its tasks (its run, a renewal write, the stale handling, the
settlement's callback) has ended."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from dogs_core.domain.records import ClaimedJob
from dogs_core.runtime.execution.services import ExecutionHost, Milestone

__all__ = ["Milestones"]

logger = logging.getLogger("dogs.execution")


class Milestones:
    """The tasks of one execution, and its reports to ``host``. ``on_end`` runs just before
    ``ENDED`` is reported (the execution breaks its reference cycles there); ``on_free``, when
    set, just before the slot is reported free (a fleet gate leaves its slot)."""

    __slots__ = ("_freed", "_host", "_job", "_on_end", "on_free", "open")

    def __init__(self, host: ExecutionHost, job: ClaimedJob, on_end: Callable[[], None]) -> None:
        self._host = host
        self._job = job
        self._on_end = on_end
        self.open = 1
        """Tasks not ended: the execution's run until it returns, each spawned task, and what
        the execution counts itself (its settlement, until the callback has run)."""
        self._freed = False
        self.on_free: Callable[[], None] | None = None

    def spawn(self, func: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Start ``func(*args)`` as a task of this execution (logged, never raised)."""
        self.open += 1
        job = self._job

        async def task() -> None:
            try:
                await func(*args)
            except Exception:
                logger.exception("unexpected error in a task of %s (%s)", job.job_name, job.job_id)
            finally:
                self.task_ended()

        self._host.spawn(task)

    def task_ended(self) -> None:
        self.open -= 1
        if self.open == 0:
            on_end, self._on_end, self.on_free = self._on_end, _nothing, None
            on_end()  # the execution breaks its cycles, this one included
            self._host.report(self._job, Milestone.ENDED)

    def free(self, *, stale: bool) -> None:
        """Report the slot free, once."""
        if not self._freed:
            self._freed = True
            if self.on_free is not None:
                self.on_free()
            self._host.report(self._job, Milestone.FREED_STALE if stale else Milestone.FREED)


def _nothing() -> None:
    """What an ended execution's end callback becomes (it ends once)."""
