"""A claimed record that is not run: why it is pushed back, and its settlement.

:func:`~dogs_core.domain.outcome.decide_before_run` returns a
:class:`~dogs_core.domain.outcome.Defer` for two reasons, told differently: a record of another
type than the definition here (another deployment owns the name: an ERROR, someone must act),
and a recurrent job's missed slots skipped by its misfire policy (an INFO line naming the job and
the slots, and a :class:`~dogs_core.domain.events.JobMisfired` event; no history row).
"""

from __future__ import annotations

import logging

from dogs_core.domain.definitions import JobDefinition, RecurrentJobDefinition
from dogs_core.domain.events import JobMisfired
from dogs_core.domain.outcome import Defer, MarkTerminal
from dogs_core.domain.records import ClaimedJob
from dogs_core.domain.settle import Settlement
from dogs_core.runtime.invocation import UserCalls
from dogs_core.runtime.job_events import job_extra
from dogs_core.runtime.recording import reached_max_tries
from dogs_core.runtime.services import ExecutionServices
from dogs_core.runtime.settle import label_of

__all__ = ["settle_instead_of_running", "tell_deferred"]

logger = logging.getLogger("dogs.execution")


def tell_deferred(
    services: ExecutionServices, job: ClaimedJob, definition: JobDefinition, command: Defer
) -> None:
    """Log (and, for a misfire, emit) why ``job`` is deferred by ``command``."""
    missed = command.missed
    if missed is None:
        what = (job.job_id, job.job_name, job.type, definition.type)
        logger.error("record %s of %r is a %s job but the definition here is %s", *what)
        return
    count = f"{missed.count}{'+' if missed.capped else ''}"
    mode = definition.misfire.mode if isinstance(definition, RecurrentJobDefinition) else None
    logger.info(
        "skipped %s missed slot(s) of %s (%s to %s, misfire=%s); next run at %s",
        count,
        job.job_name,
        missed.first.isoformat(),
        missed.last.isoformat(),
        mode,
        missed.next_run_at.isoformat(),
        extra={**job_extra(job), "skipped_slots": missed.count},
    )
    if services.telemetry.active:
        services.telemetry.emit(
            JobMisfired(
                job, missed.count, missed.first, missed.last, missed.next_run_at, missed.capped
            )
        )


async def settle_instead_of_running(
    services: ExecutionServices,
    calls: UserCalls,
    job: ClaimedJob,
    definition: JobDefinition,
    command: Defer | MarkTerminal,
) -> None:
    """Settle a claimed job that :func:`~dogs_core.domain.outcome.decide_before_run` refused to
    run: a ``Defer`` (told by :func:`tell_deferred`), or a ``MarkTerminal`` of a record past its
    attempt limit (``on_max_tries_reached`` called once it landed)."""
    if isinstance(command, Defer):
        # Another deployment owns the name (Dogs leaves such a record locked until its lock
        # expires, again and again; we push it back by one lock time so it does not spin), or
        # the misfire policy skips missed slots.
        tell_deferred(services, job, definition, command)
    settlement = Settlement(job.job_id, job.lock_id, command)
    owned = await services.settler.settle(settlement, what=label_of(command, job.job_name))
    if owned and isinstance(command, MarkTerminal):
        await reached_max_tries(services, calls, job)
