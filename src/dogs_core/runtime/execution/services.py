"""What an execution is given and what it tells: the services shared by every execution of one
``Workers`` (``ExecutionServices``), the host it reports to (``ExecutionHost``) and the
milestones it reports (``Milestone``, ``Milestones``: its tasks, its slot freed exactly once,
``ENDED`` once its last task ended); which telemetry event ends it (``ended_event``), its
renewals reported (``reporting_renewals``) and its log lines' ``extra`` fields (``job_extra``)."""

from __future__ import annotations

import enum
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from dogs_core.domain.events import (
    ExecutionEnded,
    JobFailed,
    JobRetried,
    JobSnoozed,
    JobSucceeded,
    LockRenewed,
)
from dogs_core.domain.outcome import Command, OutcomePolicy, Reschedule
from dogs_core.domain.records import ClaimedJob, HistoryRecord, HistoryStatus, JobType
from dogs_core.ports import AsyncJobStore, Clock
from dogs_core.runtime.execution.invocation import HandlerResult, Raised
from dogs_core.runtime.execution.settle import MAX_SETTLE_BATCH, Settler
from dogs_core.runtime.plumbing.batching import GroupCommit
from dogs_core.runtime.plumbing.deadlines import Deadlines
from dogs_core.runtime.plumbing.lock import ProgressRider, RenewWrite, job_lock_write
from dogs_core.runtime.plumbing.settings import WorkerSettings
from dogs_core.runtime.plumbing.telemetry import TELEMETRY, Telemetry
from dogs_core.runtime.plumbing.writers import (
    HISTORY_WRITE_TIMEOUT,
    LogShipper,
    write_history_batch,
)

__all__ = [
    "HISTORY_WRITE_TIMEOUT",
    "ExecutionHost",
    "ExecutionServices",
    "Milestone",
    "Milestones",
    "build_services",
    "ended_event",
    "job_extra",
    "reporting_renewals",
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


if TYPE_CHECKING:
    from dogs_core.runtime.execution.services import ExecutionServices


def job_extra(job: ClaimedJob) -> Mapping[str, object]:
    """The structured fields of an execution's log lines (``logging``'s ``extra``): a JSON
    formatter finds them as attributes of the record."""
    return {
        "job_name": job.job_name,
        "job_id": job.job_id,
        "execution_id": job.execution_id,
        "tries": job.tries,
    }


def reporting_renewals(
    services: ExecutionServices,
    job: ClaimedJob,
    write: RenewWrite | None,
    rider: ProgressRider | None = None,
) -> RenewWrite | None:
    """The lock keeper's renewal write (``None``: the job's plain ``extend_lock``, carrying
    ``rider``'s progress), emitting :class:`LockRenewed` when it lands, if anyone listens when
    the execution starts."""
    telemetry = services.telemetry
    if not telemetry.active:
        return write
    inner = write if write is not None else job_lock_write(job, services.store, rider)

    async def renew(until: datetime) -> bool:
        matched = await inner(until)
        if matched and telemetry.active:
            telemetry.emit(LockRenewed(job, until))
        return matched

    return renew


def ended_event(
    job: ClaimedJob, duration: float, command: Command, result: HandlerResult
) -> ExecutionEnded | None:
    """The event for an execution whose handler gave ``result`` and whose outcome ``command``
    was written; ``None`` for a command that ends no run (shutdown releases and stale
    demotions have events of their own, emitted where they happen)."""
    status = command.history
    if status is HistoryStatus.SUCCESS:
        return JobSucceeded(job, duration)
    if status is HistoryStatus.SNOOZED and isinstance(command, Reschedule):
        return JobSnoozed(job, duration, run_at=command.next_run_at)
    if status is HistoryStatus.ERROR and isinstance(result, Raised):
        if isinstance(command, Reschedule):
            if job.type is JobType.EVENT:
                return JobRetried(job, duration, error=result.error, retry_at=command.next_run_at)
            return JobFailed(job, duration, error=result.error, next_run_at=command.next_run_at)
        return JobFailed(job, duration, error=result.error)
    return None


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
