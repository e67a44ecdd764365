"""What an execution is given: the services shared by every execution of one ``Workers``,
and the milestones it reports back through its one callback."""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import anyio

from dogs_core.domain.outcome import OutcomePolicy
from dogs_core.domain.records import ClaimedJob, HistoryRecord
from dogs_core.ports import AsyncJobStore, Clock
from dogs_core.runtime.batching import GroupCommit
from dogs_core.runtime.deadlines import Deadlines
from dogs_core.runtime.settings import WorkerSettings

__all__ = ["ExecutionServices", "Milestone"]


class Milestone(enum.Enum):
    """What an execution reports to its workers."""

    FREED = "freed"
    """Its slot is free (the outcome is written; the history row may still be on its way)."""
    FREED_STALE = "freed_stale"
    """Its slot is free because it went stale (the handler may still be running)."""
    ENDED = "ended"
    """Its last task ended: the workers may forget it."""


@dataclass(frozen=True, slots=True)
class ExecutionServices:
    """Everything an execution uses, shared by every execution of one ``Workers``."""

    store: AsyncJobStore
    clock: Clock
    settings: WorkerSettings
    policy: OutcomePolicy
    rng: random.Random
    deadlines: Deadlines
    completions: GroupCommit[tuple[str, str], bool]
    history: GroupCommit[HistoryRecord, None]
    thread_limiter: anyio.CapacityLimiter
    spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], None]
    """Starts a task of an execution (it ends before the workers stop, or is cancelled)."""
    spawn_background: Callable[[Callable[[], Coroutine[Any, Any, None]]], None]
    """Starts a fire-and-forget task tied to the workers' lifetime (``on_stale``)."""
    report: Callable[[ClaimedJob, Milestone], None]
    """Told what an execution reached (see :class:`Milestone`)."""
