"""Settling an execution: the one fenced write that ends it, or pushes its record back.

:mod:`dogs_core.domain.outcome` decides *what* follows an execution (a :data:`Command`); a
:class:`Settlement` says *to which record*, under which lock: the runtime hands batches of them to
the store's ``settle_many`` (the settle role of :mod:`dogs_core.ports`), which applies each to
record ``job_id`` only while it still holds ``lock_id`` and answers, per settlement, whether it
did. Every final write of an execution goes this one way (River's "set state if running"): a
completion (``Delete``), a retry or next run (``Reschedule``), the attempt limit
(``MarkTerminal``), a release at shutdown (``Release``), a push back without a run (``Defer``),
the demotion of a stale job (``DemoteStale``).

What each command writes (the store's side of the contract):

================  ====================================================================
``Delete``        delete the record; only an event record (a recurrent one never ends)
``Reschedule``    ``next_run_at``, ``priority`` when given, ``tries`` (given, or 0 when
                  ``reset_tries``), and the lock ended (every lock field unset)
``Defer``         ``next_run_at``, ``tries`` when given, the lock ended; priority kept
``MarkTerminal``  event record only: status ``maxTriesReached``, ``max_tries_reached_at``,
                  ``expires_at`` (unset when ``None``), the lock ended
``Release``       ``locked_until = lock_released_at = now``; ``lock_id`` and the owner kept,
                  so this execution's late writes still fail their fence
``DemoteStale``   ``priority = 0``; the lock left to expire
================  ====================================================================

:func:`settled_as_commanded` tells, from the record read back after a write whose reply was
lost, whether that write had landed; a store that learns only counts from a batched write uses
it too.
"""

from __future__ import annotations

from collections.abc import Sequence

from dogs_core.domain import validation
from dogs_core.domain.outcome import (
    Command,
    Defer,
    Delete,
    DemoteStale,
    MarkTerminal,
    Release,
    Reschedule,
)
from dogs_core.domain.records import HistoryRecord, JobRecord, JobStatus, JobType, to_millis
from dogs_core.domain.values import value
from dogs_core.errors import InvalidOptionError

__all__ = ["Settlement", "check_settlements", "rows_of", "settled_as_commanded"]

_COMMANDS = (Delete, Reschedule, MarkTerminal, Release, Defer, DemoteStale)


@value
class Settlement:
    """``command`` for record ``job_id``, fenced by ``lock_id``: applied only while the record
    still holds that lock. ``row`` is the history row of the execution it ends, written before
    any settlement of the call whatever becomes of this one (the first row written for an
    execution wins, as ``write_history_many``'s do), so that no record is settled before its
    execution's row is stored (docs/reliability.md, "History at a crash")."""

    job_id: str
    lock_id: str
    command: Command
    row: HistoryRecord | None = None


def check_settlements(settlements: Sequence[Settlement]) -> list[Settlement]:
    """The settlements of one ``settle_many`` call as a list. Each names one record once and
    carries a command (with a ``tries`` of at least 0 when it sets one): otherwise
    :class:`InvalidOptionError` naming the item, before anything is written (a record given
    twice in one unordered batch would have no defined outcome)."""
    checked = list(settlements)
    seen: set[str] = set()
    for index, settlement in enumerate(checked):
        if not isinstance(settlement, Settlement):
            raise InvalidOptionError(f"settlements[{index}]", settlement, "expected a Settlement")
        if not isinstance(settlement.command, _COMMANDS):
            raise InvalidOptionError(
                f"settlements[{index}].command",
                settlement.command,
                "expected one of " + ", ".join(kind.__name__ for kind in _COMMANDS),
            )
        tries = getattr(settlement.command, "tries", None)
        if tries is not None:
            validation.integer(f"settlements[{index}].command.tries", tries, minimum=0)
        if settlement.job_id in seen:
            reason = "is repeated; give each record once per call"
            raise InvalidOptionError(
                f"settlements[{index}].job_id",
                settlement.job_id,
                reason,
                message=f"settlements: job id {settlement.job_id!r} {reason}",
            )
        seen.add(settlement.job_id)
    return checked


def rows_of(settlements: Sequence[Settlement]) -> list[HistoryRecord]:
    """The history rows the settlements carry, in order (written before any settlement)."""
    return [settlement.row for settlement in settlements if settlement.row is not None]


def settled_as_commanded(settlement: Settlement, record: JobRecord | None) -> bool:
    """Whether ``record`` (read back, ``None`` when gone) shows ``settlement`` applied.

    A record whose lock was ended (``Reschedule``, ``Defer``, ``MarkTerminal``) shows the
    command's own values and no lock; a record still locked (``Release``, ``DemoteStale``) still
    holds this settlement's lock id. A completion's record is gone: someone else deleting it
    (an operator's cancel) looks the same, which is why a store may only use this where the
    batch's counts leave the doubt."""
    command = settlement.command
    if isinstance(command, Delete):
        return record is None
    if record is None:
        return False
    if isinstance(command, Reschedule | Defer):
        tries = command.tries
        if isinstance(command, Reschedule) and tries is None and command.reset_tries:
            tries = 0
        return (
            record.lock_id is None
            and record.next_run_at == to_millis(command.next_run_at)
            and (tries is None or record.tries == tries)
            and (
                not isinstance(command, Reschedule)
                or command.priority is None
                or record.priority == command.priority
            )
        )
    if isinstance(command, MarkTerminal):
        return (
            record.lock_id is None
            and record.type is JobType.EVENT
            and record.status is JobStatus.MAX_TRIES_REACHED
            and record.max_tries_reached_at == to_millis(command.now)
        )
    if record.lock_id != settlement.lock_id:
        return False
    if isinstance(command, Release):
        return record.lock_released_at == to_millis(command.now)
    return record.priority == 0  # DemoteStale
