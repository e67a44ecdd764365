"""Dogs for Python: a MongoDB-backed job scheduler, storage-compatible with @orion-js/dogs.

This package is the core: job definitions, the scheduling client, the workers runtime and
the ports a store implements. Stores live in ``dogs_mongo`` (MongoDB) and ``dogs_testing``
(in memory).
"""

from dogs_core import _moved
from dogs_core.domain.controls import RateLimit
from dogs_core.domain.definitions import (
    Discard,
    EventJobDefinition,
    RecurrentJobDefinition,
    Retry,
    Snooze,
)
from dogs_core.domain.log_lines import LogLine
from dogs_core.domain.progress import Progress

# Issue 27: shaping work at the door (unique keys, tags, deadlines, runtime schedules).
from dogs_core.domain.records import (
    BulkScheduleResult,
    ClaimedJob,
    Debounced,
    Duplicate,
    HistoryRecord,
    HistoryStatus,
    JobRecord,
    JobState,
    JobStatus,
    JobType,
    NameStatus,
    Owner,
    Replaced,
    Scheduled,
    ScheduleOutcome,
)
from dogs_core.domain.runtime_schedules import ScheduleSpec
from dogs_core.domain.schedule_entries import RuntimeSchedule, ScheduleUpserted
from dogs_core.domain.schedules import CronSchedule, CustomSchedule, RetryPolicy, RunEvery
from dogs_core.domain.stats import MAX_STATS_WINDOW, JobStats
from dogs_core.domain.steering import (
    AlreadyFinished,
    Cancelled,
    Deleted,
    JobPage,
    NotFound,
    Rescheduled,
    Running,
)
from dogs_core.domain.tags import InvalidTagsError
from dogs_core.domain.uniqueness import HoldState, Unique, UniqueError
from dogs_core.domain.workflow_marker import BatchSummary, Upstream
from dogs_core.domain.workflow_records import (
    StepState,
    WorkflowCancelled,
    WorkflowRetried,
    WorkflowStarted,
    WorkflowState,
    WorkflowView,
)
from dogs_core.domain.workflows import Batch, FailurePolicy, Workflow, chain
from dogs_core.errors import (
    DogsError,
    DuplicateJobNameError,
    ExecutionCancelledError,
    InvalidOptionError,
    InvalidParamsError,
    InvalidProgressError,
    InvalidScheduleError,
    InvalidWorkflowError,
    JobContendedError,
    JobNotFoundError,
    JobNotRegisteredError,
    LockHeldError,
    LockLostError,
    MissingRoleError,
    ScheduleInCodeError,
    ScheduleNotFoundError,
    ScheduleOutcomeUnknownError,
    SessionNotSupportedError,
    StoreError,
    StoreUnavailableError,
    TransactionsNotSupportedError,
    TransientStoreError,
    UnknownJobError,
    ValidationError,
    WorkersStateError,
    WorkflowNotFoundError,
    WorkflowStateError,
    WorkflowTimeoutError,
    WorkflowUpstreamError,
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
from dogs_core.runtime.client._async.unique_scheduling import UniqueContendedError
from dogs_core.runtime.client.blocking import BlockingDogsClient
from dogs_core.runtime.worker.blocking import BlockingWorkers

__version__ = "0.1.0"

__all__ = [
    "MAX_STATS_WINDOW",
    "AlreadyFinished",
    "Batch",
    "BatchSummary",
    "BlockingDogsClient",
    "BlockingWorkers",
    "BulkScheduleResult",
    "Cancelled",
    "ClaimedJob",
    "CronSchedule",
    "CustomSchedule",
    "Debounced",
    "Deleted",
    "Discard",
    "DogsClient",
    "DogsError",
    "Duplicate",
    "DuplicateJobNameError",
    "EventJobDefinition",
    "ExecutionCancelledError",
    "FailurePolicy",
    "HistoryRecord",
    "HistoryStatus",
    "HoldState",
    "InvalidOptionError",
    "InvalidParamsError",
    "InvalidProgressError",
    "InvalidScheduleError",
    "InvalidTagsError",
    "InvalidWorkflowError",
    "JobContendedError",
    "JobContext",
    "JobNotFoundError",
    "JobNotRegisteredError",
    "JobPage",
    "JobRecord",
    "JobState",
    "JobStats",
    "JobStatus",
    "JobTimeoutError",
    "JobType",
    "Jobs",
    "LockHeldError",
    "LockLostError",
    "LogLine",
    "LoopClock",
    "MissingRoleError",
    "NameStatus",
    "NotFound",
    "Owner",
    "Progress",
    "RateLimit",
    "RecurrentJobDefinition",
    "Replaced",
    "Rescheduled",
    "Retry",
    "RetryPolicy",
    "RunEvery",
    "Running",
    "RuntimeSchedule",
    "ScheduleInCodeError",
    "ScheduleItem",
    "ScheduleNotFoundError",
    "ScheduleOutcome",
    "ScheduleOutcomeUnknownError",
    "ScheduleSpec",
    "ScheduleUpserted",
    "Scheduled",
    "SessionNotSupportedError",
    "Snooze",
    "StepState",
    "StoreError",
    "StoreUnavailableError",
    "SyncDogsClient",
    "SystemClock",
    "TransactionsNotSupportedError",
    "TransientStoreError",
    "Unique",
    "UniqueContendedError",
    "UniqueError",
    "UnknownJobError",
    "Upstream",
    "ValidationError",
    "WorkerSettings",
    "Workers",
    "WorkersStateError",
    "Workflow",
    "WorkflowCancelled",
    "WorkflowNotFoundError",
    "WorkflowRetried",
    "WorkflowStarted",
    "WorkflowState",
    "WorkflowStateError",
    "WorkflowTimeoutError",
    "WorkflowUpstreamError",
    "WorkflowView",
    "chain",
    "current_job",
    "event_job",
    "event_job_method",
    "get_service_jobs",
    "recurrent_job",
    "recurrent_job_method",
]

_moved.install()
