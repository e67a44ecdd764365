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

from typing import Protocol, runtime_checkable

from dogs_core.domain.steps import RecordedStep

__all__ = ["AsyncStepStore"]


@runtime_checkable
class AsyncStepStore(Protocol):
    """Durable steps on records (optional)."""

    async def record_step(self, job_id: str, lock_id: str, index: int, step: RecordedStep) -> bool:
        """Fenced: make ``step`` the record's step number ``index`` (the later ones dropped)."""
        ...
