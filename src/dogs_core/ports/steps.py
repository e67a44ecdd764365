"""The steps role, optional: durable steps recorded on a running job's record (``ctx.step``;
:mod:`dogs_core.domain.steps`). A store that has it lists
:attr:`~dogs_core.ports.common.Role.STEPS` in its ``roles``; without it ``ctx.step`` raises
:class:`~dogs_core.errors.MissingRoleError`, and nothing else changes.

Recording
    ``record_step`` is a fenced write (``_id`` and ``lock_id`` match; ``False`` when nothing
    matched: the lock belongs to another execution) that makes ``step`` the record's step number
    ``index`` (from 0) and drops any after it, so a retried write lands once. Only the
    execution holding the lock writes, one step at a time, so ``index`` is the number of steps
    the record has.
Sleeping
    ``record_step`` with ``sleep_until`` (a durable handler's ``ctx.sleep``) also sets, in the
    same write, the record's ``next_run_at`` and its ``sleeping_until`` to it: from then on no
    claim takes the record before it wakes (its lock still held, or expired with a killed
    worker), and once the run gives its lock back the record is
    :attr:`~dogs_core.domain.records.JobState.SLEEPING` (:attr:`JobRecord.sleeping
    <dogs_core.domain.records.JobRecord.sleeping>`) until then.
Recording in a transaction
    ``record_step_in_transaction`` runs ``make_step(session)`` (the step's function, given the
    store's database session, and the :class:`~dogs_core.domain.steps.RecordedStep` it made) and
    the same fenced write in one transaction of the store's database: the function's own writes
    through ``session`` and the recorded step commit together or not at all. ``None`` when the
    fence matched nothing (the transaction is aborted). A store without transactions raises
    :class:`~dogs_core.errors.TransactionsNotSupportedError` and runs nothing.
Reading
    A claim hands the record's steps to the execution
    (:attr:`~dogs_core.domain.records.ClaimedJob.steps`), in order, with the record: replaying
    them costs no read of its own.
Clearing
    A recurrent record's steps are dropped when a run ends and it is rescheduled with its tries
    reset (the next run is a new run); an event record's go with it. A retry, a snooze, a stale
    recovery and a record at its attempt limit keep them (the next run resumes after them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from dogs_core.domain.steps import RecordedStep

__all__ = ["AsyncStepStore"]


@runtime_checkable
class AsyncStepStore(Protocol):
    """Durable steps on records (optional)."""

    async def record_step(
        self,
        job_id: str,
        lock_id: str,
        index: int,
        step: RecordedStep,
        *,
        sleep_until: datetime | None = None,
    ) -> bool:
        """Fenced: make ``step`` the record's step number ``index`` (the later ones dropped);
        with ``sleep_until``, the record sleeps until then."""
        ...

    async def record_step_in_transaction(
        self,
        job_id: str,
        lock_id: str,
        index: int,
        make_step: Callable[[Any], Awaitable[RecordedStep]],
    ) -> RecordedStep | None:
        """``make_step(session)`` and the fenced write of its step, in one transaction."""
        ...
