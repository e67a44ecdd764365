"""What an execution is given: the services shared by every execution of one ``Workers``, the
host it reports to, and the milestones it reports."""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import anyio

from dogs_core.domain.outcome import OutcomePolicy
from dogs_core.domain.records import ClaimedJob, HistoryRecord
from dogs_core.ports import AsyncJobStore, Clock
from dogs_core.runtime.execution.settle import MAX_SETTLE_BATCH, Settler
from dogs_core.runtime.plumbing.batching import GroupCommit
from dogs_core.runtime.plumbing.deadlines import Deadlines
from dogs_core.runtime.plumbing.history_writes import HISTORY_WRITE_TIMEOUT, write_history_batch
from dogs_core.runtime.plumbing.log_shipping import LogShipper
from dogs_core.runtime.plumbing.settings import WorkerSettings
from dogs_core.runtime.plumbing.telemetry import TELEMETRY, Telemetry

__all__ = [
    "HISTORY_WRITE_TIMEOUT",
    "ExecutionHost",
    "ExecutionServices",
    "Milestone",
    "build_services",
]

Task = Callable[[], Coroutine[Any, Any, None]]


class Milestone(enum.Enum):
    """What an execution reports to its workers."""

    FREED = "freed"
    """Its slot is free (the outcome is written or on its way; the history row may be too)."""
    FREED_STALE = "freed_stale"
    """Its slot is free because it went stale (the handler may still be running)."""
    ENDED = "ended"
    """Its last task ended: the workers may forget it."""


class ExecutionHost(Protocol):
    """The workers, as an execution sees them: where it runs its tasks and what it tells."""

    def report(self, job: ClaimedJob, milestone: Milestone) -> None:
        """``job``'s execution reached ``milestone`` (``FREED`` or ``FREED_STALE`` exactly once,
        then ``ENDED``)."""
        ...

    def spawn(self, task: Task) -> None:
        """Start a task of an execution (it ends before the workers stop, or is cancelled)."""
        ...

    def spawn_background(self, task: Task) -> None:
        """Start a fire-and-forget task tied to the workers' lifetime (``on_stale``)."""
        ...

    def hold_back(self, job_name: str, until: float) -> None:
        """Leave ``job_name`` out of claims until loop time ``until`` (a fleet limit refused
        one of its jobs)."""
        ...

    def may_free_early(self) -> bool:
        """Whether an execution whose settlement is on its way may free its slot now (the
        workers bound how many such settlements are in flight); else once it is written."""
        ...

    def loop_time(self) -> float:
        """The event loop's clock (bound once: see runtime/plumbing/loop.py)."""
        ...

    def cancel_scope(self) -> anyio.CancelScope:
        """A cancel scope of the running backend's own class."""
        ...


@dataclass(frozen=True, slots=True)
class ExecutionServices:
    """Everything an execution uses, shared by every execution of one ``Workers``."""

    store: AsyncJobStore
    clock: Clock
    settings: WorkerSettings
    policy: OutcomePolicy
    rng: random.Random
    deadlines: Deadlines
    """One timer task for every lock watchdog."""
    history: GroupCommit[HistoryRecord, None]
    """The history rows of every execution, written in batches (never failing a submitter)."""
    settler: Settler
    """The one settle path: settlements, with their rows, in batches."""
    thread_limiter: anyio.CapacityLimiter
    host: ExecutionHost
    telemetry: Telemetry = TELEMETRY
    logs: LogShipper | None = None
    """The writer of the log lines executions keep (``None``: no job keeps any)."""


def build_services(
    store: AsyncJobStore,
    settings: WorkerSettings,
    *,
    clock: Clock,
    rng: random.Random,
    host: ExecutionHost,
    telemetry: Telemetry = TELEMETRY,
    logs: LogShipper | None = None,
) -> ExecutionServices:
    """The services of one ``Workers``: one timer task for every lock watchdog, and the history
    rows and settlements of concurrent executions written in batches (group commit)."""
    history: GroupCommit[HistoryRecord, None] = GroupCommit(
        partial(write_history_batch, store), what="history", max_batch=MAX_SETTLE_BATCH
    )
    return ExecutionServices(
        store=store,
        clock=clock,
        settings=settings,
        policy=OutcomePolicy(
            default_lock_time=settings.default_lock_time,
            max_tries=settings.max_tries,
            max_tries_reached_retention=settings.max_tries_reached_retention,
        ),
        rng=rng,
        deadlines=Deadlines(),
        history=history,
        settler=Settler(store),
        thread_limiter=anyio.CapacityLimiter(settings.workers_count),
        host=host,
        telemetry=telemetry,
        logs=logs,
    )
