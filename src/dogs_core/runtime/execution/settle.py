"""The one settle path: every final write of an execution, batched with the others that ended
at the same time.

An execution (or the takeover of a killed attempt, a fleet limit's refusal, a stop's give-back)
hands a :class:`~dogs_core.domain.settle.Settlement`, with its history row when it has one, to
the workers' :class:`Settler`, which sends what has queued as one ``settle_many`` (the settle
role of :mod:`dogs_core.ports`): the store writes the batch's rows, then its settlements, so a
row lands before its record is settled in one call (docs/reliability.md, "History at a crash";
:mod:`dogs_core.runtime.execution.arrival` closes the window between the two).

A submitter either waits (:meth:`Settler.settle`: retried on transient errors, and an
ambiguous miss read back) or is called back with the first attempt's verdict
(:meth:`Settler.settle_soon`), so that a finished job keeps no task waiting for its write.

An execution whose settlement is in flight holds its job here (:meth:`Settler.hold`) until it
knows how the settlement went: when an outage outlasts its lock, this very worker may claim the
job again, and that claim waits for it (:meth:`Settler.settled_here`) instead of running the
job a second time while its success is still being saved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import anyio

from dogs_core.domain.outcome import (
    Command,
    Defer,
    Delete,
    DemoteStale,
    MarkTerminal,
    Release,
    Reschedule,
)
from dogs_core.domain.records import HistoryRecord
from dogs_core.domain.settle import Settlement, settled_as_commanded
from dogs_core.errors import TransientStoreError
from dogs_core.ports import AsyncJobStore
from dogs_core.runtime.plumbing._async.retry import retry_transient
from dogs_core.runtime.plumbing.batching import GroupCommit

__all__ = ["MAX_SETTLE_BATCH", "Settler", "label_of"]

logger = logging.getLogger("dogs.execution")

#: Settlements per ``settle_many`` (and rows per history write: the same batches).
MAX_SETTLE_BATCH: Final = 500

Verdict = bool | BaseException
"""What a settlement's first attempt came to: whether it matched, or the batch's error."""


class Settler:
    """The workers' settle writer: batches of settlements (and the rows they carry). Serve it
    with :meth:`run` in a task that outlives every execution."""

    __slots__ = ("_batches", "_held", "_store", "step_ended")

    def __init__(self, store: AsyncJobStore) -> None:
        self._store = store
        #: Told the row of each workflow step's execution whose final settlement (a delete, a
        #: terminal mark) landed, so that this instance's release starts without waiting for
        #: the history feed to report it
        #: (:class:`~dogs_core.runtime.worker.releaser.WorkflowReleaser`).
        self.step_ended: Callable[[HistoryRecord], None] | None = None
        # One batch holds a record once: settle_many refuses a record given twice (a takeover
        # settles a killed attempt's record, which a late write may name again).
        self._batches: GroupCommit[Settlement, bool] = GroupCommit(
            store.settle_many, what="settle", max_batch=MAX_SETTLE_BATCH, key=_record_of
        )
        # Job id -> set once the execution settling it knows how its settlement went.
        self._held: dict[str, anyio.Event] = {}

    def hold(self, job_id: str) -> Callable[[], None]:
        """Hold ``job_id`` while this worker's settlement of it is in flight; the function
        returned lets it go (once; later calls do nothing)."""
        event = self._held[job_id] = anyio.Event()

        def let_go() -> None:
            if self._held.get(job_id) is event:
                del self._held[job_id]
            event.set()

        return let_go

    async def settled_here(self, job_id: str, *, within: float) -> bool:
        """Wait, at most ``within`` seconds, until no settlement of ``job_id`` by this worker is
        in flight: a claim of a job whose lock expired while this worker was still saving its
        outcome (an outage longer than the lock) waits for that outcome, so that it completes
        a saved success instead of running the job again. Whether none is in flight now (a
        settlement still in flight after ``within`` is then treated as another worker's
        would be: the claimer's ``stale`` row races its row)."""
        event = self._held.get(job_id)
        if event is None:
            return True
        logger.info("%s: this worker is still settling it; waiting for that first", job_id)
        with anyio.move_on_after(within):
            while (event := self._held.get(job_id)) is not None:
                await event.wait()
        return job_id not in self._held

    @property
    def batches(self) -> GroupCommit[Settlement, bool]:
        """The group commit behind it (its counters: ``batches_sent``, ``items_sent``)."""
        return self._batches

    async def run(self) -> None:
        """Write batches as settlements queue; runs until cancelled."""
        await self._batches.run()

    def settle_soon(self, settlement: Settlement, callback: Callable[[Verdict], None]) -> None:
        """Queue ``settlement`` without waiting: ``callback`` gets the verdict of this first
        attempt, or its error, from the writer's task (retry an error with :meth:`settle`,
        passing it as ``after``)."""
        told = self._step_end_teller(settlement)
        if told is not None:
            callback = _telling(callback, told)
        self._batches.submit_callback(settlement, callback)

    def _step_end_teller(self, settlement: Settlement) -> Callable[[], None] | None:
        """What tells :attr:`step_ended` of ``settlement`` once it landed, when it ends a
        workflow step's execution."""
        row, told = settlement.row, self.step_ended
        if (
            told is None
            or row is None
            or row.workflow_id is None
            or not isinstance(settlement.command, Delete | MarkTerminal)
        ):
            return None
        return lambda: told(row)

    async def settle(
        self, settlement: Settlement, *, what: str, after: BaseException | None = None
    ) -> bool:
        """Settle with bounded, logged retries of transient errors: ``True`` when the write
        matched, ``False`` when the lock was lost. A miss after an attempt that may have landed
        (its reply lost; ``after`` is an earlier such attempt's error) is settled by reading the
        record back. ``what`` names the write in the retry logs."""
        ambiguous = isinstance(after, TransientStoreError) and after.write_may_have_applied

        async def attempt() -> bool:
            nonlocal ambiguous
            try:
                return await self._batches.submit(settlement)
            except TransientStoreError as error:
                ambiguous = ambiguous or error.write_may_have_applied
                raise

        owned = await retry_transient(attempt, what=what)
        if not owned and ambiguous:
            record = await retry_transient(
                lambda: self._store.get_record(settlement.job_id), what=f"verify {what}"
            )
            owned = settled_as_commanded(settlement, record)
        told = self._step_end_teller(settlement)
        if owned and told is not None:
            told()
        return owned


def _telling(
    callback: Callable[[Verdict], None], told: Callable[[], None]
) -> Callable[[Verdict], None]:
    """``callback``, then ``told()`` once the settlement matched."""

    def settled(verdict: Verdict) -> None:
        callback(verdict)
        if verdict is True:
            told()

    return settled


def label_of(command: Command, job_name: str) -> str:
    """How the retry logs name a settlement of ``command`` for a job of ``job_name``."""
    return f"{_LABELS[type(command)]} {job_name}"


def _record_of(settlement: Settlement) -> str:
    return settlement.job_id


_LABELS: dict[type, str] = {
    Delete: "complete",
    Reschedule: "reschedule",
    Defer: "defer",
    MarkTerminal: "mark maxTriesReached",
    Release: "release lock at shutdown",
    DemoteStale: "demote stale job",
}
