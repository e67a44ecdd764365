"""The anyio runtime: workers, executions, the scheduling client and the blocking facade."""

from dogs_core.errors import JobTimeoutError
from dogs_core.runtime._async.client import DogsClient
from dogs_core.runtime._sync.client import SyncDogsClient
from dogs_core.runtime.clock import LoopClock, ServerClock, SkewedClock, SystemClock
from dogs_core.runtime.context import JobContext, current_job
from dogs_core.runtime.scheduling import ScheduleItem
from dogs_core.runtime.settings import WorkerSettings
from dogs_core.runtime.workers import Workers

__all__ = [
    "DogsClient",
    "JobContext",
    "JobTimeoutError",
    "LoopClock",
    "ScheduleItem",
    "ServerClock",
    "SkewedClock",
    "SyncDogsClient",
    "SystemClock",
    "WorkerSettings",
    "Workers",
    "current_job",
]
