"""The settle role of the in-memory store: the rows a call carries inserted first (the first row
of an execution winning whole), then each settlement applied under the state's one lock, with
exact verdicts (whether this call applied it), so without the leeway the port allows stores that
learn only counts. What each command writes is :mod:`dogs_core.domain.settle`'s table. See
:mod:`dogs_testing.memory`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from dogs_core.domain.outcome import (
    Defer,
    Delete,
    DemoteStale,
    MarkTerminal,
    Release,
    Reschedule,
)
from dogs_core.domain.records import Hold, JobRecord, JobStatus, JobType, to_millis
from dogs_core.domain.settle import Settlement, check_settlements, rows_of
from dogs_testing._memory_state import _NO_LOCK, MemoryState, _history_row, _ms

__all__ = ["MemorySettle"]


class MemorySettle(MemoryState):
    """The fenced writes that end executions."""

    def settle_many(self, settlements: Sequence[Settlement]) -> list[bool]:
        checked = check_settlements(settlements)
        rows = [_history_row(row) for row in rows_of(checked)]  # copied before anything is written
        with self._state():
            for row in rows:
                self._insert_history(row)
            return [self._apply(settlement) for settlement in checked]

    def _apply(self, settlement: Settlement) -> bool:
        old = self._fenced(settlement.job_id, settlement.lock_id)
        if old is None:
            return False
        command = settlement.command
        new: JobRecord | None
        if isinstance(command, Delete):
            if old.type is not JobType.EVENT:
                return False
            new = None
        elif isinstance(command, Reschedule | Defer):
            priority = command.priority if isinstance(command, Reschedule) else None
            reset = isinstance(command, Reschedule) and command.reset_tries
            tries = command.tries if command.tries is not None else 0 if reset else old.tries
            hold = command.hold if isinstance(command, Defer) else None
            new = dataclasses.replace(
                old,
                next_run_at=to_millis(command.next_run_at),
                priority=old.priority if priority is None else priority,
                tries=tries,
                held=old.held if hold is None else _stored_hold(hold),
                # a reset of the tries starts a new run: the ended run's steps go
                steps=() if reset and command.tries is None else old.steps,
                **_NO_LOCK,
            )
        elif isinstance(command, MarkTerminal):
            if old.type is not JobType.EVENT:
                return False
            new = dataclasses.replace(
                old,
                status=JobStatus.MAX_TRIES_REACHED,
                max_tries_reached_at=to_millis(command.now),
                expires_at=_ms(command.expires_at),
                **_NO_LOCK,
            )
        elif isinstance(command, Release):
            moment = to_millis(command.now)
            new = dataclasses.replace(old, locked_until=moment, lock_released_at=moment)
        else:
            assert isinstance(command, DemoteStale)
            new = dataclasses.replace(old, priority=0)
        self._put(old, new)
        if new is not None and not isinstance(command, MarkTerminal | DemoteStale):
            self._feeds.offer_record(new)  # released or moved: it may be claimable
        return True


def _stored_hold(hold: Hold) -> Hold:
    """``hold`` with its times at the store's precision (milliseconds)."""
    return Hold(hold.reason, to_millis(hold.since), to_millis(hold.until))
