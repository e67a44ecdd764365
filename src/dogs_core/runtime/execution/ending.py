"""How an execution ends: what a handler's result comes to, ``on_error`` asked
(``what_happened``); its history rows (``submit_history``); why it lost its lock (``lock_loss``:
its record and its own row read back, ``domain/lock_loss.py`` decides); its success row
superseded when its settlement was refused because its job ran again (``supersede``); the end of
a stale one (``settle_stale``: its row, then its demotion) and of one cancelled at shutdown
(``release_at_shutdown``); ``on_stale`` and ``on_max_tries_reached``; and a record with a unique
window, whose key's hold is written before the settlement that removes or fails it
(``open_window``).

An execution's row is written *before* its fenced completion (see
:mod:`dogs_core.runtime.execution.arrival` for the window this opens and how it is closed): a
worker killed right after the completion has already left its row, so no job ends without one.
"""

from __future__ import annotations

import logging
from datetime import datetime

import anyio

from dogs_core.domain.definitions import (
    Discard,
    JobDefinition,
    Retry,
    load_params,
    normalize_on_error_result,
)
from dogs_core.domain.history import superseded_row
from dogs_core.domain.lock_loss import LockLoss, lock_loss_of
from dogs_core.domain.outcome import (
    Cancelled,
    Command,
    Delete,
    Failed,
    Happened,
    MarkTerminal,
    Release,
    Snoozed,
    Stale,
    Succeeded,
    decide,
)
from dogs_core.domain.records import ClaimedJob, HistoryRecord
from dogs_core.domain.settle import Settlement
from dogs_core.ports import AsyncUniquenessStore, Clock, Role, has_role
from dogs_core.runtime.execution.context import JobContext
from dogs_core.runtime.execution.invocation import (
    HandlerResult,
    Interrupted,
    Returned,
    SnoozeRequested,
    UserCalls,
    on_error_arguments,
)
from dogs_core.runtime.execution.services import HISTORY_WRITE_TIMEOUT, ExecutionServices, job_extra
from dogs_core.runtime.execution.settle import label_of
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.outage import log_gave_up

__all__ = [
    "ends_with_window",
    "lock_loss",
    "open_window",
    "reached_max_tries",
    "release_at_shutdown",
    "run_on_stale",
    "settle_stale",
    "submit_history",
    "supersede",
    "what_happened",
]


logger = logging.getLogger("dogs.execution")


def ends_with_window(job: ClaimedJob, command: Command) -> bool:
    """Whether ``command`` ends a record whose unique key keeps a window."""
    return (
        job.unique_window is not None
        and job.unique_identifier is not None
        and isinstance(command, Delete | MarkTerminal)
    )


async def open_window(services: ExecutionServices, job: ClaimedJob, now: datetime) -> None:
    """Hold ``job``'s key until ``now`` plus its window, before its record goes. A store
    without the uniqueness role, or a write that keeps failing, is logged: the record ends
    anyway (a job is never held back by its window)."""
    store = services.store
    key, window = job.unique_identifier, job.unique_window
    if key is None or window is None:
        return
    if not has_role(store, Role.UNIQUENESS):
        logger.warning("%s (%s): the store has no uniqueness role: no window", job.job_name, key)
        return
    holds: AsyncUniquenessStore = store  # type: ignore[assignment]
    try:
        await retry_transient(
            lambda: holds.extend_unique_hold(key, job.job_id, until=now + window),
            what=f"open the window of {key!r}",
        )
    except Exception as error:
        log_gave_up(logger, f"could not open the window of unique key {key!r}", error)


SHUTDOWN_RELEASE_TIMEOUT = 30.0  # seconds a shutdown's release may take (shielded)


async def submit_history(services: ExecutionServices, record: HistoryRecord) -> None:
    """Queue ``record`` with the history group commit and wait for its batch (which retries,
    and logs what it cannot write); never raises.

    The batch writer is not cancelled with the execution, so a row once queued is written even
    if the wait here is cut short."""
    try:
        await services.history.submit(record)
    except Exception as error:  # the writer stopped (the workers are stopping)
        log_gave_up(logger, f"could not write history for {record.execution_id}", error)


#: How many times, and how far apart, a record found gone without a row of this execution is
#: read again: an operator's cancel deletes the record, then writes the execution's row.
_GONE_REREADS = 3


_GONE_REREAD_SECONDS = 0.2


async def lock_loss(services: ExecutionServices, job: ClaimedJob) -> LockLoss:
    """Why ``job``'s execution lost its lock (:mod:`dogs_core.domain.lock_loss`), read back
    from its record and its own history row; ``UNKNOWN`` when they cannot be read."""
    try:
        with anyio.CancelScope(shield=True), anyio.fail_after(HISTORY_WRITE_TIMEOUT):
            # A lock is often lost because the store was unreachable: read until it answers.
            record = await retry_transient(
                lambda: services.store.get_record(job.job_id),
                what="read stale job",
                attempts=None,
            )
            own = await _own_row(services, job)
            for _ in range(_GONE_REREADS):
                if record is not None or own is not None:
                    break
                await anyio.sleep(_GONE_REREAD_SECONDS)
                own = await _own_row(services, job)
    except Exception:
        logger.exception("could not read stale job %s", job.job_id)
        return LockLoss.UNKNOWN
    return lock_loss_of(job.execution_id, record, own)


