"""Telling why a claimed record is pushed back without running its handler.

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
from dogs_core.domain.outcome import Defer
from dogs_core.domain.records import ClaimedJob
from dogs_core.runtime.job_events import job_extra
from dogs_core.runtime.services import ExecutionServices

__all__ = ["tell_deferred"]

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
