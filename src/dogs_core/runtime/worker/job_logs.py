"""Optional start and finish lines per job (``log_jobs=True``, ``dogs worker --log-jobs``): a
telemetry subscriber writing to the ``dogs.jobs`` logger.

Every line carries ``job_name``, ``job_id``, ``execution_id`` and ``tries`` as ``extra``
fields, so a JSON formatter (python-json-logger, structlog's stdlib bridge) emits them as keys.
Failures are logged with their traceback by the execution itself, listened to or not; these
lines add the ordinary starts and ends that a busy worker would otherwise keep quiet about.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from dogs_core.domain.events import Event, ExecutionEnded, JobStarted
from dogs_core.domain.records import Owner
from dogs_core.runtime.execution import job_extra
from dogs_core.runtime.plumbing.telemetry import Telemetry

__all__ = ["JobLogLines"]

logger = logging.getLogger("dogs.jobs")


class JobLogLines:
    """Subscribe it for :class:`JobStarted` and :class:`ExecutionEnded`: one INFO line as each
    handler starts, one as its execution ends (WARNING for ends other than success)."""

    def __init__(self, instance_id: str | None = None) -> None:
        self._instance_id = instance_id

    @classmethod
    def subscribe(cls, telemetry: Telemetry, owner: Owner) -> Callable[[], None]:
        """Log the jobs that the workers instance ``owner`` runs (only theirs: other instances
        may share the hub); returns the unsubscribe function."""
        return telemetry.subscribe(cls(owner.instance_id), JobStarted, ExecutionEnded)

    def __call__(self, event: Event) -> None:
        if not isinstance(event, JobStarted | ExecutionEnded):
            return
        owner = event.job.owner
        if self._instance_id is not None and (
            owner is None or owner.instance_id != self._instance_id
        ):
            return
        if isinstance(event, JobStarted):
            job = event.job
            what = (job.job_name, job.job_id, job.tries)
            logger.info("started %s (%s), try %d", *what, extra=job_extra(job))
        elif isinstance(event, ExecutionEnded):
            job = event.job
            level = logging.INFO if event.outcome in ("succeeded", "snoozed") else logging.WARNING
            if logger.isEnabledFor(level):
                ended = (job.job_name, job.job_id, event.outcome, event.duration * 1000)
                extra = {**job_extra(job), "outcome": event.outcome, "duration": event.duration}
                logger.log(level, "%s (%s) %s in %.1f ms", *ended, extra=extra)
