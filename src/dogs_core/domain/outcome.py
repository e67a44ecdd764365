"""What becomes of a claimed job: from what happened to the one write that follows.

A pure decision table (no I/O, no clock of its own), the way h11 keeps protocol decisions out of
the code that moves bytes. The runtime reports what happened to an execution, then performs the
:data:`Command` returned here as one fenced store write and writes the history row it names.

Before the handler runs, :func:`decide_before_run` may refuse to run the job at all: a record
whose type differs from the definition (another deployment owns the name) is deferred by one
lock time, an event record past its attempt limit (a crash used its last try) is marked
terminal, an event record claimed for its first attempt after its ``start_before`` deadline is
deleted with an ``expired`` history row, a paused runtime schedule's record
(:mod:`dogs_core.domain.runtime_schedules`) is parked again without running, and a recurrent
record claimed too late for its misfire policy (:mod:`dogs_core.domain.misfire`) is moved to a
later slot: a :class:`Defer` carrying the :class:`~dogs_core.domain.misfire.MissedSlots`, its
try given back and no history row.

After the handler, :func:`decide` maps the :data:`Happened` value:

============================  ======================================  ==================
what happened                 event job                               recurrent job
============================  ======================================  ==================
succeeded                     delete                                  next regular run
                                                                      (misfire policy),
                                                                      tries reset
failed, on_error -> Discard   delete                                  next regular run,
                                                                      tries reset
failed, Retry(run_in/run_at)  retry then, tries kept                  retry then,
                                                                      tries kept
failed, Retry()               retry after backoff, or terminal once   next regular run,
                              tries reach the limit                   tries reset
snoozed (Snooze(run_in))      rerun then, the try given back          same
cancelled (shutdown)          release the lock at once                same
went stale                    demote (priority 0), lock left to       same
                              expire
============================  ======================================  ==================

A timed-out handler is a failure (with :class:`~dogs_core.errors.JobTimeoutError`). An
explicit retry time ignores the attempt limit: the caller asked for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeAlias

from dogs_core.domain.definitions import (
    Discard,
    EventJobDefinition,
    JobDefinition,
    RecurrentJobDefinition,
    Retry,
    retry_run_at,
)
from dogs_core.domain.misfire import MissedSlots, misfire_before_run, next_run_after_run
from dogs_core.domain.records import ClaimedJob, HistoryStatus, Hold, JobType
from dogs_core.domain.uniqueness import PARKED_AT
from dogs_core.domain.values import value

__all__ = [
    "Cancelled",
    "Command",
    "Defer",
    "Delete",
    "DemoteStale",
    "Failed",
    "Happened",
    "MarkTerminal",
    "OutcomePolicy",
    "Release",
    "Reschedule",
    "Snoozed",
    "Stale",
    "Succeeded",
    "decide",
    "decide_before_run",
    "expired",
]


# -- what happened ---------------------------------------------------------------------------


@value
class Succeeded:
    """The handler returned normally."""


@value
class Failed:
    """The handler raised (or ran past its timeout); ``verdict`` is what ``on_error`` said
    (``Retry()`` when there is no callback or it misbehaved)."""

    verdict: Retry | Discard


@value
class Cancelled:
    """The handler was cancelled because the workers are stopping."""


@value
class Snoozed:
    """The handler returned or raised :class:`~dogs_core.domain.definitions.Snooze`."""

    run_at: datetime


@value
class Stale:
    """The execution lost its lock (watchdog, lost fence, failed renewal)."""


Happened: TypeAlias = Succeeded | Failed | Cancelled | Snoozed | Stale


# -- the writes that follow -----------------------------------------------------------------


@value
class Delete:
    """Delete the event record (fenced)."""

    history: HistoryStatus


@value
class Reschedule:
    """Release the record for ``next_run_at`` (fenced), setting ``priority`` when given and
    ``tries = 0`` when ``reset_tries`` (``tries`` when given)."""

    next_run_at: datetime
    priority: int | None
    reset_tries: bool
    history: HistoryStatus
    tries: int | None = None


@value
class MarkTerminal:
    """Event record: status ``maxTriesReached`` at ``now``, kept until ``expires_at`` (``None``:
    forever), lock released (fenced). ``history`` is ``None`` when no attempt ran."""

    now: datetime
    expires_at: datetime | None
    history: HistoryStatus | None


@value
class Release:
    """Set ``locked_until = now`` so another worker takes the job at once (fenced; the lock id
    stays so late writes of this execution still fail their fence)."""

    now: datetime
    history: HistoryStatus = HistoryStatus.CANCELLED


@value
class Defer:
    """Push the record back to ``next_run_at`` without touching priority (fenced); ``tries``
    when given (a job refused by a fleet limit gives its try back). ``missed`` when the misfire
    policy skips the slots it names. ``hold`` when a fleet limit refused the job: written on
    the record (additive ``heldBack``), so views show it ``held`` rather than scheduled."""

    next_run_at: datetime
    history: None = None
    tries: int | None = None
    missed: MissedSlots | None = None
    hold: Hold | None = None


@value
class DemoteStale:
    """Priority 0 (fenced) so the retry of a stale job queues behind other due work; the lock
    is left to expire."""

    history: HistoryStatus = HistoryStatus.STALE


Command: TypeAlias = Delete | Reschedule | MarkTerminal | Release | Defer | DemoteStale


@dataclass(frozen=True, slots=True)
class OutcomePolicy:
    """The worker-wide settings the decisions depend on."""

    default_lock_time: timedelta
    max_tries: int | None
    max_tries_reached_retention: timedelta | None


# -- the decisions ------------------------------------------------------------------------------


def decide_before_run(
    definition: JobDefinition, job: ClaimedJob, policy: OutcomePolicy, now: datetime
) -> Defer | MarkTerminal | Delete | None:
    """``None`` when the handler may run; otherwise the write that replaces the run."""
    if job.type is not definition.type:
        return Defer(now + policy.default_lock_time)
    if isinstance(definition, EventJobDefinition):
        limit = definition.effective_max_tries(policy.max_tries)
        if limit is not None and job.tries > limit:
            return _terminal(policy, now, history=None)
        if expired(job, now):
            return Delete(HistoryStatus.EXPIRED)
    elif job.schedule is not None and job.schedule.paused:
        return Defer(PARKED_AT, tries=max(job.tries - 1, 0))
    elif job.tries <= 1 and not job.was_stale:  # a slot's first attempt, not a retry
        missed = misfire_before_run(definition.schedule, definition.misfire, job.next_run_at, now)
        if missed is not None:
            return Defer(missed.next_run_at, tries=max(job.tries - 1, 0), missed=missed)
    return None


def expired(job: ClaimedJob, now: datetime) -> bool:
    """Whether ``job`` is claimed for its first attempt after its ``start_before`` deadline
    (a retry, or the rerun of an attempt whose worker died, had started in time)."""
    return (
        job.start_before is not None
        and now > job.start_before
        and job.tries <= 1
        and not job.was_stale
    )


def decide(
    definition: JobDefinition,
    job: ClaimedJob,
    happened: Happened,
    policy: OutcomePolicy,
    now: datetime,
    rand: float,
) -> Command:
    """The one write that follows ``happened``; ``rand`` is uniform in [0, 1) (retry jitter)."""
    if isinstance(happened, Cancelled):
        return Release(now)
    if isinstance(happened, Snoozed):
        return Reschedule(
            happened.run_at,
            priority=None,
            reset_tries=False,
            history=HistoryStatus.SNOOZED,
            tries=max(job.tries - 1, 0),
        )
    if isinstance(happened, Stale):
        return DemoteStale()
    status = HistoryStatus.SUCCESS if isinstance(happened, Succeeded) else HistoryStatus.ERROR
    verdict = happened.verdict if isinstance(happened, Failed) else None
    explicit = isinstance(verdict, Retry) and (
        verdict.run_in is not None or verdict.run_at is not None
    )
    if isinstance(verdict, Retry) and explicit:
        priority = definition.priority if job.type is JobType.RECURRENT else None
        return Reschedule(
            retry_run_at(definition, verdict, now, job.tries, rand),
            priority=priority,
            reset_tries=False,
            history=status,
        )
    if job.type is JobType.RECURRENT:
        assert isinstance(definition, RecurrentJobDefinition)
        next_run = next_run_after_run(definition.schedule, definition.misfire, job.next_run_at, now)
        return Reschedule(next_run, priority=definition.priority, reset_tries=True, history=status)
    if verdict is None or isinstance(verdict, Discard):
        return Delete(status)
    assert isinstance(definition, EventJobDefinition)
    limit = definition.effective_max_tries(policy.max_tries)
    if limit is not None and job.tries >= limit:
        return _terminal(policy, now, history=status)
    return Reschedule(
        retry_run_at(definition, verdict, now, job.tries, rand),
        priority=None,
        reset_tries=False,
        history=status,
    )


def _terminal(
    policy: OutcomePolicy, now: datetime, *, history: HistoryStatus | None
) -> MarkTerminal:
    retention = policy.max_tries_reached_retention
    return MarkTerminal(now, None if retention is None else now + retention, history=history)
