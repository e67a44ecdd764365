"""What an execution is given: the services shared by every execution of one ``Workers``,
and the milestones it reports back through its one callback."""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio

from dogs_core.domain.outcome import OutcomePolicy
from dogs_core.domain.records import ClaimedJob, HistoryRecord
from dogs_core.ports import AsyncJobStore, Clock
from dogs_core.runtime.batching import GroupCommit
from dogs_core.runtime.deadlines import Deadlines
from dogs_core.runtime.history_writes import (
    HISTORY_WRITE_TIMEOUT,
    complete_after_rows,
    write_history_batch,
)
from dogs_core.runtime.settings import WorkerSettings
from dogs_core.runtime.telemetry import TELEMETRY, Telemetry

__all__ = ["HISTORY_WRITE_TIMEOUT", "ExecutionServices", "Milestone", "build_services"]

_MAX_BATCH = 500  # items per batched completion or history write


class Milestone(enum.Enum):
    """What an execution reports to its workers."""

    FREED = "freed"
    """Its slot is free (the outcome is written; the history row may still be on its way)."""
    FREED_STALE = "freed_stale"
    """Its slot is free because it went stale (the handler may still be running)."""
    ENDED = "ended"
    """Its last task ended: the workers may forget it."""


def _never() -> bool:
    return False


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
    hold_back: Callable[[str, float], None]
    """Leave job name ``name`` out of claims until loop time ``until`` (a fleet limit refused
    one of its jobs)."""
    telemetry: Telemetry = TELEMETRY
    """Where the executions' events go."""
    may_free_early: Callable[[], bool] = _never
    """Whether an execution whose completion is on its way may free its slot now (the workers
    bound how many such completions are in flight); else it frees it once written."""
    loop_time: Callable[[], float] = anyio.current_time
    """The event loop's clock (``anyio.current_time`` bound once: see runtime/loop.py)."""
    cancel_scope: Callable[[], anyio.CancelScope] = anyio.CancelScope
    """Makes a cancel scope (``anyio.CancelScope``, its backend's class once known)."""


def build_services(
    store: AsyncJobStore,
    settings: WorkerSettings,
    *,
    clock: Clock,
    rng: random.Random,
    spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], None],
    spawn_background: Callable[[Callable[[], Coroutine[Any, Any, None]]], None],
    report: Callable[[ClaimedJob, Milestone], None],
    hold_back: Callable[[str, float], None] | None = None,
    telemetry: Telemetry = TELEMETRY,
    may_free_early: Callable[[], bool] | None = None,
    loop_time: Callable[[], float] = anyio.current_time,
    cancel_scope: Callable[[], anyio.CancelScope] = anyio.CancelScope,
) -> ExecutionServices:
    """The services of one ``Workers``: one timer task for every lock watchdog, and the
    completions and history rows of concurrent executions written in batches (group commit)."""
    history: GroupCommit[HistoryRecord, None] = GroupCommit(
        partial(write_history_batch, store), what="history", max_batch=_MAX_BATCH
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
        completions=GroupCommit(
            partial(complete_after_rows, store, history),
            what="complete",
            max_batch=_MAX_BATCH,
            key=_job_id_of,
        ),
        history=history,
        thread_limiter=anyio.CapacityLimiter(settings.workers_count),
        spawn=spawn,
        spawn_background=spawn_background,
        report=report,
        hold_back=hold_back or _hold_nothing_back,
        telemetry=telemetry,
        may_free_early=may_free_early or _never,
        loop_time=loop_time,
        cancel_scope=cancel_scope,
    )


def _job_id_of(claim: tuple[str, str]) -> str:
    """A completion's record: one batch holds each record once (``complete_many`` refuses a
    record given twice, as when a recovering claim completes a killed attempt's success)."""
    return claim[0]


def _hold_nothing_back(name: str, until: float) -> None:
    """The default ``hold_back``: claims of a refused name simply miss until it is admitted."""
