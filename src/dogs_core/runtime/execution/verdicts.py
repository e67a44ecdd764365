"""What a handler's result comes to (:data:`~dogs_core.domain.outcome.Happened`): it succeeded,
failed (and what ``on_error`` says of it), asked to be snoozed, or was cancelled for shutdown.
The one place that asks ``on_error``, for the workers' executions."""

from __future__ import annotations

import logging

from dogs_core.domain.definitions import (
    Discard,
    JobDefinition,
    Retry,
    load_params,
    normalize_on_error_result,
)
from dogs_core.domain.outcome import Cancelled, Failed, Happened, Snoozed, Succeeded
from dogs_core.domain.records import ClaimedJob
from dogs_core.ports import Clock
from dogs_core.runtime.execution.context import JobContext
from dogs_core.runtime.execution.invocation import (
    HandlerResult,
    Interrupted,
    Returned,
    SnoozeRequested,
    UserCalls,
    on_error_arguments,
)
from dogs_core.runtime.execution.job_events import job_extra

__all__ = ["what_happened"]

logger = logging.getLogger("dogs.execution")


async def what_happened(
    result: HandlerResult,
    *,
    definition: JobDefinition,
    job: ClaimedJob,
    context: JobContext,
    calls: UserCalls,
    clock: Clock,
) -> Happened:
    """What ``result`` comes to; a failure is logged (with its traceback) and ``on_error``
    asked. A snooze counts from ``clock``'s now."""
    if isinstance(result, Returned):
        return Succeeded()
    if isinstance(result, Interrupted):
        return Cancelled()  # for shutdown (a handler that finished anyway keeps it)
    if isinstance(result, SnoozeRequested):
        return Snoozed(result.snooze.run_after(clock.now()))
    error = result.error
    what = (job.job_name, job.job_id, job.tries, error)
    logger.error("job %s (%s) failed on try %d: %r", *what, exc_info=error, extra=job_extra(job))
    return Failed(await _ask_on_error(error, definition, job, context, calls))


async def _ask_on_error(
    error: BaseException,
    definition: JobDefinition,
    job: ClaimedJob,
    context: JobContext,
    calls: UserCalls,
) -> Retry | Discard:
    """What ``on_error`` says; a callback that raises or returns junk means "retry"."""
    on_error = definition.on_error
    if on_error is None:
        return Retry()
    try:
        params = load_params(definition, job.params)
        args = on_error_arguments(definition, error, params, context)
        returned = await calls.call(on_error, *args)
        return normalize_on_error_result(returned, job_name=job.job_name)
    except Exception:
        logger.exception(
            "on_error of %s raised or returned an invalid value; counting a failed attempt",
            job.job_name,
        )
        return Retry()