async def _own_row(services: ExecutionServices, job: ClaimedJob) -> HistoryRecord | None:
    rows = await retry_transient(
        lambda: services.store.read_history(job_id=job.job_id, limit=_OWN_ROW_LOOKBACK),
        what="read stale job's history",
        attempts=None,
    )
    return next((row for row in rows if row.execution_id == job.execution_id), None)


#: How many of a job's newest rows are searched for this execution's own.
_OWN_ROW_LOOKBACK = 20


async def supersede(services: ExecutionServices, row: HistoryRecord) -> bool | None:
    """After ``row``'s success was refused because its lock had moved on: turn the claimer's
    ``stale`` row of this execution into ``superseded`` (:func:`~dogs_core.domain.history.
    superseded_row`). ``True``: replaced, the claimer ran the job again and its outcome is
    the job's; ``False``: this execution's own ``success`` row won, and the claimer completes
    it without running it again; ``None``: the store could not tell (logged). Shielded and
    bounded, as it follows a stale execution whose tasks a stop cancels."""
    replaced: bool | None = None
    try:
        with anyio.CancelScope(shield=True), anyio.fail_after(HISTORY_WRITE_TIMEOUT):
            replaced = await retry_transient(
                lambda: services.store.supersede_history(superseded_row(row)),
                what=f"mark the success of {row.execution_id} superseded",
                attempts=None,
            )
    except Exception as error:
        log_gave_up(logger, f"could not mark the success of {row.execution_id} superseded", error)
    return replaced


async def reached_max_tries(services: ExecutionServices, calls: UserCalls, job: ClaimedJob) -> None:
    """Log that ``job`` reached its attempt limit and call ``on_max_tries_reached`` (its errors
    are logged and swallowed)."""
    what = (job.job_name, job.job_id, job.tries)
    logger.warning("job %s (%s) reached its attempt limit after %d tries", *what)
    hook = services.settings.on_max_tries_reached
    if hook is not None:
        try:
            await calls.call(hook, job)
        except Exception:
            logger.exception("on_max_tries_reached raised for %s", job.job_name)


async def run_on_stale(
    definition: JobDefinition, job: ClaimedJob, calls: UserCalls, context: JobContext
) -> None:
    """Call the definition's ``on_stale`` (if any) with the job's params; its errors are
    logged and swallowed."""
    on_stale = definition.on_stale
    if on_stale is None:
        return
    try:
        params = load_params(definition, job.params)
        await calls.call(on_stale, params, context)
    except Exception:
        logger.exception("on_stale of %s raised", job.job_name)


async def settle_stale(
    services: ExecutionServices,
    job: ClaimedJob,
    definition: JobDefinition,
    *,
    row: HistoryRecord | None,
    now: datetime,
) -> None:
    """The end of an execution that went stale: its ``stale`` row (when it wrote none), then
    its record demoted (:class:`~dogs_core.domain.outcome.DemoteStale`) so the retry queues
    behind other due work, in one settlement. Shielded, as a stale execution's tasks are
    cancelled at the stop; a failure is logged."""
    command = decide(definition, job, Stale(), services.policy, now, services.rng.random())
    settlement = Settlement(job.job_id, job.lock_id, command, row)
    try:
        with anyio.CancelScope(shield=True):
            await services.settler.settle(settlement, what=label_of(command, job.job_name))
    except Exception as error:
        log_gave_up(logger, f"could not demote stale job {job.job_id}", error)


async def release_at_shutdown(
    services: ExecutionServices, job: ClaimedJob, command: Release, row: HistoryRecord | None
) -> bool:
    """The end of an execution cancelled at shutdown: its ``cancelled`` row, then its lock
    released so another worker takes the job at once; shielded, within
    :data:`SHUTDOWN_RELEASE_TIMEOUT`. Whether the release landed (logged either way)."""
    released = False
    with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_RELEASE_TIMEOUT):
        settlement = Settlement(job.job_id, job.lock_id, command, row)
        released = await services.settler.settle(settlement, what=label_of(command, job.job_name))
        what = (job.job_name, job.job_id, "released" if released else "already lost")
        logger.warning("cancelled %s (%s) at shutdown; lock %s", *what, extra=job_extra(job))
    return released


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
    asked. A snooze counts from ``clock``'s now. A run that recorded a ``ctx.sleep`` ends in
    it, whatever the handler did after (it cannot record anything more)."""
    if context.waking_at is not None:
        return Snoozed(context.waking_at)
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
