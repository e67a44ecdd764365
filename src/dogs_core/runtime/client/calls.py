"""What both faces of the client do without I/O around a call: the input checks and labels
their methods share, the audit entry a call leaves, and the constants that bound their loops and
pages. Written once by hand: the async parts (``_async/``) and their generated twins
(``_sync/``) import them, so a check or a bound is one object whatever the face."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from dogs_core.domain.archiving import (
    ArchiveKind,
)
from dogs_core.domain.audit import (
    AUDIT_RETENTION,
    AuditAction,
    AuditEntry,
    audit_details,
    audit_target,
    recorded_result,
)
from dogs_core.domain.controls import EVERY_JOB
from dogs_core.domain.definitions import (
    EventJobDefinition,
    RecurrentJobDefinition,
)
from dogs_core.domain.records import (
    Duplicate,
    NewJob,
)
from dogs_core.domain.runtime_schedules import ScheduleSpec, first_run_at
from dogs_core.domain.uniqueness import PARKED_AT, UniqueHold
from dogs_core.domain.workflow_records import (
    NewWorkflow,
    WorkflowState,
)
from dogs_core.domain.workflows import Workflow
from dogs_core.errors import (
    InvalidOptionError,
    JobContendedError,
)
from dogs_core.ids import as_id, new_record_id
from dogs_core.runtime.plumbing.actors import current_actor

#: Released steps read per page by ``cancel_workflow``.
CANCEL_PAGE = 500

#: Most workflows one ``list_workflows`` call returns.
MAX_WORKFLOW_PAGE = 1000


def workflow_state(state: object) -> WorkflowState | None:
    if state is None:
        return None
    try:
        return WorkflowState(str(state))
    except ValueError:
        choices = ", ".join(s.value for s in WorkflowState)
        raise InvalidOptionError("state", state, f"expected one of {choices}") from None


def start_label(workflows: Sequence[Workflow], compiled: Sequence[NewWorkflow]) -> str:
    """How the retry logs and the log name a start."""
    if len(compiled) == 1:
        return f"start workflow {workflows[0].name or compiled[0].workflow.id}"
    return f"start {len(compiled)} workflows"


#: The most schedules one ``list`` call returns.
MAX_LIST_PAGE: Final = 1000

#: The most compare-and-set rounds of one change before it gives up (someone else keeps
#: changing the same schedule).
SCHEDULE_ROUNDS: Final = 10


def stats_name(job: object) -> str:
    if isinstance(job, str):
        if not job.strip():
            raise InvalidOptionError("job", job, "must be a job name (None: every job)")
        return job
    if isinstance(job, EventJobDefinition | RecurrentJobDefinition):
        return job.name
    raise InvalidOptionError("job", job, "must be a job definition, a job name or None")


def control_name(job: object) -> str:
    if job is None:
        return EVERY_JOB
    if isinstance(job, str):
        if not job or job == EVERY_JOB:
            raise InvalidOptionError("job", job, "must be a job name (None pauses every job)")
        return job
    if isinstance(job, EventJobDefinition | RecurrentJobDefinition):
        return job.name
    raise InvalidOptionError("job", job, "must be a job definition, a job name or None")


#: How many times an action re-reads a record that changed under it before giving up.
RACE_ROUNDS = 5


def busy_error(action: str, job_id: str) -> JobContendedError:
    return JobContendedError(action, job_id, RACE_ROUNDS)


#: An INFO line every this many batches of one kind (and one at the end of each kind).
ARCHIVE_LOG_EVERY = 10

ALL_ARCHIVE_KINDS = (ArchiveKind.HISTORY, ArchiveKind.FAILED_RECORDS)


#: Seconds ``follow_logs`` keeps reading after what it follows has ended: the lines a worker
#: buffered are written within about a quarter of a second (``runtime/plumbing/writers.py``).
LOG_LINGER: Final = 2.0


#: Seconds before ``wait_for`` reads again a job whose row came while its record is still held by
#: the execution that wrote it (the completion is on its way), doubled up to ``poll_interval``.
COMPLETION_RECHECK = 0.005


def audit_entry_of(
    now: datetime, action: AuditAction, arguments: dict[str, Any], result: object
) -> AuditEntry:
    job_id = arguments.get("job_id")
    if isinstance(job_id, str):  # as stored, however it was typed (it was checked already)
        job_id = arguments["job_id"] = as_id(job_id) or job_id
    what = recorded_result(result, job_id if isinstance(job_id, str) else None)
    return AuditEntry(
        id=new_record_id(),
        at=now,
        actor=current_actor(),
        action=action.value,
        target=what.target or audit_target(action, arguments),
        outcome=what.outcome,
        count=what.count,
        job_ids=what.job_ids,
        details={**audit_details(arguments), **what.details},
        updated_at=now,
        expires_at=now + AUDIT_RETENTION,
    )


def parked(job: NewJob, run_at: datetime, now: datetime) -> NewJob:
    return dataclasses.replace(job, next_run_at=PARKED_AT, parked_run_at=run_at, parked_at=now)


def window_duplicate(held: UniqueHold) -> Duplicate:
    return Duplicate(held.job_id, held.key, reason="window", held_until=held.until)


def respec(spec: ScheduleSpec, *, paused: bool, now: datetime) -> ScheduleSpec:
    return ScheduleSpec(
        job=spec.job,
        cron=spec.cron,
        timezone=spec.timezone,
        every=spec.every,
        misfire=spec.misfire,
        misfire_grace=spec.misfire_grace,
        max_catch_up=spec.max_catch_up,
        paused=paused,
        updated_at=now,
    )


def next_run_after_change(old: ScheduleSpec, new: ScheduleSpec, now: datetime) -> datetime | None:
    """The next run a change writes: parked when paused, the rule's next time when resumed or
    re-timed, else ``None`` (kept)."""
    if new.paused:
        return None if old.paused else PARKED_AT
    if old.paused or not old.same_timing(new):
        return first_run_at(new, now)
    return None
