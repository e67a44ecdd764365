"""The anyio runtime, in four wings.

- ``worker/``: one running instance (``Workers``): claiming, slots, holds, releases, beats.
- ``execution/``: one claimed job, from its gate to its settled row.
- ``client/``: scheduling and steering (``DogsClient``, its generated sync twin).
- ``plumbing/``: settings, telemetry, clocks, the lock keeper, watching, batching, retries.

A wing imports plumbing and the domain; the worker also starts executions; no wing imports a
sibling's insides (the import-linter contracts in pyproject.toml).
"""

from dogs_core.errors import JobTimeoutError
from dogs_core.runtime.client._async.client import DogsClient
from dogs_core.runtime.client._sync.client import SyncDogsClient
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_core.runtime.client.scheduling import ScheduleItem
from dogs_core.runtime.execution.context import JobContext, current_job
from dogs_core.runtime.plumbing.clock import LoopClock, ServerClock, SkewedClock, SystemClock
from dogs_core.runtime.plumbing.settings import WorkerSettings
from dogs_core.runtime.worker.blocking import BlockingWorkers
from dogs_core.runtime.worker.workers import Workers

__all__ = [
    "BlockingDogsClient",
    "BlockingWorkers",
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
