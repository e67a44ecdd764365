"""Fenced writes: performing an outcome :data:`~dogs_core.domain.outcome.Command` on the store.

Every write matches the record's id and the claim's lock id, and is retried on transient
errors. A write that matched nothing means another execution owns the job now, unless an earlier
attempt may have landed (its reply was lost): then the record is read back to tell "my write
landed" from "someone else owns the job".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from dogs_core.domain.outcome import (
    Command,
    Defer,
    Delete,
    DemoteStale,
    MarkTerminal,
    Release,
    Reschedule,
)
from dogs_core.domain.records import ClaimedJob, JobStatus, to_millis
from dogs_core.errors import TransientStoreError
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.batching import GroupCommit
from dogs_core.runtime.retry import retry_transient

__all__ = ["FencedWriter", "fenced"]

Write = Callable[[], Awaitable[bool]]


async def fenced(
    what: str, write: Write, *, verify: Write | None = None, ambiguous: bool = False
) -> bool:
    """Run one fenced ``write`` with retries; ``verify`` settles an ambiguous miss
    (``ambiguous``: an earlier attempt, made elsewhere, may have landed)."""

    async def attempt() -> bool:
        nonlocal ambiguous
        try:
            return await write()
        except TransientStoreError as error:
            ambiguous = ambiguous or error.write_may_have_applied
            raise

    owned = await retry_transient(attempt, what=what)
    if not owned and ambiguous and verify is not None:
        owned = await retry_transient(verify, what=f"verify {what}")
    return owned


class FencedWriter:
    """Performs the outcome commands of one claimed job. ``True``: the write matched (the
    execution still owned the job); ``False``: the lock was lost."""

    __slots__ = ("_completions", "_job", "_store")

    def __init__(
        self,
        job: ClaimedJob,
        store: AsyncJobStore,
        completions: GroupCommit[tuple[str, str], bool],
    ) -> None:
        self._job = job
        self._store = store
        self._completions = completions

    async def perform(self, command: Command, *, what: str | None = None) -> bool:
        """Perform ``command``; ``what`` names it in retry logs."""
        job, store = self._job, self._store
        label = f"{what or _LABELS[type(command)]} {job.job_name}"
        if isinstance(command, Delete):
            # Coalesced with other executions' completions into one store call; its verdict is
            # "the record is gone", which also settles an attempt whose reply was lost.
            return await fenced(
                label,
                lambda: self._completions.submit((job.job_id, job.lock_id)),
                verify=self._gone,
            )
        if isinstance(command, Reschedule | Defer):
            return await self._reschedule(label, command)
        if isinstance(command, MarkTerminal):
            return await fenced(
                label,
                lambda: store.mark_max_tries_reached(
                    job.job_id, job.lock_id, now=command.now, expires_at=command.expires_at
                ),
                verify=lambda: self._terminal_at(command.now),
            )
        if isinstance(command, Release):
            return await fenced(
                label, lambda: store.release_lock(job.job_id, job.lock_id, now=command.now)
            )
        assert isinstance(command, DemoteStale)
        return await fenced(label, lambda: store.demote_stale(job.job_id, job.lock_id))

    def complete_soon(self, callback: Callable[[bool | BaseException], None]) -> None:
        """Queue the completion (:class:`Delete`) without waiting: ``callback`` gets the
        verdict of this first attempt, or its error, from the batch writer's task (an error is
        retried with :meth:`complete_again`)."""
        job = self._job
        self._completions.submit_callback((job.job_id, job.lock_id), callback)

    async def complete_again(self, error: BaseException) -> bool:
        """Retry a completion whose :meth:`complete_soon` attempt failed with ``error``."""
        job = self._job
        ambiguous = isinstance(error, TransientStoreError) and error.write_may_have_applied
        return await fenced(
            f"complete {job.job_name}",
            lambda: self._completions.submit((job.job_id, job.lock_id)),
            verify=self._gone,
            ambiguous=ambiguous,
        )

    async def extend_lock(self, locked_until: datetime) -> bool:
        """Set the lock's deadline (before the handler starts: the job's own lock time)."""
        job = self._job
        return await fenced(
            f"apply lock time {job.job_name}",
            lambda: self._store.extend_lock(job.job_id, job.lock_id, locked_until),
        )

    async def _reschedule(self, label: str, command: Reschedule | Defer) -> bool:
        job, store = self._job, self._store
        if isinstance(command, Reschedule):
            priority, reset, tries = command.priority, command.reset_tries, command.tries
        else:
            priority, reset, tries = None, False, command.tries

        async def rescheduled() -> bool:
            record = await store.get_job(job.job_id)
            return (
                record is not None
                and record.lock_id is None
                and record.next_run_at == to_millis(command.next_run_at)
            )

        return await fenced(
            label,
            lambda: store.reschedule(
                job.job_id,
                job.lock_id,
                next_run_at=command.next_run_at,
                priority=priority,
                reset_tries=reset,
                tries=tries,
            ),
            verify=rescheduled if isinstance(command, Reschedule) else None,
        )

    async def _gone(self) -> bool:
        return await self._store.get_job(self._job.job_id) is None

    async def _terminal_at(self, now: datetime) -> bool:
        record = await self._store.get_job(self._job.job_id)
        return (
            record is not None
            and record.lock_id is None
            and record.status is JobStatus.MAX_TRIES_REACHED
            and record.max_tries_reached_at == to_millis(now)
        )


_LABELS: dict[type, str] = {
    Delete: "complete",
    Reschedule: "reschedule",
    Defer: "defer mismatched record",
    MarkTerminal: "mark maxTriesReached",
    Release: "release lock at shutdown",
    DemoteStale: "demote stale job",
}
