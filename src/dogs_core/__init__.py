"""Dogs for Python: a MongoDB-backed job scheduler, storage-compatible with @orion-js/dogs.

This package is the core: job definitions, the scheduling client, the workers runtime and
the ports a store implements. Stores live in ``dogs_mongo`` (MongoDB) and ``dogs_testing``
(in memory).
"""

from dogs_core.domain.definitions import (
    Discard,
    EventJobDefinition,
    RecurrentJobDefinition,
    Retry,
)
from dogs_core.domain.records import (
    BulkScheduleResult,
    ClaimedJob,
    Duplicate,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobStatus,
    JobType,
    NameStatus,
    Scheduled,
)
from dogs_core.domain.schedules import CronSchedule, CustomSchedule, RetryPolicy, RunEvery
from dogs_core.errors import (
    DogsError,
    DuplicateJobNameError,
    ExecutionCancelledError,
    InvalidOptionError,
    InvalidParamsError,
    InvalidScheduleError,
    JobNotRegisteredError,
    ScheduleOutcomeUnknownError,
    SessionNotSupportedError,
    StoreError,
    TransientStoreError,
    UnknownJobError,
    ValidationError,
    WorkersStateError,
)
from dogs_core.jobs import (
    Jobs,
    event_job,
    event_job_method,
    get_service_jobs,
    recurrent_job,
    recurrent_job_method,
)
from dogs_core.runtime import (
    DogsClient,
    JobContext,
    JobTimeoutError,
    LoopClock,
    ScheduleItem,
    SyncDogsClient,
    SystemClock,
    Workers,
    WorkerSettings,
    current_job,
)
from dogs_core.runtime.blocking import BlockingDogsClient, BlockingWorkers

__version__ = "0.1.0"

__all__ = [
    "BlockingDogsClient",
    "BlockingWorkers",
    "BulkScheduleResult",
    "ClaimedJob",
    "CronSchedule",
    "CustomSchedule",
    "Discard",
    "DogsClient",
    "DogsError",
    "Duplicate",
    "DuplicateJobNameError",
    "EventJobDefinition",
    "ExecutionCancelledError",
    "HistoryRecord",
    "HistoryStatus",
    "InvalidOptionError",
    "InvalidParamsError",
    "InvalidScheduleError",
    "JobContext",
    "JobNotRegisteredError",
    "JobRecord",
    "JobStatus",
    "JobTimeoutError",
    "JobType",
    "Jobs",
    "LoopClock",
    "NameStatus",
    "RecurrentJobDefinition",
    "Retry",
    "RetryPolicy",
    "RunEvery",
    "ScheduleItem",
    "ScheduleOutcomeUnknownError",
    "Scheduled",
    "SessionNotSupportedError",
    "StoreError",
    "SyncDogsClient",
    "SystemClock",
    "TransientStoreError",
    "UnknownJobError",
    "ValidationError",
    "WorkerSettings",
    "Workers",
    "WorkersStateError",
    "current_job",
    "event_job",
    "event_job_method",
    "get_service_jobs",
    "recurrent_job",
    "recurrent_job_method",
]
